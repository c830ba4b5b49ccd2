"""operator safety: durable deletion progress, alert delivery, email state, site deletion requests

Revision ID: 0002
Revises: 0001
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Frozen copies of lifecycle.statuses at this revision: a migration must not change when the code does.
_SITE_STATUSES = ("provisioning", "active", "rolling_back", "rolled_back", "rollback_failed", "deleting", "deleted")
_HELD_BEFORE = "status IN ('provisioning', 'active', 'rolling_back', 'deleting')"
_HELD_NOW = "status IN ('provisioning', 'active', 'rolling_back', 'rollback_failed', 'deleting')"


def _in(values: Sequence[str]) -> str:
    return ", ".join(f"'{value}'" for value in values)


# Site roles live on this server too: only the application's own role may connect to its database.
_APP_DATABASE_PRIVATE = (
    "DO $$ BEGIN"
    " EXECUTE format('REVOKE CONNECT ON DATABASE %I FROM PUBLIC', current_database());"
    " EXECUTE format('GRANT CONNECT ON DATABASE %I TO %I', current_database(), current_user);"
    " END $$"
)
_APP_DATABASE_PUBLIC = (
    "DO $$ BEGIN EXECUTE format('GRANT CONNECT ON DATABASE %I TO PUBLIC', current_database()); END $$"
)


def upgrade() -> None:
    op.execute(_APP_DATABASE_PRIVATE)
    # Deletion progress, written by the deleters in the same transaction as each batch: the API reads it
    # without asking a worker, and a new run after a cancel or terminate counts on from it.
    op.create_table(
        "deletion_progress",
        sa.Column("workflow_id", sa.String(length=100), nullable=False),
        sa.Column("service", sa.String(length=50), nullable=False),
        sa.Column("deleted", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("total", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("done", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("skipped", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("workflow_id", "service"),
    )

    # Alert delivery is best-effort and never blocks the operator path: its outcome is recorded here.
    op.add_column("alerts", sa.Column("delivery", sa.String(length=20), server_default="pending", nullable=False))
    op.add_column("alerts", sa.Column("delivery_attempts", sa.Integer(), server_default="0", nullable=False))
    op.add_column("alerts", sa.Column("delivery_error", sa.Text(), nullable=True))

    # A notification is claimed (`sending`), sent with a Message-ID derived from its key, then marked `sent`:
    # no transaction stays open across the SMTP call.
    op.add_column("sent_notifications", sa.Column("message_id", sa.String(length=250), nullable=True))
    op.add_column("sent_notifications", sa.Column("state", sa.String(length=20), server_default="sent", nullable=False))
    op.alter_column("sent_notifications", "sent_at", nullable=True, server_default=None)
    op.add_column(
        "sent_notifications",
        sa.Column("claimed_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
    )
    op.create_check_constraint("ck_sent_notifications_state", "sent_notifications", "state IN ('sending', 'sent')")

    # DELETE /sites records the request before anything else, so the reconciler can finish it.
    op.add_column("sites", sa.Column("deletion_requested_at", sa.DateTime(timezone=True), nullable=True))
    op.create_check_constraint("ck_sites_status", "sites", f"status IN ({_in(_SITE_STATUSES)})")
    # A site whose rollback failed still holds a database and files, so it keeps its domain.
    op.drop_index("uq_sites_domain_held", table_name="sites", postgresql_where=sa.text(_HELD_BEFORE))
    op.create_index("uq_sites_domain_held", "sites", ["domain"], unique=True, postgresql_where=sa.text(_HELD_NOW))
    # The reconciler pages through marked rows in id order.
    op.create_index(
        "ix_sites_unsettled",
        "sites",
        ["id"],
        postgresql_where=sa.text(
            "status IN ('provisioning', 'rolling_back', 'deleting') OR "
            "(deletion_requested_at IS NOT NULL AND status <> 'deleted')"
        ),
    )


def downgrade() -> None:
    op.execute(_APP_DATABASE_PUBLIC)
    op.drop_index("ix_sites_unsettled", table_name="sites")
    op.drop_index("uq_sites_domain_held", table_name="sites", postgresql_where=sa.text(_HELD_NOW))
    op.create_index("uq_sites_domain_held", "sites", ["domain"], unique=True, postgresql_where=sa.text(_HELD_BEFORE))
    op.drop_constraint("ck_sites_status", "sites")
    op.drop_column("sites", "deletion_requested_at")
    op.drop_constraint("ck_sent_notifications_state", "sent_notifications")
    op.drop_column("sent_notifications", "claimed_at")
    op.alter_column("sent_notifications", "sent_at", nullable=False, server_default=sa.text("now()"))
    op.drop_column("sent_notifications", "state")
    op.drop_column("sent_notifications", "message_id")
    op.drop_column("alerts", "delivery_error")
    op.drop_column("alerts", "delivery_attempts")
    op.drop_column("alerts", "delivery")
    op.drop_table("deletion_progress")
