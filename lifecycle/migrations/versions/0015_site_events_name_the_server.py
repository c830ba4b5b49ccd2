"""site events name the database server: a site's event carries the row as GET /sites/{id} shows it (revision
0005), and that answer now includes `database_server` (revision 0014). Placing a site is no event of its own: the
server is recorded in the creation's first step, and that step's own change carries it, so every event is still
one step's change.

Revision ID: 0015
Revises: 0014
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_CHANNEL = "lifecycle_events"


def _site_function(*extra: str) -> str:
    columns = ", ".join(
        [
            "'id', NEW.id, 'name', NEW.name, 'tagline', NEW.tagline, 'domain', NEW.domain",
            "'status', NEW.status, 'steps', NEW.steps, 'error', NEW.error",
            *extra,
        ]
    )
    return f"""
CREATE OR REPLACE FUNCTION lifecycle_events_site() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO lifecycle_events (subject_kind, subject_id, account_id, state)
    VALUES ('site', NEW.id::text, NEW.account_id, jsonb_build_object({columns}));
    PERFORM pg_notify('{_CHANNEL}', '');
    RETURN NULL;
END $$
"""


def upgrade() -> None:
    op.execute(_site_function("'database_server', NEW.database_server"))


def downgrade() -> None:
    op.execute(_site_function())
