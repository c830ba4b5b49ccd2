"""receipt chain identity: one row naming this database's chain of deletion receipts, so its copies in the object
store (lifecycle/deletion/receipt_copies.py) live under a prefix of their own. A restore of a dump brings the same
identity back, which is how the restored database finds the copies that outlived it.

Revision ID: 0020
Revises: 0019
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import UUID

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "deletion_receipt_chain",
        sa.Column("id", UUID(as_uuid=True), primary_key=True, server_default=sa.text("gen_random_uuid()")),
        # One row: the index on a constant admits no second one.
        sa.Column("single", sa.Boolean(), server_default=sa.true(), nullable=False, unique=True),
        sa.CheckConstraint("single", name="ck_deletion_receipt_chain_single"),
    )
    op.execute("INSERT INTO deletion_receipt_chain DEFAULT VALUES")


def downgrade() -> None:
    op.drop_table("deletion_receipt_chain")
