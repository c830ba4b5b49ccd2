"""Request and response bodies of the legal hold endpoints."""

from __future__ import annotations

import uuid
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from api.text import PrintableName


class LegalHoldPut(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    reason: PrintableName = Field(
        min_length=1,
        max_length=2000,
        description="Why the account's data must be kept (a case, an investigation). Stored in PostgreSQL for "
        "admins only: never in workflow history, never on a receipt.",
        examples=["Litigation hold, case 2026-CV-0042"],
    )


class LegalHoldOut(BaseModel):
    account_id: uuid.UUID
    held: bool = Field(description="Whether this hold is in force: true until it is released.")
    reason: str
    placed_at: datetime
    released_at: datetime | None = Field(description="When the hold was released; null while it is in force.")
