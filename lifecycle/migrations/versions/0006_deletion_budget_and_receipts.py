"""deletion budget and receipts: one rows/s budget shared by every deleter, measured rates and throttling in the
progress rows, and the signed, chained receipts that outlive the deleted data

Revision ID: 0006
Revises: 0005
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Frozen copy of lifecycle.deletion.budget.DEFAULT_ROWS_PER_SECOND at this revision.
_DEFAULT_ROWS_PER_SECOND = 20_000

# The progress trigger of revision 0005, now also firing when the measured rate or the throttling changes, so a
# stream shows a deletion slowing down even between two batches that change no count.
_PROGRESS_TRIGGER = (
    "CREATE TRIGGER deletion_progress_changed_event AFTER UPDATE ON deletion_progress FOR EACH ROW"
    " WHEN (OLD.deleted IS DISTINCT FROM NEW.deleted OR OLD.total IS DISTINCT FROM NEW.total"
    " OR OLD.done IS DISTINCT FROM NEW.done OR OLD.skipped IS DISTINCT FROM NEW.skipped"
    " OR OLD.throttled IS DISTINCT FROM NEW.throttled) EXECUTE FUNCTION lifecycle_events_deletion()"
)


def upgrade() -> None:
    # One row: the budget every deleter shares, and the time from which the next rows may be deleted (the
    # virtual clock of a GCRA limiter, advanced by each reservation).
    op.create_table(
        "deletion_budget",
        sa.Column("id", sa.SmallInteger(), primary_key=True),
        sa.Column("rows_per_second", sa.BigInteger(), nullable=True),
        sa.Column("next_slot", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint("id = 1", name="ck_deletion_budget_single_row"),
        sa.CheckConstraint("rows_per_second IS NULL OR rows_per_second > 0", name="ck_deletion_budget_positive"),
    )
    op.execute(f"INSERT INTO deletion_budget (id, rows_per_second) VALUES (1, {_DEFAULT_ROWS_PER_SECOND})")
    # Every change an operator made, for the receipts of the deletions it touched.
    op.create_table(
        "deletion_budget_changes",
        sa.Column("id", sa.BigInteger(), sa.Identity(), primary_key=True),
        sa.Column("rows_per_second", sa.BigInteger(), nullable=True),
        sa.Column("changed_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
    )
    op.create_index("ix_deletion_budget_changes_changed_at", "deletion_budget_changes", ["changed_at"])

    op.add_column("deletion_progress", sa.Column("files_deleted", sa.BigInteger(), server_default="0", nullable=False))
    op.add_column(
        "deletion_progress", sa.Column("rows_per_second", sa.BigInteger(), server_default="0", nullable=False)
    )
    op.add_column("deletion_progress", sa.Column("throttled", sa.String(length=30), nullable=True))
    # The start of the window the rate is measured over, and the count deleted when it began.
    op.add_column(
        "deletion_progress",
        sa.Column("rate_since", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
    )
    op.add_column(
        "deletion_progress", sa.Column("rate_since_deleted", sa.BigInteger(), server_default="0", nullable=False)
    )
    op.add_column(
        "deletion_progress",
        sa.Column("started_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
    )
    op.execute("DROP TRIGGER deletion_progress_changed_event ON deletion_progress")
    op.execute(_PROGRESS_TRIGGER)

    # Receipts are never deleted with what they describe: no foreign keys. `seq` orders the hash chain.
    op.create_table(
        "deletion_receipts",
        sa.Column("id", sa.Uuid(), primary_key=True),
        sa.Column("seq", sa.BigInteger(), sa.Identity(), nullable=False, unique=True),
        # One receipt per deletion run chain (workflow id and its first run id): retries and resets find it.
        sa.Column("receipt_key", sa.String(length=200), nullable=False, unique=True),
        sa.Column("subject_kind", sa.String(length=20), nullable=False),
        sa.Column("subject_id", sa.Uuid(), nullable=False),
        sa.Column("account_id", sa.Uuid(), nullable=False),
        sa.Column("workflow_id", sa.String(length=100), nullable=False),
        # The RFC 8785 bytes that were hashed and signed, kept as they are so verification needs no re-encoding.
        sa.Column("canonical", sa.LargeBinary(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("signature", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
    )
    op.create_index("ix_deletion_receipts_subject", "deletion_receipts", ["subject_kind", "subject_id", "seq"])
    op.create_index("ix_deletion_receipts_account", "deletion_receipts", ["account_id", "subject_kind"])


def downgrade() -> None:
    op.drop_table("deletion_receipts")
    op.execute("DROP TRIGGER deletion_progress_changed_event ON deletion_progress")
    op.execute(_PROGRESS_TRIGGER.replace(" OR OLD.throttled IS DISTINCT FROM NEW.throttled", ""))
    for column in ("started_at", "rate_since_deleted", "rate_since", "throttled", "rows_per_second", "files_deleted"):
        op.drop_column("deletion_progress", column)
    op.drop_table("deletion_budget_changes")
    op.drop_table("deletion_budget")
