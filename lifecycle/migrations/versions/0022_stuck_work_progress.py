"""stuck work and due dates: when each service's part of a deletion last moved (deletion_progress.progressed_at),
when a processor's erasure request began to be delivered (processor_erasures.begun_at), and every deletion's due date
(deletion_requests.due_at, now required)

Revision ID: 0022
Revises: 0021
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


# ERASURE_DUE_WITHIN's default: every insert path of the code writes its configured value; this covers a row
# written by hand.
_DUE_DEFAULT = "now() + interval '30 days'"


def upgrade() -> None:
    op.execute("UPDATE deletion_requests SET due_at = requested_at + interval '30 days' WHERE due_at IS NULL")
    op.alter_column("deletion_requests", "due_at", nullable=False, server_default=sa.text(_DUE_DEFAULT))
    op.add_column(
        "deletion_progress",
        sa.Column("progressed_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
    )
    # The last record stands for the last move: earlier ones are not kept.
    op.execute("UPDATE deletion_progress SET progressed_at = updated_at")
    op.add_column(
        "processor_erasures",
        sa.Column("begun_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
    )


def downgrade() -> None:
    op.alter_column("deletion_requests", "due_at", nullable=True, server_default=None)
    op.drop_column("processor_erasures", "begun_at")
    op.drop_column("deletion_progress", "progressed_at")
