"""site database servers: the catalog of servers that hold site databases, each with its capacity, warm-pool
target and state, and on every site the server it was placed on. The server SITE_DATABASE_URL names becomes
`default` (no URL stored: each worker reads it from its environment), and every existing site is on it.

Revision ID: 0014
Revises: 0013
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# As lifecycle/statuses.py and lifecycle/sites/servers.py have them today; a migration keeps its own copy.
_STATES = ("active", "draining", "down")
_DOMAIN_HOLDING = ("provisioning", "active", "rolling_back", "rollback_failed", "deleting")


def upgrade() -> None:
    op.create_table(
        "site_db_servers",
        sa.Column("name", sa.String(length=40), primary_key=True),
        # An SQLAlchemy URL with an administrative role (CREATEROLE and CREATEDB); null: SITE_DATABASE_URL.
        sa.Column("admin_url", sa.Text(), nullable=True),
        sa.Column("capacity", sa.Integer(), nullable=False),
        sa.Column("pool_target", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=20), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.CheckConstraint("state IN ('active', 'draining', 'down')", name="ck_site_db_servers_state"),
        sa.CheckConstraint("capacity >= 0", name="ck_site_db_servers_capacity"),
        sa.CheckConstraint("pool_target >= 0", name="ck_site_db_servers_pool_target"),
    )
    op.execute(
        "INSERT INTO site_db_servers (name, admin_url, capacity, pool_target, state)"
        " VALUES ('default', NULL, 10000, 10, 'active')"
    )
    op.add_column(
        "sites",
        sa.Column("database_server", sa.String(length=40), sa.ForeignKey("site_db_servers.name"), nullable=True),
    )
    op.execute("UPDATE sites SET database_server = 'default'")
    holding = ", ".join(f"'{status}'" for status in _DOMAIN_HOLDING)
    # Placement counts each server's sites under this predicate (lifecycle/sites/servers.py).
    op.create_index(
        "ix_sites_database_server",
        "sites",
        ["database_server"],
        postgresql_where=sa.text(f"database_server IS NOT NULL AND status IN ({holding})"),
    )


def downgrade() -> None:
    op.drop_index("ix_sites_database_server", table_name="sites")
    op.drop_column("sites", "database_server")
    op.drop_table("site_db_servers")
