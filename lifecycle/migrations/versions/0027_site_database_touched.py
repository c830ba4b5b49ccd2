"""Sites: whether the database step has touched the site's server, which pins the site to it

Revision ID: 0027
Revises: 0026
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0027"
down_revision: str | None = "0026"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("sites", sa.Column("database_touched", sa.Boolean(), server_default=sa.text("false"), nullable=False))
    # A site placed before this column existed may have its database on its server already: it stays there.
    op.execute("UPDATE sites SET database_touched = true WHERE database_server IS NOT NULL")


def downgrade() -> None:
    op.drop_column("sites", "database_touched")
