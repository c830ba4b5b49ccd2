"""why Temporal holds back the calls to a service behind a Nexus endpoint (its circuit breaker for the endpoint is
open), as the reconciler reads it from the deletion's pending operation: deletion_progress.blocked_reason

Revision ID: 0030
Revises: 0029
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0030"
down_revision: str | None = "0029"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("deletion_progress", sa.Column("blocked_reason", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("deletion_progress", "blocked_reason")
