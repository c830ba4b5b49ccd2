"""sealing keys: the public key, published by the workers, to which processors' secrets and site-database servers'
URLs are sealed (lifecycle/sealing.py); the workers seal the rows stored before it as they start

Revision ID: 0025
Revises: 0024
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0025"
down_revision: str | None = "0024"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "sealing_keys",
        # A fingerprint of the public key, which each sealed value names.
        sa.Column("key_id", sa.String(length=64), primary_key=True),
        # The raw 32-byte X25519 public key, in base64.
        sa.Column("public_key", sa.Text(), nullable=False),
        sa.Column("published_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
    )
    # One key at a time: a rotation replaces it.
    op.create_index("ux_sealing_keys_one", "sealing_keys", [sa.text("(true)")], unique=True)


def downgrade() -> None:
    op.drop_table("sealing_keys")
