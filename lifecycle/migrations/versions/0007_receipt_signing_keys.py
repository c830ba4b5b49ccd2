"""receipt signing keys: the public keys that signed deletion receipts, each with its validity, published by
the workers so the API holds no private key and a rotation leaves older receipts verifiable

Revision ID: 0007
Revises: 0006
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "receipt_signing_keys",
        # A fingerprint of the public key (lifecycle/deletion/receipt_keys.py), which each receipt names.
        sa.Column("key_id", sa.String(length=64), primary_key=True),
        sa.Column("public_key", sa.Text(), nullable=False),
        sa.Column("valid_from", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        # Null for the current key; set by a rotation.
        sa.Column("valid_until", sa.DateTime(timezone=True), nullable=True),
    )
    # At most one current key.
    op.create_index(
        "ux_receipt_signing_keys_current",
        "receipt_signing_keys",
        [sa.text("(valid_until IS NULL)")],
        unique=True,
        postgresql_where=sa.text("valid_until IS NULL"),
    )


def downgrade() -> None:
    op.drop_table("receipt_signing_keys")
