"""What the site workflows and activities exchange beyond lifecycle.contracts: rollback failures, reconciles."""

from __future__ import annotations

from dataclasses import dataclass, field


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
