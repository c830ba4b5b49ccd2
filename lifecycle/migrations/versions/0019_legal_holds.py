"""legal holds: an admin's hold on an account (its reason kept here, never in workflow history), one in force at a
time per account, and the deletion status `held` while a hold stops a deletion

Revision ID: 0019
Revises: 0018
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import UUID

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Frozen copies of lifecycle.statuses.DeletionState and OPEN_DELETIONS_SQL at this revision, and before it (0009).
_DELETION_STATES = (
    "scheduled",
    "running",
    "paused",
    "waiting_for_operator",
    "held",
    "completed",
    "incomplete",
    "cancelled",
    "terminated",
    "failed",
    "restored",
)
_OPEN = "status IN ('held', 'paused', 'running', 'scheduled', 'waiting_for_operator')"
_STATES_BEFORE = tuple(state for state in _DELETION_STATES if state != "held")
_OPEN_BEFORE = "status IN ('paused', 'running', 'scheduled', 'waiting_for_operator')"


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
    op.create_table(
        "legal_holds",
        sa.Column("id", UUID(as_uuid=True), primary_key=True),
        # No foreign key: the record outlives the account row, for the deletion's receipt.
        sa.Column("account_id", UUID(as_uuid=True), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("placed_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.Column("released_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("btrim(reason) <> ''", name="ck_legal_holds_reason"),
    )
    # At most one hold in force per account; what every check of a hold reads.
    op.create_index(
        "uq_legal_holds_in_force",
        "legal_holds",
        ["account_id"],
        unique=True,
        postgresql_where=sa.text("released_at IS NULL"),
    )
    # A receipt lists the holds of its account.
    op.create_index("ix_legal_holds_account", "legal_holds", ["account_id", "placed_at"])
    _deletion_states(_DELETION_STATES, _OPEN)


def downgrade() -> None:
    op.execute("UPDATE deletion_requests SET status = 'running' WHERE status = 'held'")
    _deletion_states(_STATES_BEFORE, _OPEN_BEFORE)
    op.drop_table("legal_holds")
