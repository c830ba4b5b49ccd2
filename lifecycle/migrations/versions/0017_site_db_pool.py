"""site database pool: each server's warm pool of pre-created site databases, one row per database, from its
creation to its claim by a site (lifecycle/sites/pool.py). A claimed row stays, so a database is claimed once.

Revision ID: 0017
Revises: 0016
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import UUID

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "site_db_pool",
        # The database's (and its role's) name on the server is pool_<id as 32 hex digits>.
        sa.Column("id", UUID(as_uuid=True), primary_key=True),
        sa.Column("server", sa.String(length=40), sa.ForeignKey("site_db_servers.name"), nullable=False),
        sa.Column("state", sa.String(length=20), nullable=False),
        # The site that claimed it: at most one database per site, and a database for one site only.
        sa.Column("site_id", UUID(as_uuid=True), nullable=True, unique=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("state IN ('creating', 'ready', 'claimed')", name="ck_site_db_pool_state"),
        sa.CheckConstraint("(state = 'claimed') = (site_id IS NOT NULL)", name="ck_site_db_pool_claimed_by_a_site"),
    )
    # What a claim takes and GET /site-db-servers counts: a server's ready databases, oldest first.
    op.create_index(
        "ix_site_db_pool_ready", "site_db_pool", ["server", "created_at"], postgresql_where=sa.text("state = 'ready'")
    )


def downgrade() -> None:
    op.drop_index("ix_site_db_pool_ready", table_name="site_db_pool")
    op.drop_table("site_db_pool")
