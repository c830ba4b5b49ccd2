"""lifecycle events: an append-only log of site and deletion changes, written by triggers, read by SSE streams

Revision ID: 0005
Revises: 0004
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Frozen copy of lifecycle.db.events.NOTIFY_CHANNEL at this revision.
_CHANNEL = "lifecycle_events"

# A site's event carries the row as GET /sites/{id} shows it, so a stream replays every step in order even
# when several commit between two reads. Only the columns that answer shows; an update touching none of them
# (updated_at alone, deletion_requested_at) is not an event.
_SITE_FUNCTION = f"""
CREATE FUNCTION lifecycle_events_site() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO lifecycle_events (subject_kind, subject_id, account_id, state)
    VALUES ('site', NEW.id::text, NEW.account_id, jsonb_build_object(
        'id', NEW.id, 'name', NEW.name, 'tagline', NEW.tagline, 'domain', NEW.domain,
        'status', NEW.status, 'steps', NEW.steps, 'error', NEW.error));
    PERFORM pg_notify('{_CHANNEL}', '');
    RETURN NULL;
END $$
"""

# A deletion's answer mixes rows of several tables (and Temporal's describe), so its event only says "this
# deletion changed": the stream recomputes the answer. The account id lets an account's stream follow the
# progress of its bots' deletions, which its answer adds up.
_DELETION_FUNCTION = f"""
CREATE FUNCTION lifecycle_events_deletion() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    owner uuid;
BEGIN
    IF TG_TABLE_NAME = 'deletion_requests' THEN
        owner := NEW.account_id;
    ELSE
        SELECT account_id INTO owner FROM deletion_requests WHERE workflow_id = NEW.workflow_id;
    END IF;
    INSERT INTO lifecycle_events (subject_kind, subject_id, account_id) VALUES ('deletion', NEW.workflow_id, owner);
    PERFORM pg_notify('{_CHANNEL}', '');
    RETURN NULL;
END $$
"""

_TRIGGERS = (
    "CREATE TRIGGER sites_created_event AFTER INSERT ON sites FOR EACH ROW EXECUTE FUNCTION lifecycle_events_site()",
    "CREATE TRIGGER sites_changed_event AFTER UPDATE ON sites FOR EACH ROW"
    " WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.steps IS DISTINCT FROM NEW.steps"
    " OR OLD.error IS DISTINCT FROM NEW.error) EXECUTE FUNCTION lifecycle_events_site()",
    "CREATE TRIGGER deletion_requests_event AFTER INSERT OR UPDATE OF completed_at ON deletion_requests"
    " FOR EACH ROW EXECUTE FUNCTION lifecycle_events_deletion()",
    "CREATE TRIGGER deletion_progress_created_event AFTER INSERT ON deletion_progress"
    " FOR EACH ROW EXECUTE FUNCTION lifecycle_events_deletion()",
    "CREATE TRIGGER deletion_progress_changed_event AFTER UPDATE ON deletion_progress FOR EACH ROW"
    " WHEN (OLD.deleted IS DISTINCT FROM NEW.deleted OR OLD.total IS DISTINCT FROM NEW.total"
    " OR OLD.done IS DISTINCT FROM NEW.done OR OLD.skipped IS DISTINCT FROM NEW.skipped)"
    " EXECUTE FUNCTION lifecycle_events_deletion()",
)


def upgrade() -> None:
    # No foreign keys: events outlive nothing they name for long (retention prunes them), and a trigger insert
    # must never fail the status write that caused it.
    op.create_table(
        "lifecycle_events",
        sa.Column("id", sa.BigInteger(), sa.Identity(), nullable=False),
        sa.Column("subject_kind", sa.String(length=20), nullable=False),
        sa.Column("subject_id", sa.String(length=100), nullable=False),
        sa.Column("account_id", sa.Uuid(), nullable=True),
        sa.Column("state", sa.dialects.postgresql.JSONB(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_lifecycle_events_subject", "lifecycle_events", ["subject_kind", "subject_id", "id"])
    op.create_index("ix_lifecycle_events_account", "lifecycle_events", ["account_id", "id"])
    op.create_index("ix_lifecycle_events_created_at", "lifecycle_events", ["created_at"])
    op.execute(_SITE_FUNCTION)
    op.execute(_DELETION_FUNCTION)
    for trigger in _TRIGGERS:
        op.execute(trigger)


def downgrade() -> None:
    op.execute("DROP TRIGGER deletion_progress_changed_event ON deletion_progress")
    op.execute("DROP TRIGGER deletion_progress_created_event ON deletion_progress")
    op.execute("DROP TRIGGER deletion_requests_event ON deletion_requests")
    op.execute("DROP TRIGGER sites_changed_event ON sites")
    op.execute("DROP TRIGGER sites_created_event ON sites")
    op.execute("DROP FUNCTION lifecycle_events_deletion()")
    op.execute("DROP FUNCTION lifecycle_events_site()")
    op.drop_table("lifecycle_events")
