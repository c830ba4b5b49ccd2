"""Inputs and outputs of the account export workflow and its activities: ids, names and counts, never PII."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class AccountExportInput:
    export_id: str
    account_id: str
    # How long the archive is kept once ready (settings.export_retention when the export was requested).
    retention_seconds: float


@dataclass(frozen=True)
class ExportRef:
    export_id: str


@dataclass(frozen=True)
class ExportPart:
    """One JSON-lines file of the archive: a table of the gateway's own rows of the account (the account, its
    bots); the services' rows are their parts (ServicePart)."""

    name: str
    table: str


@dataclass
class ExportPlan:
    """What begin_account_export found; `found` False when the account was already gone."""

    found: bool
    parts: list[ExportPart] = field(default_factory=list)
    # The account's bots, told to each registered service that is asked for its part (ExportSubjectData).
    bot_ids: list[str] = field(default_factory=list)
    # `expired` or `failed` when an earlier run settled this export (a reset runs it again): nothing to redo.
    settled: str | None = None


@dataclass(frozen=True)
class WritePartsInput:
    export_id: str
    account_id: str
    parts: list[ExportPart]


@dataclass
class PartsProgress:
    """Heartbeat details of write_export_parts: parts are done in order, each renamed into place when complete."""

    parts_done: int = 0
    rows: int = 0


@dataclass(frozen=True)
class ServicePart:
    """A registered service's part of the archive, as its ExportSubjectData answered: one object in the store under
    the prefix the export gave (lifecycle/object_keys.py), or none when it holds nothing of the account."""

    service: str
    object_key: str
    rows: int
    files: int
    sha256: str
    size_bytes: int
    content_type: str
    # Files the service found missing, and those it left out with the rule each broke (ids only).
    files_missing: int = 0
    files_refused: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class AssembleInput:
    export_id: str
    parts: list[ExportPart]
    service_parts: list[ServicePart] = field(default_factory=list)


@dataclass(frozen=True)
class ArchiveFacts:
    archive_name: str
    size_bytes: int
    sha256: str
    entries: int


@dataclass(frozen=True)
class MarkReadyInput:
    export_id: str
    facts: ArchiveFacts
    # Unix time the archive (and its download link) expires; the workflow's retention timer ends then.
    expires_at: int


@dataclass
class AccountExportResult:
    export_id: str
    status: str
    size_bytes: int = 0
    sha256: str = ""


@dataclass
class ExportsReconciled:
    """What the reconciler did to exports no open run will settle (activities/exports/reconciler.py)."""

    examined: int = 0
    expired: int = 0
    started: int = 0
    # Cancelled or terminated by an operator, and no account deletion waits for them: the user's repeat decides.
    left_alone: list[str] = field(default_factory=list)
