"""Every workflow and activity input and output: thin dataclasses carrying ids, never personal data."""

from __future__ import annotations

from dataclasses import dataclass, field

# Sites

SITE_STEPS = ("metadata", "filesystem", "database", "bootstrap")


@dataclass(frozen=True)
class SiteCreationInput:
    site_id: str
    account_id: str


@dataclass(frozen=True)
class SiteDeletionInput:
    site_id: str


@dataclass(frozen=True)
class SiteRef:
    """What every site activity takes: the site id; the activity reads the rest from the database."""

    site_id: str


@dataclass(frozen=True)
class SiteRollbackInput:
    site_id: str
    reason: str
    failed_step: str | None = None


@dataclass
class SiteProgress:
    """The `progress` query's answer: the same status and steps the API shows."""

    status: str
    steps: dict[str, str] = field(default_factory=dict)
    error: str | None = None
