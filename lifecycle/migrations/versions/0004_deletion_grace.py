"""deletion grace: the end of an account deletion's grace period, on its request record

Revision ID: 0004
Revises: 0003
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Null: no grace (immediate deletion). Moved to now() when the grace ends early (an operator's expedite),
    # so a later run of the same deletion never waits again once deleting may have begun.
    op.add_column("deletion_requests", sa.Column("deletes_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    op.drop_column("deletion_requests", "deletes_at")
