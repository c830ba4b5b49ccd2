"""deletion status read model: a deletion's status lives in deletion_requests, written by its runs and the
reconciler, so the API and the streams read PostgreSQL only

Revision ID: 0009
Revises: 0008
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Frozen copies of lifecycle.statuses.DeletionState and OPEN_DELETIONS_SQL at this revision.
_DELETION_STATES = (
    "scheduled",
    "running",
    "paused",
    "waiting_for_operator",
    "completed",
    "incomplete",
    "cancelled",
    "terminated",
    "failed",
    "restored",
)
_OPEN = "status IN ('paused', 'running', 'scheduled', 'waiting_for_operator')"

# What the status API answered from the database alone before this revision, for the rows already there: a
# deletion that recorded its completion is completed (incomplete if an operator skipped a service of it, or of
# one of its account's bots); one in its grace period is scheduled; any other is running. The reconciler then
# records how the open ones' runs stand or closed, from Temporal.
_BACKFILL = """
UPDATE deletion_requests r SET status = CASE
    WHEN r.completed_at IS NULL THEN 'scheduled'  -- in its grace period: deletes_at is ahead (WHERE)
    WHEN EXISTS (
        SELECT FROM deletion_progress p
        WHERE p.skipped AND (p.workflow_id = r.workflow_id OR (r.kind = 'account' AND p.workflow_id IN (
            SELECT b.workflow_id FROM deletion_requests b WHERE b.account_id = r.account_id AND b.kind = 'bot')))
    ) THEN 'incomplete'
    ELSE 'completed' END
WHERE r.completed_at IS NOT NULL OR r.deletes_at > now()
"""

# Revision 0005's deletion trigger fired on every UPDATE OF completed_at, changed or not; a deletion's event now
# also marks a change of its status, and only real changes. A WHEN clause cannot name OLD on INSERT: two triggers.
_TRIGGERS = (
    "CREATE TRIGGER deletion_requests_created_event AFTER INSERT ON deletion_requests"
    " FOR EACH ROW EXECUTE FUNCTION lifecycle_events_deletion()",
    "CREATE TRIGGER deletion_requests_changed_event AFTER UPDATE OF completed_at, status ON deletion_requests"
    " FOR EACH ROW WHEN (OLD.completed_at IS DISTINCT FROM NEW.completed_at OR OLD.status IS DISTINCT FROM NEW.status)"
    " EXECUTE FUNCTION lifecycle_events_deletion()",
)
_TRIGGER_0005 = (
    "CREATE TRIGGER deletion_requests_event AFTER INSERT OR UPDATE OF completed_at ON deletion_requests"
    " FOR EACH ROW EXECUTE FUNCTION lifecycle_events_deletion()"
)


def _in(values: Sequence[str]) -> str:
    return ", ".join(f"'{value}'" for value in values)


def upgrade() -> None:
    op.add_column(
        "deletion_requests", sa.Column("status", sa.String(length=30), server_default="running", nullable=False)
    )
    op.add_column("deletion_requests", sa.Column("status_run_id", sa.String(length=64), nullable=True))
    op.create_check_constraint(
        "ck_deletion_requests_status", "deletion_requests", f"status IN ({_in(_DELETION_STATES)})"
    )
    # Before the triggers change: 0005's fires on completed_at only, so the backfill adds no events.
    op.execute(_BACKFILL)
    op.create_index("ix_deletion_requests_open", "deletion_requests", ["workflow_id"], postgresql_where=sa.text(_OPEN))
    op.execute("DROP TRIGGER deletion_requests_event ON deletion_requests")
    for trigger in _TRIGGERS:
        op.execute(trigger)


def downgrade() -> None:
    op.execute("DROP TRIGGER deletion_requests_changed_event ON deletion_requests")
    op.execute("DROP TRIGGER deletion_requests_created_event ON deletion_requests")
    op.execute(_TRIGGER_0005)
    op.drop_index("ix_deletion_requests_open", table_name="deletion_requests")
    op.drop_constraint("ck_deletion_requests_status", "deletion_requests", type_="check")
    op.drop_column("deletion_requests", "status_run_id")
    op.drop_column("deletion_requests", "status")
