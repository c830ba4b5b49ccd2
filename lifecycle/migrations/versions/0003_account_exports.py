"""account data exports: one row per export, kept after the account is deleted

Revision ID: 0003
Revises: 0002
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Frozen copies of lifecycle.statuses.ExportStatus and OPEN_EXPORT_STATUSES at this revision.
_EXPORT_STATUSES = "status IN ('pending', 'writing', 'ready', 'expired', 'failed')"
_OPEN = "status IN ('pending', 'writing')"


def upgrade() -> None:
    # No foreign key to accounts: the export and its link outlive the account's deletion. No personal data:
    # ids, the archive's file name, size, checksum and times.
    op.create_table(
        "account_exports",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("account_id", sa.Uuid(), nullable=False),
        sa.Column("sequence", sa.Integer(), nullable=False),
        sa.Column("workflow_id", sa.String(length=100), nullable=False),
        sa.Column("status", sa.String(length=20), server_default="pending", nullable=False),
        sa.Column("deletion_waits", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("archive_name", sa.String(length=200), nullable=True),
        sa.Column("size_bytes", sa.BigInteger(), nullable=True),
        sa.Column("sha256", sa.String(length=64), nullable=True),
        sa.Column("requested_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("ready_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("mailed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("expired_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("workflow_id"),
        sa.CheckConstraint(_EXPORT_STATUSES, name="ck_account_exports_status"),
    )
    op.create_index("ix_account_exports_account_id", "account_exports", ["account_id"])
    op.create_index("uq_account_exports_sequence", "account_exports", ["account_id", "sequence"], unique=True)
    op.create_index(
        "uq_account_exports_open", "account_exports", ["account_id"], unique=True, postgresql_where=sa.text(_OPEN)
    )


def downgrade() -> None:
    op.drop_table("account_exports")
