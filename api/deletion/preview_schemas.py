"""The answer of the deletion previews (GET /account/deletion/preview, GET /bots/{id}/deletion/preview)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from lifecycle.deletion.contracts import ReceiptSubject
from lifecycle.statuses import ExportStatus


class PreviewSubject(BaseModel):
    kind: ReceiptSubject
    id: uuid.UUID


class PreviewServiceCount(BaseModel):
    rows: int | None = Field(
        description="Rows of the subject the service holds now, which a deletion would remove; null when the "
        "service did not answer within seconds (its workers down or all busy): unknown, not zero."
    )
    files: int | None = Field(description="Files or stored objects of the subject the service holds; null: unknown.")
    estimated: bool = Field(
        description="Whether a count is an estimate: a service may answer a large count from an estimate (the "
        "project's own services, above 10,000 rows of a table, from a sample of the bot's ids) and says so; below "
        "that size, and for a service that does not estimate, the counts are exact. False when unknown."
    )


class PreviewExport(BaseModel):
    id: uuid.UUID
    status: ExportStatus
    expires_at: datetime | None = Field(
        description="When the archive is deleted: the end of its retention (EXPORT_RETENTION after it is ready); "
        "null while it is still being written."
    )
    after_deletion: Literal["kept", "removed"] = Field(
        description="What the deletion does with it. `removed`: an account deletion, with or without "
        "`export_first`, deletes every earlier export (its archive in the store and its record) before its receipt, "
        "and its signed link then answers 410; with `export_first` it makes a new export first, which it keeps "
        "until that one's retention ends, listed on the receipt. `kept`: a bot deletion leaves the account's "
        "exports alone."
    )


class DeletionPreviewOut(BaseModel):
    """What a deletion of the subject would remove, asked of every registered service now; nothing is changed."""

    subject: PreviewSubject
    services: dict[str, PreviewServiceCount] = Field(
        description="Per registered deletion service, by name: what it holds of the subject (of an account: of "
        "every bot it has)."
    )
    exports: list[PreviewExport] = Field(
        description="The account's exports that exist (being written or ready), and what the deletion would do "
        "with each."
    )
    processors: list[str] = Field(
        description="The registered processors an account deletion would tell, each with one signed erasure "
        "request (PUT /processors/{name}); a bot deletion tells none."
    )
    held: bool = Field(
        description="Whether a legal hold is in force on the account (PUT /accounts/{id}/legal-hold): a deletion "
        "requested now is accepted but deletes nothing, `held`, until the hold is released."
    )
    estimated_duration_seconds: int | None = Field(
        description="How long the services would take to delete those rows at the current deletion budget: the "
        "rows divided by the budget's rate, as the services would share it (the rule the deletion status's "
        "`estimated_completion` uses). Null when the budget is unlimited or a service's count is unknown; 0 with "
        "nothing to delete. It leaves out the grace period, an `export_first` export, and an account's sites."
    )
    due_at: datetime = Field(
        description="When a deletion requested now would be due: now plus ERASURE_DUE_WITHIN (30 days by default; "
        "GDPR Art. 12(3)), later by the time a legal hold stops its clock."
    )
