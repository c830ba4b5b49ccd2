"""The schema as SQLAlchemy 2 models. Alembic migrations create it; nothing calls create_all."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    ForeignKey,
    Identity,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from lifecycle.statuses import (
    DOMAIN_HOLDING_SITE_STATUSES,
    OPEN_DELETIONS_SQL,
    OPEN_EXPORT_STATUSES,
    UNSETTLED_SITES_SQL,
    DeletionState,
    ExportStatus,
    ProcessorAnswer,
    SiteDbServerState,
    SiteDbServerStateSetBy,
    SitePoolState,
    SiteStatus,
    sql_list,
)


class Base(DeclarativeBase):
    pass


def _now_column() -> Mapped[datetime]:
    return mapped_column(DateTime(timezone=True), server_default=func.now(), nullable=False)


class Account(Base):
    __tablename__ = "accounts"

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    name: Mapped[str] = mapped_column(String(200))
    email: Mapped[str] = mapped_column(String(320))
    created_at: Mapped[datetime] = _now_column()
    # Set when deletion is requested; the reconciler starts a deletion for any such row that lacks one.
    deletion_requested_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class ApiKey(Base):
    __tablename__ = "api_keys"

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    account_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"), index=True)
    # SHA-256 of the key: a stolen table yields no usable key, and lookup stays one indexed read.
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    # The key's first characters, to tell keys apart in GET /account/keys; None for keys issued before 0008.
    prefix: Mapped[str | None] = mapped_column(String(16))
    created_at: Mapped[datetime] = _now_column()
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # Null for a key that does not expire; past it, the key opens nothing (api/accounts/keys.py).
    expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # To the minute: written at most once a minute per key, off the request's own statements (api/dependencies.py).
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class Bot(Base):
    __tablename__ = "bots"

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    account_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("accounts.id"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = _now_column()
    deletion_requested_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class DeletionRequest(Base):
    """A deletion the API accepted. It outlives the bot or account it names, so its status stays readable."""

    __tablename__ = "deletion_requests"
    __table_args__ = (
        CheckConstraint(f"status IN ({sql_list(DeletionState)})", name="ck_deletion_requests_status"),
        CheckConstraint("account_lane IN ('waiting', 'taken')", name="ck_deletion_requests_account_lane"),
        # The reconciler pages through the deletions recorded as open, to record how their runs closed.
        Index("ix_deletion_requests_open", "workflow_id", postgresql_where=text(OPEN_DELETIONS_SQL)),
    )

    workflow_id: Mapped[str] = mapped_column(String(100), primary_key=True)
    kind: Mapped[str] = mapped_column(String(20))
    # No foreign keys: the account and bot rows are deleted before this record is.
    account_id: Mapped[uuid.UUID] = mapped_column(index=True)
    bot_id: Mapped[uuid.UUID | None] = mapped_column()
    requested_at: Mapped[datetime] = _now_column()
    completed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # The confirmation address of an account deletion: kept here, out of workflow history, until sent.
    notify_email: Mapped[str | None] = mapped_column(String(320))
    # The end of an account deletion's grace period (ACCOUNT_DELETION_GRACE): nothing is deleted before it.
    # Null without a grace; moved to the moment the grace ended if an operator expedited it.
    deletes_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # Where the deletion stands, the one place the API and the streams read it: the API records the request
    # (`accepted`, or `scheduled` in a grace period), each run records every change it makes
    # (activities/deletion/records.py), and the reconciler records how a run closed when it could not (a
    # terminate, say: activities/deletion/reconciler.py).
    status: Mapped[str] = mapped_column(String(30), server_default=DeletionState.ACCEPTED.value)
    # The run that recorded `status`; null while it is the API's. A run that records nothing after a reset
    # leaves the old run's id here, which is how the reconciler knows the row may be stale.
    status_run_id: Mapped[str | None] = mapped_column(String(64))
    # Why an open deletion does not move (`waiting`: "no deletion service is registered"); null otherwise.
    status_reason: Mapped[str | None] = mapped_column(Text)
    # When the erasure is due: the request plus ERASURE_DUE_WITHIN (GDPR Art. 12(3)), moved later by the time a legal
    # hold stopped the clock.
    # The server default is ERASURE_DUE_WITHIN's default, for a row written by hand; the code writes its setting.
    due_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=text("now() + interval '30 days'"), nullable=False
    )
    # When `status` was last known true: written with every status, and by the reconciler each time it finds the run
    # still open. A run that closed without recording it (a terminate) shows its last status as of this time.
    status_confirmed_at: Mapped[datetime] = _now_column()
    # A DELETE /bots deletion's place among its account's (activities/deletion/account_lanes.py): `waiting` for a
    # lane from its request on (so lanes go in the order requested, whichever run asks first), then `taken`; null
    # for a deletion that takes none (an account's own bots). A repeat after a stop queues again.
    account_lane: Mapped[str | None] = mapped_column(String(10))


class LegalHold(Base):
    """An admin's legal hold on an account: while one is in force (not released), nothing of the account is
    deleted. The reason stays here, out of workflow history and off the receipts; the record outlives the account."""

    __tablename__ = "legal_holds"
    __table_args__ = (
        CheckConstraint("btrim(reason) <> ''", name="ck_legal_holds_reason"),
        Index("uq_legal_holds_in_force", "account_id", unique=True, postgresql_where=text("released_at IS NULL")),
        Index("ix_legal_holds_account", "account_id", "placed_at"),
    )

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    account_id: Mapped[uuid.UUID] = mapped_column()
    reason: Mapped[str] = mapped_column(Text)
    placed_at: Mapped[datetime] = _now_column()
    released_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class DeletionProgress(Base):
    """Per-service progress of a deletion, committed with each batch: the API reads it, never a worker."""

    __tablename__ = "deletion_progress"

    workflow_id: Mapped[str] = mapped_column(String(100), primary_key=True)
    service: Mapped[str] = mapped_column(String(50), primary_key=True)
    deleted: Mapped[int] = mapped_column(BigInteger, server_default="0")
    total: Mapped[int] = mapped_column(BigInteger, server_default="0")
    done: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    skipped: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    updated_at: Mapped[datetime] = _now_column()
    files_deleted: Mapped[int] = mapped_column(BigInteger, server_default="0")
    # Rows per second as the service measured its last slice (DeleteResponse.measured_rows_per_second), and what is
    # slowing the service down: None, "budget", or a pressure signal (services/runtime/pace.py for this project's).
    rows_per_second: Mapped[int] = mapped_column(BigInteger, server_default="0")
    throttled: Mapped[str | None] = mapped_column(String(30))
    rate_since: Mapped[datetime] = _now_column()
    rate_since_deleted: Mapped[int] = mapped_column(BigInteger, server_default="0")
    started_at: Mapped[datetime] = _now_column()
    # A registered service's own cursor (DeleteResponse.cursor), kept so a new run of the deletion resumes there.
    resume_cursor: Mapped[str | None] = mapped_column(Text)
    # Since when the deletion has waited for the registered service's worker to take a call; null while it answers.
    waiting_since: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # Why Temporal holds back the run's calls through the service's Nexus endpoint (its circuit breaker for the
    # endpoint is open): the blocked_reason of the run's pending operation, as the reconciler last read it
    # (activities/deletion/blocked_calls.py); null while nothing is held back, and once the service answers.
    blocked_reason: Mapped[str | None] = mapped_column(Text)
    # When the service's part last moved: rows or files deleted, or done. A record that moves nothing (a wait, a
    # retried call) leaves it, so it is what the stuck-work sweep reads (lifecycle/stuck.py).
    progressed_at: Mapped[datetime] = _now_column()


class DeletionService(Base):
    """A service that owns data about bots and accounts and implements the deletion contract (proto/), either on a
    task queue of its own in the gateway's namespace or behind a Nexus endpoint into its own namespace: exactly one
    of the two. Retired, not deleted: receipts and deletion records keep naming it."""

    __tablename__ = "deletion_services"
    __table_args__ = (
        CheckConstraint("(task_queue IS NULL) <> (nexus_endpoint IS NULL)", name="ck_deletion_services_transport"),
    )

    name: Mapped[str] = mapped_column(String(40), primary_key=True)
    task_queue: Mapped[str | None] = mapped_column(String(200))
    # The Nexus endpoint (`temporal operator nexus endpoint create`) that reaches the service's own namespace.
    nexus_endpoint: Mapped[str | None] = mapped_column(String(200))
    # The protobuf package it implements, such as lifecycle.deletion.v1.
    contract: Mapped[str] = mapped_column(String(100))
    registered_at: Mapped[datetime] = _now_column()
    updated_at: Mapped[datetime] = _now_column()
    # Set by DELETE /deletion-services/{name}: new deletions no longer call it.
    retired_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # Set by the deletions whenever the service answers one of their calls.
    last_answered_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class Processor(Base):
    """A recipient of the accounts' data (an email, CRM or analytics vendor) that every account deletion tells with
    one signed erasure request. Retired, not deleted: the erasures that named it keep pointing to it."""

    __tablename__ = "processors"

    name: Mapped[str] = mapped_column(String(40), primary_key=True)
    url: Mapped[str] = mapped_column(Text)
    # The Standard Webhooks secret (whsec_...), sealed to the workers' key (lifecycle/sealing.py): only the
    # workers that sign open it. Never loaded with the row: the API's role may not read it.
    secret: Mapped[str] = mapped_column(Text, deferred=True, deferred_raiseload=True)
    registered_at: Mapped[datetime] = _now_column()
    updated_at: Mapped[datetime] = _now_column()
    retired_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class ProcessorErasure(Base):
    """One deletion's erasure request to one processor, and the processor's answer."""

    __tablename__ = "processor_erasures"

    erasure_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    processor: Mapped[str] = mapped_column(String(40), ForeignKey("processors.name"), primary_key=True)
    deletion_workflow_id: Mapped[str] = mapped_column(String(100), index=True)
    account_id: Mapped[uuid.UUID] = mapped_column(index=True)
    webhook_id: Mapped[str] = mapped_column(String(100), unique=True)
    requested_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    status: Mapped[str] = mapped_column(String(20), server_default=ProcessorAnswer.PENDING.value)
    attempts: Mapped[int] = mapped_column(Integer, server_default="0")
    last_error: Mapped[str | None] = mapped_column(Text)
    acknowledged_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    reference: Mapped[str | None] = mapped_column(String(200))
    skipped_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # When its delivery began (the row's insert); `requested_at` is the deletion's request, which may be far earlier.
    begun_at: Mapped[datetime] = _now_column()

    __table_args__ = (
        CheckConstraint("status IN ('pending', 'acknowledged', 'skipped')", name="ck_processor_erasures_status"),
    )


class ApiCredential(Base):
    """A credential an admin issued (api/credentials/): an admin's own, one service's for its registration, or one
    that reads metrics. Stored as SHA-256; revoked, never deleted, so the audit trail's names stay explained."""

    __tablename__ = "api_credentials"
    __table_args__ = (CheckConstraint("kind IN ('admin', 'service', 'metrics')", name="ck_api_credentials_kind"),)

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    kind: Mapped[str] = mapped_column(String(20))
    name: Mapped[str] = mapped_column(String(40))
    secret_hash: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(16))
    created_by: Mapped[str] = mapped_column(String(80))
    created_at: Mapped[datetime] = _now_column()
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class AuditEvent(Base):
    """One admin act or service registration (lifecycle/audit.py): who, what, on what, when, under which request.
    Append-only: the application's roles may insert and read, and a trigger refuses any change (migration 0024)."""

    __tablename__ = "audit_events"
    __table_args__ = (
        Index("ix_audit_events_target", "target", "id"),
        Index("ix_audit_events_account", "account_id", "id"),
    )

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    at: Mapped[datetime] = _now_column()
    actor: Mapped[str] = mapped_column(String(80))
    action: Mapped[str] = mapped_column(String(120))
    target: Mapped[str] = mapped_column(String(300))
    account_id: Mapped[uuid.UUID | None] = mapped_column()
    request_id: Mapped[str] = mapped_column(String(64))


class DeletionReceipt(Base):
    """A signed record of what a deletion removed; kept after the account and Temporal's history are gone."""

    __tablename__ = "deletion_receipts"
    __table_args__ = (
        # A subject's receipts in order, and an account's receipts by kind.
        Index("ix_deletion_receipts_subject", "subject_kind", "subject_id", "seq"),
        Index("ix_deletion_receipts_account", "account_id", "subject_kind"),
    )

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    seq: Mapped[int] = mapped_column(BigInteger, Identity(), unique=True)
    receipt_key: Mapped[str] = mapped_column(String(200), unique=True)
    subject_kind: Mapped[str] = mapped_column(String(20))
    subject_id: Mapped[uuid.UUID]
    account_id: Mapped[uuid.UUID]
    workflow_id: Mapped[str] = mapped_column(String(100))
    canonical: Mapped[bytes] = mapped_column(LargeBinary)
    sha256: Mapped[str] = mapped_column(String(64))
    signature: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = _now_column()


class ReceiptSigningKey(Base):
    """A public key that signed deletion receipts, published by the workers, which alone hold its private half.

    Kept after a rotation ends its validity, so every receipt stays verifiable; one key at most is current.
    """

    __tablename__ = "receipt_signing_keys"
    __table_args__ = (
        Index(
            "ux_receipt_signing_keys_current",
            text("(valid_until IS NULL)"),
            unique=True,
            postgresql_where=text("valid_until IS NULL"),
        ),
    )

    key_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    public_key: Mapped[str] = mapped_column(Text)
    valid_from: Mapped[datetime] = _now_column()
    valid_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class SealingKey(Base):
    """The public key, published by the workers, to which stored secrets are sealed (lifecycle/sealing.py); one at
    a time, replaced by a rotation."""

    __tablename__ = "sealing_keys"
    __table_args__ = (Index("ux_sealing_keys_one", text("(true)"), unique=True),)

    key_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    public_key: Mapped[str] = mapped_column(Text)
    published_at: Mapped[datetime] = _now_column()


class DeletionReceiptChain(Base):
    """The identity of this database's chain of receipts (one row): the prefix of its copies in the object store,
    which a restore of the database cannot roll back (lifecycle/deletion/receipt_copies.py)."""

    __tablename__ = "deletion_receipt_chain"
    __table_args__ = (CheckConstraint("single", name="ck_deletion_receipt_chain_single"),)

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, server_default=text("gen_random_uuid()"))
    single: Mapped[bool] = mapped_column(Boolean, server_default=text("true"), unique=True)


def _sql_in(values: tuple[str, ...]) -> str:
    return ", ".join(f"'{value}'" for value in values)


class Site(Base):
    __tablename__ = "sites"
    __table_args__ = (
        # One live site per domain, enforced by the database so that concurrent POSTs race safely.
        Index(
            "uq_sites_domain_held",
            "domain",
            unique=True,
            postgresql_where=text(f"status IN ({_sql_in(DOMAIN_HOLDING_SITE_STATUSES)})"),
        ),
        Index(
            "uq_sites_account_idempotency_key",
            "account_id",
            "idempotency_key",
            unique=True,
            postgresql_where=text("idempotency_key IS NOT NULL"),
        ),
        CheckConstraint(f"status IN ({_sql_in(tuple(SiteStatus))})", name="ck_sites_status"),
        # The site reconciler pages through these in id order.
        Index("ix_sites_unsettled", "id", postgresql_where=text(UNSETTLED_SITES_SQL)),
        # Placement counts each server's sites (lifecycle/sites/servers.py).
        Index(
            "ix_sites_database_server",
            "database_server",
            postgresql_where=text(
                f"database_server IS NOT NULL AND status IN ({_sql_in(DOMAIN_HOLDING_SITE_STATUSES)})"
            ),
        ),
    )

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    account_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("accounts.id"), index=True)
    name: Mapped[str] = mapped_column(String(100))
    tagline: Mapped[str] = mapped_column(String(200))
    domain: Mapped[str] = mapped_column(String(253))
    status: Mapped[str] = mapped_column(String(20))
    steps: Mapped[dict[str, str]] = mapped_column(JSONB)
    error: Mapped[str | None] = mapped_column(Text)
    idempotency_key: Mapped[str | None] = mapped_column(String(200))
    # Set by DELETE /sites/{id} before anything else: the site ends deleted whatever the creation does.
    deletion_requested_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # The catalog server its database is on, chosen once by the first forward step (activities/sites/placement.py)
    # and read by every later step, undo and teardown. Null until then.
    database_server: Mapped[str | None] = mapped_column(String(40), ForeignKey("site_db_servers.name"))
    # Set by the database step once its server answered, before its first statement that could create anything
    # there: from then on the site's database may live on that server, so the site waits for it and is never moved.
    database_touched: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    created_at: Mapped[datetime] = _now_column()
    updated_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now(), onupdate=func.now(), nullable=False
    )


class SiteDbServer(Base):
    """A server that holds site databases (lifecycle/sites/servers.py). Its administrative URL is stored here
    sealed to the workers' key (lifecycle/sealing.py), never loaded with the row (the API's role may not read it);
    null for `default`, whose URL is each worker's SITE_DATABASE_URL."""

    __tablename__ = "site_db_servers"
    __table_args__ = (
        CheckConstraint(f"state IN ({_sql_in(tuple(SiteDbServerState))})", name="ck_site_db_servers_state"),
        CheckConstraint("capacity >= 0", name="ck_site_db_servers_capacity"),
        CheckConstraint("pool_target >= 0", name="ck_site_db_servers_pool_target"),
        CheckConstraint(
            f"state_set_by IN ({_sql_in(tuple(SiteDbServerStateSetBy))})", name="ck_site_db_servers_state_set_by"
        ),
    )

    name: Mapped[str] = mapped_column(String(40), primary_key=True)
    admin_url: Mapped[str | None] = mapped_column(Text, deferred=True, deferred_raiseload=True)
    capacity: Mapped[int] = mapped_column(Integer)
    pool_target: Mapped[int] = mapped_column(Integer)
    state: Mapped[str] = mapped_column(String(20))
    state_set_by: Mapped[str] = mapped_column(String(20), server_default=SiteDbServerStateSetBy.OPERATOR.value)
    # Health checks in a row that failed, or passed (activities/sites/health_check.py); one of them is 0.
    failed_checks: Mapped[int] = mapped_column(Integer, server_default="0")
    passed_checks: Mapped[int] = mapped_column(Integer, server_default="0")
    created_at: Mapped[datetime] = _now_column()
    updated_at: Mapped[datetime] = _now_column()


class SiteDbPoolDatabase(Base):
    """A database of a server's warm pool (lifecycle/sites/pool.py), named pool_<id hex> on the server until a
    site claims it; the row stays once claimed, so a database is claimed by one site only."""

    __tablename__ = "site_db_pool"
    __table_args__ = (
        CheckConstraint(f"state IN ({_sql_in(tuple(SitePoolState))})", name="ck_site_db_pool_state"),
        CheckConstraint(
            f"(state = '{SitePoolState.CLAIMED.value}') = (site_id IS NOT NULL)",
            name="ck_site_db_pool_claimed_by_a_site",
        ),
        Index(
            "ix_site_db_pool_ready",
            "server",
            "created_at",
            postgresql_where=text(f"state = '{SitePoolState.READY.value}'"),
        ),
    )

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    server: Mapped[str] = mapped_column(String(40), ForeignKey("site_db_servers.name"))
    state: Mapped[str] = mapped_column(String(20))
    site_id: Mapped[uuid.UUID | None] = mapped_column(unique=True)
    created_at: Mapped[datetime] = _now_column()
    claimed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class AccountExport(Base):
    """An account data export. No foreign key to the account: the row (and its download link) must outlive
    the account's deletion. Ids, paths, size, checksum and times only: the archive holds the data."""

    __tablename__ = "account_exports"
    __table_args__ = (
        Index("uq_account_exports_sequence", "account_id", "sequence", unique=True),
        # At most one export per account without an archive yet: a repeated request joins it.
        Index(
            "uq_account_exports_open",
            "account_id",
            unique=True,
            postgresql_where=text(f"status IN ({_sql_in(OPEN_EXPORT_STATUSES)})"),
        ),
        CheckConstraint(f"status IN ({_sql_in(tuple(ExportStatus))})", name="ck_account_exports_status"),
    )

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    account_id: Mapped[uuid.UUID] = mapped_column(index=True)
    sequence: Mapped[int] = mapped_column(Integer)
    workflow_id: Mapped[str] = mapped_column(String(100), unique=True)
    status: Mapped[str] = mapped_column(String(20), server_default=ExportStatus.PENDING.value)
    # Set by DELETE /account with export_first: every run of the account deletion waits for this export.
    deletion_waits: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    # Relative to settings.exports_path.
    archive_name: Mapped[str | None] = mapped_column(String(200))
    size_bytes: Mapped[int | None] = mapped_column(BigInteger)
    sha256: Mapped[str | None] = mapped_column(String(64))
    requested_at: Mapped[datetime] = _now_column()
    ready_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    mailed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    expired_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
