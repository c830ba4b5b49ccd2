"""deletion budget overrides: a registered service's own rows/s, in place of its share of the shared budget, and
which service each recorded budget change was for

Revision ID: 0012
Revises: 0011
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # No foreign key to deletion_services: an operator may set a service's rows/s before it registers.
    op.create_table(
        "deletion_budget_overrides",
        sa.Column("service", sa.String(length=40), primary_key=True),
        sa.Column("rows_per_second", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint("rows_per_second > 0", name="ck_deletion_budget_overrides_positive"),
    )
    # Null: a change of the shared budget; a name: that service's override (a null rate there: removed).
    op.add_column("deletion_budget_changes", sa.Column("service", sa.String(length=40), nullable=True))


def downgrade() -> None:
    op.drop_column("deletion_budget_changes", "service")
    op.drop_table("deletion_budget_overrides")
