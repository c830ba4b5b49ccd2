"""Every status the service knows, as StrEnums shared by the SQL, the API schemas and the workflows, and which of
them are terminal: the one place that says so, for the API's answers, the event streams and the reconcilers.

A value is written to `sites.status`, a search attribute or a JSON answer as its plain string, so the
enum member and the stored text are the same thing; CHECK constraints in the migrations list the same values.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum


class DeletionState(StrEnum):
    """A bot or account deletion, as `deletion_requests.status`, the API and the `LifecycleStatus` search attribute
    show it. A new state is a member here, in OPEN_DELETION_STATES if a run still works on it, and a
    migration that widens the CHECK constraint `ck_deletion_requests_status`."""

    # Recorded by the API, its run not begun yet: the run records `running` as it begins, and the reconciler starts
    # any run left `accepted`.
    ACCEPTED = "accepted"
    # In its grace period (ACCOUNT_DELETION_GRACE): signed out, nothing deleted yet, restorable until `deletes_at`.
    SCHEDULED = "scheduled"
    # Waiting its turn behind the account's other deletions: a DELETE /bots deletion runs in one of its account's
    # ACCOUNT_DELETIONS_AT_ONCE lanes, so one account's mass deletion keeps no other account's work waiting
    # (workflows/deletion/account_lane.py).
    QUEUED = "queued"
    RUNNING = "running"
    PAUSED = "paused"
    # Nobody to reach yet (no deletion service is registered, say): nothing is deleted, nothing is claimed, and the
    # deletion goes on by itself once the cause is gone; `deletion_requests.status_reason` says why.
    WAITING = "waiting"
    WAITING_FOR_OPERATOR = "waiting_for_operator"
    # A legal hold is in force on the account (PUT /accounts/{id}/legal-hold): nothing is deleted until it is
    # released, and then the deletion goes on from where it stopped (workflows/deletion/legal_hold.py).
    HELD = "held"
    COMPLETED = "completed"
    # Completed, but an operator skipped a service, so some data (and the bot or account row) remains.
    INCOMPLETE = "incomplete"
    # Closed without completing; the data stands where the run left it, and a repeat finishes it.
    CANCELLED = "cancelled"
    TERMINATED = "terminated"
    FAILED = "failed"
    # An admin restored the account during its grace period: the run ended having deleted nothing.
    RESTORED = "restored"


# Open: a run works on the deletion, records each of these as it enters it (workflows/deletion/status_recorder.py) and
# publishes it in its LifecycleStatus search attribute; the reconciler looks at the deletions recorded as open.
OPEN_DELETION_STATES = frozenset(
    {
        DeletionState.ACCEPTED,
        DeletionState.SCHEDULED,
        DeletionState.QUEUED,
        DeletionState.RUNNING,
        DeletionState.PAUSED,
        DeletionState.WAITING,
        DeletionState.WAITING_FOR_OPERATOR,
        DeletionState.HELD,
    }
)
# Closed without completing: the data stands where the run left it, and a repeated request finishes it.
CLOSED_WITHOUT_COMPLETING = frozenset({DeletionState.CANCELLED, DeletionState.TERMINATED, DeletionState.FAILED})
# Terminal: every other state. No run works on the deletion any more, so its status stops changing by itself and a
# stream of it ends: completed, incomplete, restored, or closed without completing.
TERMINAL_DELETION_STATES = frozenset(DeletionState) - OPEN_DELETION_STATES


def requested_deletion_state(*, scheduled: bool, held: bool) -> DeletionState:
    """How a deletion request stands until its run records otherwise: in its grace period first (a legal hold is
    waited for once the grace is over), then held, else accepted."""
    if scheduled:
        return DeletionState.SCHEDULED
    return DeletionState.HELD if held else DeletionState.ACCEPTED


class ProcessorAnswer(StrEnum):
    """A processor's answer to one deletion's erasure request (`processor_erasures.status`), as receipts show it."""

    # Told (or about to be), not yet acknowledged: requests are retried with back-off until it answers 2xx.
    PENDING = "pending"
    ACKNOWLEDGED = "acknowledged"
    # An operator's `skip_processor` for this deletion, or the processor was retired while pending.
    SKIPPED = "skipped"


class Throttle(StrEnum):
    """What slows a running deletion below its pace, as `throttled` shows it (lifecycle/deletion/budget.py)."""

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
# The others: a tombstone, kept so the API can answer, holding nothing; it goes with the account.
TOMBSTONE_SITE_STATUSES = tuple(status for status in SiteStatus if status not in DOMAIN_HOLDING_SITE_STATUSES)
# Terminal: the site stops changing by itself (built, rolled back, or deleted), so a stream of it ends. A failed
# rollback is not: it waits for an operator's `retry`.
TERMINAL_SITE_STATUSES = frozenset({SiteStatus.ACTIVE, SiteStatus.ROLLED_BACK, SiteStatus.DELETED})
# A run works on a site in these (or should: the site reconciler starts one if none is open).
UNSETTLED_SITE_STATUSES = (SiteStatus.PROVISIONING, SiteStatus.ROLLING_BACK, SiteStatus.DELETING)


class SiteDbServerState(StrEnum):
    """A site-database server of the catalog (`site_db_servers.state`): only an active one takes new sites; the
    sites already on a draining or down one stay there and keep working (lifecycle/sites/servers.py)."""

    ACTIVE = "active"
    # Takes no new site; an operator is emptying it, or it is to be retired.
    DRAINING = "draining"
    # Unreachable, by an operator's word or the health check's: takes no new site.
    DOWN = "down"


class SitePoolState(StrEnum):
    """A database of a server's warm pool (`site_db_pool.state`), recorded in the product database.

    The row is written before the database is made and becomes `ready` only once it is whole, so a row still
    `creating` long after is half-made (the pool's reconciler removes it); `claimed` is for good: a claimed
    database never returns to the pool, whatever becomes of its site.
    """

    CREATING = "creating"
    READY = "ready"
    CLAIMED = "claimed"


class SiteDbServerStateSetBy(StrEnum):
    """Who set a server's state (`site_db_servers.state_set_by`): the health check changes only its own."""

    OPERATOR = "operator"
    # Down after failed checks, active again after passed ones (activities/sites/health_check.py).
    HEALTH_CHECK = "health_check"


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


def sql_list(statuses: Iterable[StrEnum]) -> str:
    """`'a', 'b'` for `status IN (...)` where a bind parameter will not do: a partial index's predicate, and a
    query the planner must match with it."""
    return ", ".join(f"'{status.value}'" for status in statuses)


# The sites the site reconciler looks at: unsettled, or with a teardown requested that has not finished. The
# predicate of the partial index ix_sites_unsettled (migration 0002) and of the reconciler's query alike.
UNSETTLED_SITES_SQL = (
    f"status IN ({sql_list(UNSETTLED_SITE_STATUSES)}) OR "
    f"(deletion_requested_at IS NOT NULL AND status <> '{SiteStatus.DELETED.value}')"
)

# The deletions recorded as open, whose run may have closed without saying so (terminated, say): the predicate of
# the partial index ix_deletion_requests_open (migration 0009) and of the reconciler's query alike.
OPEN_DELETIONS_SQL = f"status IN ({sql_list(sorted(OPEN_DELETION_STATES))})"
