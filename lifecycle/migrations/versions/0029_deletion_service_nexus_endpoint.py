"""a deletion service answers on a task queue of the gateway's namespace or behind a Nexus endpoint in its own
namespace (deletion_services.nexus_endpoint): exactly one of the two

Revision ID: 0029
Revises: 0028
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0029"
down_revision: str | None = "0028"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ONE_TRANSPORT = "(task_queue IS NULL) <> (nexus_endpoint IS NULL)"


def upgrade() -> None:
    op.add_column("deletion_services", sa.Column("nexus_endpoint", sa.String(200), nullable=True))
    op.alter_column("deletion_services", "task_queue", existing_type=sa.String(200), nullable=True)
    op.create_check_constraint("ck_deletion_services_transport", "deletion_services", _ONE_TRANSPORT)


def downgrade() -> None:
    op.drop_constraint("ck_deletion_services_transport", "deletion_services", type_="check")
    # A service behind an endpoint has no queue in the gateway's namespace: it stays registered, retired.
    op.execute(
        "UPDATE deletion_services SET task_queue = nexus_endpoint, retired_at = coalesce(retired_at, now())"
        " WHERE task_queue IS NULL"
    )
    op.alter_column("deletion_services", "task_queue", existing_type=sa.String(200), nullable=False)
    op.drop_column("deletion_services", "nexus_endpoint")
