from __future__ import annotations

import uuid

from pydantic import BaseModel, ConfigDict, Field

from api.text import PrintableName


class BotCreate(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    name: PrintableName = Field(min_length=1, max_length=200)


class BotOut(BaseModel):
    id: uuid.UUID
    name: str
