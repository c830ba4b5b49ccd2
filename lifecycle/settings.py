"""Configuration read from the environment, with defaults that match the local stack (`make run`)."""

from __future__ import annotations

from datetime import timedelta
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BeforeValidator, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from lifecycle.deletion.contracts import REGISTRY_SETTLE_SECONDS
from lifecycle.outbound import OutboundRule

ADMIN_TOKEN_FILE = "admin_token"
# The local stack keeps its export signing key here, next to the admin token (devstack/local_env.py).
EXPORT_SIGNING_KEY_FILE = "export_signing_key"
# Where the deletion receipts' signing secret is made on first use when RECEIPT_SIGNING_KEY is not set.
RECEIPT_SIGNING_KEY_FILE = "receipt_signing_key"
# Where the workers' sealing secrets are made on first use when SEALING_KEYS is not set (lifecycle/sealing.py).
SEALING_KEYS_FILE = "sealing_keys"
# The shortest secret accepted (ADMIN_TOKEN, EXPORT_SIGNING_KEY, RECEIPT_SIGNING_KEY, the key files): a process
# refuses to start with a shorter one rather than run on a guessable key; `make deploy-env` and `make run`
# generate longer ones.
MIN_SECRET_BYTES = 32
SECRETS = ("admin_token", "export_signing_key", "receipt_signing_key", "sealing_keys")

# Ports of the local stack; docker-compose and the tests use their own.
LOCAL_TEMPORAL_PORT = 7233
LOCAL_TEMPORAL_UI_PORT = 8233
LOCAL_POSTGRES_PORT = 5433
LOCAL_SMTP_PORT = 1025
LOCAL_API_PORT = 8000
LOCAL_S3_PORT = 8333
LOCAL_DATABASE = "lifecycle"
LOCAL_BUCKET = "lifecycle"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="", case_sensitive=False, extra="ignore")

    data_dir: Path = Path(".data")
    temporal_address: str = f"127.0.0.1:{LOCAL_TEMPORAL_PORT}"
    temporal_namespace: str = "default"
    # Background work (deletions, the reconciler) and customer-facing work (sites) poll separate task queues,
    # each with its own worker slots, so a deletion backlog never delays a site someone is waiting for.
    task_queue: str = "lifecycle"
    site_task_queue: str = "lifecycle-sites"
    # Which of the two a worker process polls: `deletions`, `sites`, or both (comma-separated). One process per
    # role keeps a deletion backlog from taking the CPU of the process that builds the sites people wait for.
    worker_roles: str = "deletions,sites"
    # The Worker Deployment this process belongs to (docs/versioning.md); empty: named after task_queue, so the
    # two roles' processes share one, and every test queue has its own.
    worker_deployment: str = ""
    # Its build id; empty: a hash of the workflow code (lifecycle/worker_deployment.py). An image may pass its
    # revision instead.
    worker_build_id: str = ""
    # Make this version current once it polls: `make run` and the tests do; a production rollout starts new
    # workers without it and promotes them with the CLI, so a restarted old worker never takes traffic back.
    worker_make_current: bool = False
    database_url: str = f"postgresql+asyncpg://postgres@127.0.0.1:{LOCAL_POSTGRES_PORT}/{LOCAL_DATABASE}"
    # Server on which each site gets its own database and role; the app's own server unless set.
    site_database_url: str | None = None
    # Sessions one site's role may hold at once (its CONNECTION LIMIT): a busy or leaking site cannot take
    # every connection of the server it shares with the others.
    site_role_connection_limit: int = Field(default=20, ge=1)
    # Sites one account may hold at once (every site but a deleted or rolled-back one): an account cannot
    # fill the shared server with databases and roles.
    max_sites_per_account: int = Field(default=50, ge=1)
    # Bots one account may hold at once (every bot whose deletion is not requested), and keys (every key neither
    # revoked nor expired): past either, POST /bots or POST /account/keys answers 429.
    max_bots_per_account: int = Field(default=1_000, ge=1)
    max_keys_per_account: int = Field(default=20, ge=2)
    # Requests a second one account may make with its keys, counted by each API process on its own
    # (api/rate_limits.py); past it, 429 with Retry-After. 0: no limit.
    account_requests_per_second: int = Field(default=100, ge=0)
    # Roles that `python -m lifecycle.migrate` lets read and write every table it made (comma-separated): the
    # workers'. The API's roles get the same, less writing the keys the workers publish and reading the sealed
    # secrets (lifecycle/migrate.py). docker-compose migrates as the tables' owner and runs the API and the workers
    # as these.
    database_dml_roles: str = ""
    database_api_roles: str = ""
    smtp_host: str = "127.0.0.1"
    smtp_port: int = LOCAL_SMTP_PORT
    mail_from: str = "no-reply@lifecycle.local"
    mail_dir: Path | None = None
    # The S3-compatible object store that holds knowledge documents and export archives (lifecycle/object_store.py):
    # SeaweedFS on the local stack, any S3 API deployed. Keys: `documents/<bot id>/...` and `exports/<id>.zip`.
    s3_endpoint_url: str | None = f"http://127.0.0.1:{LOCAL_S3_PORT}"
    s3_bucket: str = LOCAL_BUCKET
    s3_region: str = "us-east-1"
    # Both set, or neither: unset, the AWS SDK's own chain applies (AWS_ACCESS_KEY_ID, an instance or pod role).
    s3_access_key_id: str | None = Field(default=None, repr=False)
    s3_secret_access_key: str | None = Field(default=None, repr=False)
    # Path-style URLs (endpoint/bucket/key) work with every S3 API, SeaweedFS and MinIO included; `virtual` for a
    # provider that wants the bucket in the host name.
    s3_addressing_style: Literal["path", "virtual", "auto"] = "path"
    sites_root: Path | None = None
    admin_token: str | None = Field(default=None, repr=False)
    # A deletion service's own credential, with which it registers its name and nothing else (api/admin/).
    deletion_service_credential: str | None = Field(default=None, repr=False)
    # A deployment's credentials for its processes, `kind:name=credential` comma-separated, which
    # `python -m api.admin.provision` records (docker-compose's migrate job); empty elsewhere.
    provisioned_credentials: str = Field(default="", repr=False)
    alert_webhook_url: str | None = None
    # Where the service may send requests an admin configures (processors, site-database servers, the alert
    # webhook): public https addresses only, but for these hosts, addresses or networks (comma-separated) and, with
    # the development setting, loopback (lifecycle/outbound.py).
    outbound_allowed_hosts: str = ""
    outbound_allow_loopback: bool = False
    fault_injection: str | None = None
    api_host: str = "127.0.0.1"
    api_port: int = LOCAL_API_PORT
    api_metrics_enabled: bool = True
    # The proxies whose X-Forwarded-Proto and X-Forwarded-For the API believes (addresses or CIDR networks,
    # comma-separated; `*` for any): behind a TLS proxy, the scheme decides whether the stream-token cookie is
    # `Secure`. Loopback by default, as uvicorn's; docker-compose.yml names its network's gateway.
    forwarded_allow_ips: str = "127.0.0.1,::1"
    # Logs (lifecycle/logging_setup.py): the least level written, and coloured lines for a person or JSON lines;
    # `auto` writes lines at a terminal and JSON elsewhere.
    log_level: Annotated[Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"], BeforeValidator(str.upper)] = "INFO"
    log_format: Annotated[Literal["auto", "console", "json"], BeforeValidator(str.lower)] = "auto"
    worker_metrics_port: int | None = None
    # Loopback by default; docker-compose binds all interfaces so Prometheus can scrape the container.
    worker_metrics_host: str = "127.0.0.1"
    public_base_url: str | None = None
    max_request_body_bytes: int = 64 * 1024
    # Origins allowed to call the API from a browser (CORS), comma-separated; none by default, so only
    # same-origin pages (the demo page, a front end behind the same host) can.
    cors_origins: str = ""
    # Serve the demo page (web/) at /demo/; `make run` turns it on, nothing else does.
    demo_page: bool = False
    # How long a stream token (POST .../events/token) opens its one stream, reconnections included: longer
    # than a site's build or a deletion a customer watches, short enough that a leaked one soon means nothing.
    stream_token_ttl: timedelta = timedelta(minutes=10)
    # Seconds between two checks that the keys behind the open streams still open their accounts (one query per
    # API process): a stream ends this soon after its key is revoked or its account deleted.
    stream_credentials_recheck: float = Field(default=5.0, gt=0)
    # Small deletions answer at once, sparing the client a status to follow: DELETE /bots/{id} and DELETE /account
    # wait this many seconds for their workflow and answer 200 with the finished deletion, else 202 (0: 202 at
    # once; `Prefer: wait=N` still applies). The gateway cannot size a deletion (the services own the data), so
    # the wait is bounded instead: a small deletion takes a fraction of a second on an idle stack; 5 s absorbs a
    # busy one while staying far inside the 30-60 s read timeouts of common clients and proxies.
    deletion_inline_wait: float = Field(default=5.0, ge=0)
    # The longest `Prefer: wait=N` is honoured for: half of nginx's default 60 s proxy_read_timeout, so a
    # proxy in front of the API never cuts a wait off.
    deletion_prefer_wait_max: float = Field(default=30.0, ge=0)
    # Account data exports: archives are assembled under exports_dir (the workers' shared scratch space) and kept
    # in the object store, from which the API streams them; download links are HMAC-SHA256-signed with
    # export_signing_key, and an archive is deleted export_retention (ISO 8601 duration) after it is ready.
    exports_dir: Path | None = None
    export_signing_key: str | None = Field(default=None, repr=False)
    export_retention: timedelta = timedelta(days=7)
    # The secret the deletion receipts' Ed25519 key is derived from (lifecycle/deletion/receipt_keys.py); only the
    # workers need it (the API serves the public keys they publish). Unset: made on a worker's first start in DATA_DIR.
    receipt_signing_key: str | None = Field(default=None, repr=False)
    # The secrets of the X25519 keys that processors' secrets and site-server URLs are sealed to (lifecycle/sealing.py),
    # comma-separated, the newest first; only the workers hold them. Unset: made on a worker's first start in DATA_DIR.
    sealing_keys: str | None = Field(default=None, repr=False)
    # Rows per keyset batch while writing an export: memory holds one batch of one table at a time.
    export_batch_rows: int = Field(default=5_000, ge=1, le=100_000)
    # A window to change one's mind: DELETE /account signs the account out at once, then deletes
    # nothing for this long (ISO 8601 duration, e.g. P7D), during which an admin can restore it. Zero, the
    # local default, deletes at once as before; docker-compose.yml sets P7D.
    account_deletion_grace: timedelta = Field(default=timedelta(0), ge=timedelta(0))
    # A deletion that waited for a deletion service to register goes on once no other service joined the registry
    # for this many seconds (REGISTRY_SETTLE_SECONDS): longer where a deployment's services start slowly.
    deletion_registry_settle_seconds: int = Field(default=REGISTRY_SETTLE_SECONDS, ge=1)
    # Processors (PUT /processors/{name}) are told of every account deletion with one signed erasure request:
    # retried after processor_retry_initial, doubling up to processor_retry_max (ISO 8601 durations), without end
    # until the processor acknowledges or an operator skips it; each attempt waits processor_request_timeout for
    # the answer; an operator is alerted once a processor has not acknowledged for processor_alert_after.
    processor_retry_initial: timedelta = Field(default=timedelta(seconds=2), gt=timedelta(0))
    processor_retry_max: timedelta = Field(default=timedelta(hours=1), gt=timedelta(0))
    processor_request_timeout: timedelta = Field(default=timedelta(seconds=10), gt=timedelta(0))
    processor_alert_after: timedelta = Field(default=timedelta(hours=6), gt=timedelta(0))
    # Stuck work (lifecycle/stuck.py): a run of each kind that has made no progress (rows, a step, an
    # acknowledgement) for this long alerts once, and again after each further such period. Why these defaults:
    # docs/observability.md, "Stuck work".
    stuck_after_bot_deletion: timedelta = Field(default=timedelta(minutes=30), gt=timedelta(0))
    stuck_after_account_deletion: timedelta = Field(default=timedelta(hours=1), gt=timedelta(0))
    stuck_after_site_creation: timedelta = Field(default=timedelta(minutes=15), gt=timedelta(0))
    stuck_after_site_deletion: timedelta = Field(default=timedelta(minutes=30), gt=timedelta(0))
    stuck_after_account_export: timedelta = Field(default=timedelta(hours=2), gt=timedelta(0))
    stuck_after_processor_erasure: timedelta = Field(default=timedelta(hours=1), gt=timedelta(0))
    stuck_after_site_db_pool: timedelta = Field(default=timedelta(minutes=30), gt=timedelta(0))
    # An erasure is due this long after its request (GDPR Art. 12(3): one month), plus the time a legal hold stopped
    # the clock; it alerts once this share of that time has passed unfinished, and again once overdue.
    erasure_due_within: timedelta = Field(default=timedelta(days=30), gt=timedelta(0))
    erasure_due_alert_share: float = Field(default=0.8, gt=0, lt=1)
    # The bot deletions (DELETE /bots/{id}) of one account that run at once; the rest wait `queued`, durably, in
    # the order they were requested (workflows/deletion/account_lane.py). Why 4: docs/design.md, "Fairness".
    account_deletions_at_once: int = Field(default=4, ge=1, le=1_000)
    # Live progress streams (GET /sites/{id}/events and the deletion ones). A comment every events_keepalive
    # seconds keeps proxies from closing an idle stream; the API's one LISTEN connection is backed by a poll
    # every events_poll_interval seconds; a deletion's status, part of which only Temporal knows, is asked
    # again at most every events_deletion_refresh seconds per deletion however many watch it; rows of the
    # events table older than events_retention (ISO 8601 duration) are pruned every events_prune_interval.
    events_keepalive: float = Field(default=15.0, gt=0)
    events_poll_interval: float = Field(default=5.0, gt=0)
    events_deletion_refresh: float = Field(default=5.0, gt=0)
    events_retention: timedelta = timedelta(days=1)
    events_prune_interval: float = Field(default=3600.0, gt=0)

    @field_validator("s3_endpoint_url", "s3_access_key_id", "s3_secret_access_key")
    @classmethod
    def _empty_s3_is_unset(cls, value: str | None) -> str | None:
        # An empty S3_ENDPOINT_URL means AWS S3 itself (the SDK picks the regional endpoint).
        return value or None

    @field_validator(*SECRETS)
    @classmethod
    def _empty_is_unset(cls, value: str | None) -> str | None:
        # docker-compose passes an unset secret as an empty variable.
        return value or None

    @model_validator(mode="after")
    def _derive_paths(self) -> Settings:
        if self.mail_dir is None:
            self.mail_dir = self.data_dir / "mail"
        if self.sites_root is None:
            self.sites_root = self.data_dir / "sites"
        if self.exports_dir is None:
            self.exports_dir = self.data_dir / "exports"
        if self.export_signing_key is None:
            key_file = self.data_dir / EXPORT_SIGNING_KEY_FILE
            if key_file.is_file():
                self.export_signing_key = key_file.read_text().strip() or None
        if self.admin_token is None:
            token_file = self.data_dir / ADMIN_TOKEN_FILE
            if token_file.is_file():
                self.admin_token = token_file.read_text().strip() or None
        return self

    @model_validator(mode="after")
    def _refuse_short_secrets(self) -> Settings:
        # After _derive_paths, so secrets read from the data directory's files are checked too.
        for name in SECRETS:
            value = getattr(self, name)
            if value is not None and len(value.encode()) < MIN_SECRET_BYTES:
                raise ValueError(
                    f"{name.upper()} is {len(value.encode())} bytes long; a secret needs at least {MIN_SECRET_BYTES}"
                    " (`make deploy-env` generates long enough ones)"
                )
        return self

    @property
    def mail_path(self) -> Path:
        assert self.mail_dir is not None
        return self.mail_dir

    @property
    def exports_path(self) -> Path:
        assert self.exports_dir is not None
        return self.exports_dir

    @property
    def sites_path(self) -> Path:
        assert self.sites_root is not None
        return self.sites_root

    @property
    def site_admin_database_url(self) -> str:
        return self.site_database_url or self.database_url

    @property
    def outbound(self) -> OutboundRule:
        return OutboundRule.of(self.outbound_allowed_hosts, self.outbound_allow_loopback)


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
