"""Contracts of more than one feature: operator alerts and the reconciler's result."""

from __future__ import annotations

from dataclasses import dataclass

from lifecycle.exports.contracts import ExportsReconciled
from lifecycle.sites.contracts import SitesReconciled
from lifecycle.statuses import DeletionState


@dataclass
class AlertInput:
    workflow_id: str
    subject: str
    reason: str


@dataclass
class DeletionStatusChange:
    """A deletion's new status, recorded in deletion_requests by the run that made the change."""

    workflow_id: str
    status: DeletionState
    # Why the deletion is in this status, where the status alone does not say (a `waiting` deletion's); None else.
    reason: str | None = None


@dataclass
class WatchResult:
    """What the reconciler's watch found (activities/watch.py): stuck runs, erasures near or past their due date."""

    stuck: int = 0
    near_due: int = 0
    overdue: int = 0


@dataclass
class ReconcileResult:
    bot_deletions_started: int = 0
    account_deletions_started: int = 0
    # Deletions recorded as open whose run had closed, or been reset, without recording it.
    deletion_statuses_recorded: int = 0
    sites: SitesReconciled | None = None
    exports: ExportsReconciled | None = None
    watch: WatchResult | None = None
