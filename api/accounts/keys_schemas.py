from __future__ import annotations

import uuid
from datetime import datetime

from pydantic import BaseModel, Field


class ApiKeyCreated(BaseModel):
    id: uuid.UUID
    api_key: str = Field(description="Shown this once; only its hash is stored.")


class ApiKeyOut(BaseModel):
    id: uuid.UUID
    prefix: str | None = Field(
        description="The key's first 8 characters, to tell keys apart; null for a key issued before keys kept one."
    )
    created_at: datetime
