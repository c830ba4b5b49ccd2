"""a deletion the API records reads `accepted` until its run begins and records `running`

Revision ID: 0023
Revises: 0022
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.alter_column("deletion_requests", "status", server_default="accepted")


def downgrade() -> None:
    op.alter_column("deletion_requests", "status", server_default="running")
