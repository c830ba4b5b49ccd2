"""deletion services: the registry of services that own data about bots and accounts and implement the deletion
contract on their own task queue, and where a deletion keeps each one's resume cursor and the time it began to
wait for it

Revision ID: 0011
Revises: 0009
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
# Another branch may add 0010; whoever merges both chains them (0011 then revises 0010).
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "deletion_services",
        sa.Column("name", sa.String(length=40), primary_key=True),
        sa.Column("task_queue", sa.String(length=200), nullable=False),
        sa.Column("contract", sa.String(length=100), nullable=False),
        sa.Column("registered_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.Column("retired_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_answered_at", sa.DateTime(timezone=True), nullable=True),
    )
    # A registered service's opaque cursor (DeleteResponse.cursor), so a new run of the same deletion resumes there.
    op.add_column("deletion_progress", sa.Column("resume_cursor", sa.Text(), nullable=True))
    # Since when the deletion has been waiting for the service's worker to take its call; null while it answers.
    op.add_column("deletion_progress", sa.Column("waiting_since", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    op.drop_column("deletion_progress", "waiting_since")
    op.drop_column("deletion_progress", "resume_cursor")
    op.drop_table("deletion_services")
