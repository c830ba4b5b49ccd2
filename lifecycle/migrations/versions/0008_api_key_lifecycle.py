"""api key lifecycle: each key's first characters, so an account can tell its keys apart when it rotates them

Revision ID: 0008
Revises: 0007
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Only hashes are stored, so the keys issued before this revision have no prefix to show: NULL.
    op.add_column("api_keys", sa.Column("prefix", sa.String(16), nullable=True))


def downgrade() -> None:
    op.drop_column("api_keys", "prefix")
