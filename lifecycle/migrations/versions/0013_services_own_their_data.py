"""services own their data: the five service tables leave the product's database for each service's own
(services/), so the product keeps only what the gateway owns. Move their rows first (docs/deployment.md).

Revision ID: 0013
Revises: 0011
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The tables that leave, as migration 0001 made them.
_TABLES = ("conversations", "messages", "analytics_events", "knowledge_documents", "integrations")


def upgrade() -> None:
    for table in _TABLES:
        op.drop_index(f"ix_{table}_bot_id_id", table_name=table)
        op.drop_table(table)


def _created_at() -> sa.Column:
    return sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False)


def _jsonb(name: str) -> sa.Column:
    return sa.Column(
        name, postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'{}'::jsonb"), nullable=False
    )


def downgrade() -> None:
    """The tables again, empty: their rows live in the services' databases from now on."""
    columns: dict[str, list[sa.Column]] = {
        "conversations": [sa.Column("title", sa.String(length=200), nullable=False), _created_at()],
        "messages": [
            sa.Column("conversation_ref", sa.BigInteger(), nullable=False),
            sa.Column("body", sa.Text(), nullable=False),
            _created_at(),
        ],
        "analytics_events": [
            sa.Column("kind", sa.String(length=50), nullable=False),
            _jsonb("payload"),
            sa.Column("occurred_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        ],
        "knowledge_documents": [
            sa.Column("title", sa.String(length=200), nullable=False),
            sa.Column("storage_key", sa.String(length=300), nullable=False),
            sa.Column("size_bytes", sa.Integer(), nullable=False),
            _created_at(),
        ],
        "integrations": [sa.Column("provider", sa.String(length=50), nullable=False), _jsonb("config"), _created_at()],
    }
    for table in _TABLES:
        op.create_table(
            table,
            sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
            sa.Column("bot_id", sa.Uuid(), nullable=False),
            *columns[table],
            sa.ForeignKeyConstraint(["bot_id"], ["bots.id"]),
            sa.PrimaryKeyConstraint("id"),
        )
        op.create_index(f"ix_{table}_bot_id_id", table, ["bot_id", "id"], unique=False)
