"""account deletion lanes: a DELETE /bots deletion waits `queued` for one of its account's lanes
(deletion_requests.account_lane: `waiting`, then `taken`)

Revision ID: 0028
Revises: 0027
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0028"
down_revision: str | None = "0027"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Frozen copies of lifecycle.statuses.DeletionState and OPEN_DELETIONS_SQL at this revision, and before it (0021).
_DELETION_STATES = (
    "accepted",
    "scheduled",
    "queued",
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
_OPEN = "status IN ('accepted', 'held', 'paused', 'queued', 'running', 'scheduled', 'waiting', 'waiting_for_operator')"
_STATES_BEFORE = tuple(state for state in _DELETION_STATES if state != "queued")
_OPEN_BEFORE = "status IN ('accepted', 'held', 'paused', 'running', 'scheduled', 'waiting', 'waiting_for_operator')"


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
    op.add_column("deletion_requests", sa.Column("account_lane", sa.String(10), nullable=True))
    op.create_check_constraint(
        "ck_deletion_requests_account_lane", "deletion_requests", "account_lane IN ('waiting', 'taken')"
    )


def downgrade() -> None:
    op.drop_constraint("ck_deletion_requests_account_lane", "deletion_requests", type_="check")
    op.drop_column("deletion_requests", "account_lane")
    op.execute("UPDATE deletion_requests SET status = 'accepted' WHERE status = 'queued'")
    _deletion_states(_STATES_BEFORE, _OPEN_BEFORE)
