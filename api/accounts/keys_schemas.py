from __future__ import annotations

import uuid
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

# The longest lifetime `expires_in` may ask for: ten years.
MAX_EXPIRES_IN = 10 * 365 * 24 * 3600


class ApiKeyCreate(BaseModel):
    """An optional lifetime; without one the key does not expire. Seconds rather than a moment: every value the
    schema allows is one the API accepts (a moment could be past)."""

    model_config = ConfigDict(extra="forbid")

    expires_in: int | None = Field(
        default=None, ge=1, le=MAX_EXPIRES_IN, description="Seconds from now until the key stops opening the account."
    )


class ApiKeyCreated(BaseModel):
    id: uuid.UUID
    api_key: str = Field(description="Shown this once; only its hash is stored.")
    expires_at: datetime | None = Field(description="When the key stops opening the account; null: never.")


class ApiKeyOut(BaseModel):
    id: uuid.UUID
    prefix: str | None = Field(
        description="The key's first 8 characters, to tell keys apart; null for a key issued before keys kept one."
    )
    created_at: datetime
    expires_at: datetime | None = Field(description="When the key stops opening the account; null: never.")
    last_used_at: datetime | None = Field(
        description="When the key last opened the account, to the minute (a use within a minute of the last "
        "recorded one is not recorded); null: never."
    )
