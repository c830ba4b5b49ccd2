"""Every status the service knows, as StrEnums shared by the SQL, the API schemas and the workflows.

A value is written to `sites.status`, a search attribute or a JSON answer as its plain string, so the
enum member and the stored text are the same thing; CHECK constraints in the migrations list the same values.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum


class DeletionState(StrEnum):
    """A bot or account deletion, as the API and the `LifecycleStatus` search attribute show it."""

    # In its grace period (ACCOUNT_DELETION_GRACE): signed out, nothing deleted yet, restorable until `deletes_at`.
    SCHEDULED = "scheduled"
    RUNNING = "running"
    PAUSED = "paused"
    WAITING_FOR_OPERATOR = "waiting_for_operator"
    COMPLETED = "completed"
    # Completed, but an operator skipped a service, so some data (and the bot or account row) remains.
    INCOMPLETE = "incomplete"
    # Closed without completing; the data stands where the run left it, and a repeat finishes it.
    CANCELLED = "cancelled"
    TERMINATED = "terminated"
    FAILED = "failed"
    # An admin restored the account during its grace period: the run ended having deleted nothing.
    RESTORED = "restored"


class Throttle(StrEnum):
    """What slows a running deletion below its pace, as `throttled` shows it (lifecycle/deletion_budget.py)."""

    # Waiting for the shared rows/s budget.
    BUDGET = "budget"
    # Pressure signals: the deleters run at a fraction of the budget while one shows.
    LOCK_WAITS = "lock_waits"
    AUTOVACUUM = "autovacuum"
    REPLICA_LAG = "replica_lag"


def strongest_throttle(throttles: Iterable[Throttle | None]) -> Throttle | None:
    """A pressure signal explains more than the budget does; the budget more than nothing."""
    present = {throttle for throttle in throttles if throttle is not None}
    pressure = sorted(present - {Throttle.BUDGET})
    if pressure:
        return pressure[0]
    return Throttle.BUDGET if Throttle.BUDGET in present else None


class SiteStatus(StrEnum):
    PROVISIONING = "provisioning"
    ACTIVE = "active"
    ROLLING_BACK = "rolling_back"
    ROLLED_BACK = "rolled_back"
    # An undo failed for good: the site keeps its domain and waits for an operator's `retry`.
    ROLLBACK_FAILED = "rollback_failed"
    DELETING = "deleting"
    DELETED = "deleted"


# Statuses in which a site still holds its domain (and possibly a database, role and files).
DOMAIN_HOLDING_SITE_STATUSES = (
    SiteStatus.PROVISIONING,
    SiteStatus.ACTIVE,
    SiteStatus.ROLLING_BACK,
    SiteStatus.ROLLBACK_FAILED,
    SiteStatus.DELETING,
)


class StepStatus(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    COMPENSATING = "compensating"
    COMPENSATED = "compensated"
    # The undo failed for good; an operator's `retry` runs it again.
    COMPENSATION_FAILED = "compensation_failed"


class NotificationState(StrEnum):
    """A claimed notification: `sending` until the SMTP server took it, then `sent`."""

    SENDING = "sending"
    SENT = "sent"


class AlertDelivery(StrEnum):
    PENDING = "pending"
    DELIVERED = "delivered"
    FAILED = "failed"
    # No ALERT_WEBHOOK_URL: the row and the log line are the alert.
    NOT_CONFIGURED = "not_configured"


class ExportStatus(StrEnum):
    """An account data export (`account_exports.status`, the API and the `LifecycleStatus` attribute)."""

    PENDING = "pending"
    WRITING = "writing"
    # The archive is complete, checksummed and downloadable until `expires_at`.
    READY = "ready"
    # Retention ran out (or an operator expedited it): the archive is deleted.
    EXPIRED = "expired"
    # Nothing could be exported: the account was gone before the export began.
    FAILED = "failed"


# An export is "running" while it has no archive yet: a repeated request joins it.
OPEN_EXPORT_STATUSES = (ExportStatus.PENDING, ExportStatus.WRITING)
