"""honest deletion states: `accepted` (recorded, its run not begun) and `waiting` (a deletion that has nobody to
reach yet, with its reason); each deletion's due date (GDPR Art. 12(3)); and when its status was last confirmed

Revision ID: 0021
Revises: 0020
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Frozen copies of lifecycle.statuses.DeletionState and OPEN_DELETIONS_SQL at this revision, and before it (0019).
_DELETION_STATES = (
    "accepted",
    "scheduled",
    "running",
    "paused",
    "waiting",
    "waiting_for_operator",
    "held",
    "completed",
    "incomplete",
    "cancelled",
    "terminated",
    "failed",
    "restored",
)
_OPEN = "status IN ('accepted', 'held', 'paused', 'running', 'scheduled', 'waiting', 'waiting_for_operator')"
_STATES_BEFORE = tuple(state for state in _DELETION_STATES if state not in ("accepted", "waiting"))
_OPEN_BEFORE = "status IN ('held', 'paused', 'running', 'scheduled', 'waiting_for_operator')"
# ERASURE_DUE_WITHIN's default, for the deletions recorded before this revision.
_DUE_WITHIN = "30 days"


def _in(values: Sequence[str]) -> str:
    return ", ".join(f"'{value}'" for value in values)


def _deletion_states(states: Sequence[str], open_sql: str) -> None:
    op.drop_constraint("ck_deletion_requests_status", "deletion_requests", type_="check")
    op.create_check_constraint("ck_deletion_requests_status", "deletion_requests", f"status IN ({_in(states)})")
    op.drop_index("ix_deletion_requests_open", table_name="deletion_requests")
    op.create_index(
        "ix_deletion_requests_open", "deletion_requests", ["workflow_id"], postgresql_where=sa.text(open_sql)
    )


def upgrade() -> None:
    _deletion_states(_DELETION_STATES, _OPEN)
    op.add_column("deletion_requests", sa.Column("status_reason", sa.Text(), nullable=True))
    op.add_column("deletion_requests", sa.Column("due_at", sa.DateTime(timezone=True), nullable=True))
    op.execute(f"UPDATE deletion_requests SET due_at = requested_at + interval '{_DUE_WITHIN}'")
    op.add_column(
        "deletion_requests",
        sa.Column("status_confirmed_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
    )


def downgrade() -> None:
    op.drop_column("deletion_requests", "status_confirmed_at")
    op.drop_column("deletion_requests", "due_at")
    op.drop_column("deletion_requests", "status_reason")
    op.execute("UPDATE deletion_requests SET status = 'running' WHERE status IN ('accepted', 'waiting')")
    _deletion_states(_STATES_BEFORE, _OPEN_BEFORE)
