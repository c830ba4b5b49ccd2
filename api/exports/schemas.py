from __future__ import annotations

import uuid
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from lifecycle.statuses import ExportStatus


class ExportAccepted(BaseModel):
    id: uuid.UUID
    status: ExportStatus = Field(description="`pending` or `writing` (a repeat joins the export in progress).")
    status_url: str


class ExportOut(BaseModel):
    id: uuid.UUID
    status: ExportStatus = Field(description="`pending`, `writing`, `ready`, `expired` or `failed`.")
    requested_at: datetime
    size_bytes: int | None = Field(description="The ZIP's size, once ready.")
    sha256: str | None = Field(description="The ZIP's SHA-256, hex, once ready.")
    expires_at: datetime | None = Field(description="When the archive and its link expire, once ready.")
    download_url: str | None = Field(
        description="Signed link that works without an API key until `expires_at`; only while `ready`."
    )


class AccountDeletionOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    export_first: bool = Field(
        default=False,
        description="Export the account's data first: the deletion starts once the archive is ready and its "
        "link mailed; the link keeps working after the account is gone.",
    )
