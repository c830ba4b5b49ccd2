"""credentials and the audit trail: named admin credentials, credentials scoped to one deletion service's
registration or to reading metrics, each revocable; and an append-only record of every admin act

Revision ID: 0024
Revises: 0023
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import UUID

revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Frozen copy of lifecycle.credentials.CredentialKind at this revision.
_KINDS = "'admin', 'service', 'metrics'"

# Defence beside the privileges (lifecycle/migrate.py grants the application's roles INSERT and SELECT only): not
# even the tables' owner changes or removes an event.
_APPEND_ONLY = """
CREATE FUNCTION audit_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit events are append-only: % refused', TG_OP USING ERRCODE = 'insufficient_privilege';
END $$
"""


def upgrade() -> None:
    op.create_table(
        "api_credentials",
        sa.Column("id", UUID(as_uuid=True), primary_key=True),
        sa.Column("kind", sa.String(length=20), nullable=False),
        # An admin credential's holder, or the service whose registration a service credential may change.
        sa.Column("name", sa.String(length=40), nullable=False),
        # SHA-256 of the credential, as an account key's: a stolen table opens nothing.
        sa.Column("secret_hash", sa.String(length=64), nullable=False, unique=True),
        sa.Column("prefix", sa.String(length=16), nullable=False),
        sa.Column("created_by", sa.String(length=80), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(f"kind IN ({_KINDS})", name="ck_api_credentials_kind"),
    )
    op.create_table(
        "audit_events",
        sa.Column("id", sa.BigInteger(), sa.Identity(), primary_key=True),
        sa.Column("at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.Column("actor", sa.String(length=80), nullable=False),
        sa.Column("action", sa.String(length=120), nullable=False),
        sa.Column("target", sa.String(length=300), nullable=False),
        # The account an act concerns, when it concerns one (a legal hold, a restore): what an auditor filters by.
        sa.Column("account_id", UUID(as_uuid=True), nullable=True),
        sa.Column("request_id", sa.String(length=64), nullable=False),
    )
    op.create_index("ix_audit_events_target", "audit_events", ["target", "id"])
    op.create_index("ix_audit_events_account", "audit_events", ["account_id", "id"])
    op.execute(_APPEND_ONLY)
    op.execute(
        "CREATE TRIGGER audit_events_append_only BEFORE UPDATE OR DELETE ON audit_events"
        " FOR EACH ROW EXECUTE FUNCTION audit_events_append_only()"
    )
    op.execute(
        "CREATE TRIGGER audit_events_no_truncate BEFORE TRUNCATE ON audit_events"
        " FOR EACH STATEMENT EXECUTE FUNCTION audit_events_append_only()"
    )


def downgrade() -> None:
    op.drop_table("audit_events")
    op.execute("DROP FUNCTION audit_events_append_only()")
    op.drop_table("api_credentials")
