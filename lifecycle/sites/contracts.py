"""What the site workflows and activities exchange: ids, steps, progress, never PII."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from lifecycle.sites.errors import SiteErrorCode
from lifecycle.statuses import SiteStatus, StepStatus


@dataclass(frozen=True)
class SiteRollbackFailure:
    """Undos that failed for good: the site keeps its domain and waits for an operator's `retry`."""

    site_id: str
    failed_steps: list[str]
    reason: str


@dataclass
class SitesReconciled:
    """What one `reconcile_sites` pass found and did."""

    examined: int = 0
    open_runs_skipped: int = 0
    creations_started: int = 0
    rollbacks_started: int = 0
    deletions_started: int = 0
    # Unsettled, but no rule applies (for example a creation that completed while the site still provisions).
    left_alone: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class SiteReconcileInput:
    # Rows read per query: one heartbeat each, and a retried attempt resumes after the last finished page.
    page_size: int = 200


class SiteStep(StrEnum):
    """The site saga's steps, by the names the API, `sites.steps`, the activities and the workflow use."""

    METADATA = "metadata"
    FILESYSTEM = "filesystem"
    DATABASE = "database"
    BOOTSTRAP = "bootstrap"


# In the order they run.
SITE_STEPS = tuple(SiteStep)


@dataclass(frozen=True)
class SiteCreationInput:
    site_id: str
    account_id: str
    # Set by the site reconciler for a creation that closed without completing: undo, don't build.
    roll_back: bool = False


@dataclass(frozen=True)
class SiteDeletionInput:
    site_id: str


@dataclass(frozen=True)
class SiteRef:
    """What every site activity takes: the site id; the activity reads the rest from the database."""

    site_id: str


@dataclass(frozen=True)
class SiteMove:
    """A site whose database step found `server` unreachable, to be placed on another server if it holds nothing
    there (activities/sites/placement.py)."""

    site_id: str
    server: str


@dataclass(frozen=True)
class SiteRollbackInput:
    site_id: str
    reason: str  # the cause, for the worker's log
    failed_step: str | None = None
    # What the customer is told (sites.error); the default is what an input from before the codes means.
    code: SiteErrorCode = SiteErrorCode.FAILED


@dataclass
class SiteProgress:
    """The `progress` query's answer: the same status and steps the API shows, and the failure's cause where
    the API shows its code only (lifecycle/sites/errors.py)."""

    status: SiteStatus
    steps: dict[str, StepStatus] = field(default_factory=dict)
    error: str | None = None


@dataclass(frozen=True)
class SiteDbPoolInput:
    """The warm pool of one site-database server (workflows/sites/pool.py)."""

    server: str


@dataclass(frozen=True)
class SiteDbPoolPass:
    """What one pass over a server's pool did: `more` while it is still short of its target."""

    ready: int = 0
    created: int = 0
    dropped: int = 0
    half_made_removed: int = 0
    more: bool = False


@dataclass
class SiteServersChecked:
    """What one health check of the site-database servers found and changed (activities/sites/health_check.py)."""

    checked: int = 0
    unreachable: list[str] = field(default_factory=list)
    marked_down: list[str] = field(default_factory=list)
    marked_active: list[str] = field(default_factory=list)


# Sent by the health check to the creations of the sites on a server it saw come back: a step waiting for that
# server tries again at once rather than at the end of its wait (workflows/sites/creation.py).
SERVER_BACK_SIGNAL = "database_server_back"
