from __future__ import annotations

import uuid
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from api.schemas.text import PrintableText


class BotCreate(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    name: PrintableText = Field(min_length=1, max_length=200)


class BotOut(BaseModel):
    id: uuid.UUID
    name: str


class DeletionAccepted(BaseModel):
    workflow_id: str
    status: str = Field(description="`running`, or `completed` when a previous request already finished it.")
    status_url: str | None = Field(description="Where to follow the deletion; none once the caller is gone.")


class ServiceCount(BaseModel):
    deleted: int
    total: int


class DeletionOut(BaseModel):
    workflow_id: str
    status: str = Field(description="`running`, `paused`, `waiting_for_operator` or `completed`.")
    progress: dict[str, ServiceCount]
    requested_at: datetime
    completed_at: datetime | None
