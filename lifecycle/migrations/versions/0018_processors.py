"""processors: the recipients an account deletion tells (GDPR Art. 19 and 28), registered by admins, and one row
per processor per deletion recording the erasure request sent and the processor's answer

Revision ID: 0018
Revises: 0017
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import UUID

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "processors",
        sa.Column("name", sa.String(length=40), primary_key=True),
        sa.Column("url", sa.Text(), nullable=False),
        # The Standard Webhooks secret (whsec_...): read by the workers that sign, never answered by the API and
        # never put in workflow history.
        sa.Column("secret", sa.Text(), nullable=False),
        sa.Column("registered_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.Column("retired_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_table(
        "processor_erasures",
        sa.Column("erasure_id", UUID(as_uuid=True), primary_key=True),
        sa.Column("processor", sa.String(length=40), sa.ForeignKey("processors.name"), primary_key=True),
        sa.Column("deletion_workflow_id", sa.String(length=100), nullable=False, index=True),
        sa.Column("account_id", UUID(as_uuid=True), nullable=False, index=True),
        # The Standard Webhooks `webhook-id`: the processor's idempotency key, the same on every retry.
        sa.Column("webhook_id", sa.String(length=100), nullable=False, unique=True),
        sa.Column("requested_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("status", sa.String(length=20), server_default="pending", nullable=False),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("acknowledged_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("reference", sa.String(length=200), nullable=True),
        sa.Column("skipped_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("status IN ('pending', 'acknowledged', 'skipped')", name="ck_processor_erasures_status"),
    )


def downgrade() -> None:
    op.drop_table("processor_erasures")
    op.drop_table("processors")
