"""site database servers' health: who set each server's state (an operator, or the health check), and how many
checks in a row failed or passed, so the health check marks a server down or active again only when the last few
checks agree, and never changes a state an operator chose (activities/sites/health_check.py).

Revision ID: 0016
Revises: 0015
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Every state so far was an operator's (or the migration's, on an operator's behalf).
    op.add_column(
        "site_db_servers",
        sa.Column("state_set_by", sa.String(length=20), server_default="operator", nullable=False),
    )
    op.create_check_constraint(
        "ck_site_db_servers_state_set_by", "site_db_servers", "state_set_by IN ('operator', 'health_check')"
    )
    op.add_column("site_db_servers", sa.Column("failed_checks", sa.Integer(), server_default="0", nullable=False))
    op.add_column("site_db_servers", sa.Column("passed_checks", sa.Integer(), server_default="0", nullable=False))


def downgrade() -> None:
    op.drop_column("site_db_servers", "passed_checks")
    op.drop_column("site_db_servers", "failed_checks")
    op.drop_constraint("ck_site_db_servers_state_set_by", "site_db_servers")
    op.drop_column("site_db_servers", "state_set_by")
