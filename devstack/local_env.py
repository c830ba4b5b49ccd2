"""The environment every process of the Procfile uses against the local stack (`python -m devstack env`): the
API, the workers and the services, as `make run` starts them and as the `make infra` banner has them started by
hand."""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from devstack.seaweedfs import LOCAL_ACCESS_KEY_ID, LOCAL_SECRET_ACCESS_KEY
from lifecycle.settings import (
    ADMIN_TOKEN_FILE,
    EXPORT_SIGNING_KEY_FILE,
    LOCAL_DATABASE,
    LOCAL_POSTGRES_PORT,
    LOCAL_S3_PORT,
    LOCAL_SMTP_PORT,
    LOCAL_TEMPORAL_PORT,
    LOCAL_TEMPORAL_UI_PORT,
    Settings,
)


@dataclass(frozen=True)
class StackPorts:
    """The local stack's ports; DEVSTACK_* variables move them, so a test can run a stack beside yours."""

    postgres: int = LOCAL_POSTGRES_PORT
    temporal: int = LOCAL_TEMPORAL_PORT
    temporal_ui: int = LOCAL_TEMPORAL_UI_PORT
    smtp: int = LOCAL_SMTP_PORT
    s3: int = LOCAL_S3_PORT
    # The two servers that hold the sites' databases (devstack/site_servers.py).
    sites_a: int = LOCAL_POSTGRES_PORT + 1
    sites_b: int = LOCAL_POSTGRES_PORT + 2

    @classmethod
    def from_environ(cls) -> StackPorts:
        def port(name: str, default: int) -> int:
            return int(os.environ.get(f"DEVSTACK_{name}_PORT", default))

        return cls(
            postgres=port("POSTGRES", LOCAL_POSTGRES_PORT),
            temporal=port("TEMPORAL", LOCAL_TEMPORAL_PORT),
            temporal_ui=port("TEMPORAL_UI", LOCAL_TEMPORAL_UI_PORT),
            smtp=port("SMTP", LOCAL_SMTP_PORT),
            s3=port("S3", LOCAL_S3_PORT),
            sites_a=port("SITES_A", LOCAL_POSTGRES_PORT + 1),
            sites_b=port("SITES_B", LOCAL_POSTGRES_PORT + 2),
        )


def admin_token(settings: Settings) -> str:
    """ADMIN_TOKEN from the environment, else the one kept in the data directory, made on first use."""
    if settings.admin_token:
        return settings.admin_token
    token_file = settings.data_dir / ADMIN_TOKEN_FILE
    token_file.parent.mkdir(parents=True, exist_ok=True)
    if not token_file.is_file() or not token_file.read_text().strip():
        token_file.write_text(secrets.token_urlsafe(32) + "\n")
        token_file.chmod(0o600)
    return token_file.read_text().strip()


def export_signing_key(settings: Settings) -> str:
    """EXPORT_SIGNING_KEY from the environment, else the one kept in the data directory, made on first use."""
    if settings.export_signing_key:
        return settings.export_signing_key
    key_file = settings.data_dir / EXPORT_SIGNING_KEY_FILE
    key_file.parent.mkdir(parents=True, exist_ok=True)
    if not key_file.is_file() or not key_file.read_text().strip():
        key_file.write_text(secrets.token_hex(32) + "\n")
        key_file.chmod(0o600)
    return key_file.read_text().strip()


def with_local_store_credentials(settings: Settings) -> Settings:
    """`settings`, given the local stack's S3 credentials when they have none of their own and name a store on
    loopback (only a local stack's is there): `python -m devstack seed` then reaches `make run`'s SeaweedFS."""
    endpoint = settings.s3_endpoint_url or ""
    if settings.s3_access_key_id or not endpoint.startswith("http://127.0.0.1:"):
        return settings
    return settings.model_copy(
        update={"s3_access_key_id": LOCAL_ACCESS_KEY_ID, "s3_secret_access_key": LOCAL_SECRET_ACCESS_KEY}
    )


# The local stack's least-privileged role for site databases (devstack/postgres.py creates it).
SITE_PROVISIONER = "site_provisioner"


def stack_environment(settings: Settings, ports: StackPorts) -> dict[str, str]:
    data_dir = Path(settings.data_dir).resolve()
    return {
        "DATA_DIR": str(data_dir),
        "TEMPORAL_ADDRESS": f"127.0.0.1:{ports.temporal}",
        "TEMPORAL_NAMESPACE": settings.temporal_namespace,
        "TASK_QUEUE": settings.task_queue,
        "DATABASE_URL": f"postgresql+asyncpg://postgres@127.0.0.1:{ports.postgres}/{LOCAL_DATABASE}",
        # Site databases are made by a role with CREATEROLE and CREATEDB only, not by the superuser.
        "SITE_DATABASE_URL": f"postgresql+asyncpg://{SITE_PROVISIONER}@127.0.0.1:{ports.postgres}/postgres",
        "SMTP_HOST": "127.0.0.1",
        "SMTP_PORT": str(ports.smtp),
        "MAIL_DIR": str(Path(settings.mail_path).resolve()),
        # SeaweedFS's S3 gateway (devstack/seaweedfs.py), with the local stack's fixed loopback credentials.
        "S3_ENDPOINT_URL": f"http://127.0.0.1:{ports.s3}",
        "S3_BUCKET": settings.s3_bucket,
        "S3_ACCESS_KEY_ID": LOCAL_ACCESS_KEY_ID,
        "S3_SECRET_ACCESS_KEY": LOCAL_SECRET_ACCESS_KEY,
        "SITES_ROOT": str(Path(settings.sites_path).resolve()),
        # Development only: the local stack's site-database servers, processors and webhooks are on loopback.
        "OUTBOUND_ALLOW_LOOPBACK": "true",
        "ADMIN_TOKEN": admin_token(settings),
        "EXPORT_SIGNING_KEY": export_signing_key(settings),
        "API_PORT": str(settings.api_port),
        # Each service's worker registers itself with the API at this address as it starts: without it, no
        # service registers, and every deletion waits for one (workflows/deletion/registry_wait.py).
        "DELETION_GATEWAY_URL": f"http://127.0.0.1:{settings.api_port}",
        # The page that draws a site being built, at /demo/: for people trying the stack, never in production.
        "DEMO_PAGE": "true",
        # `make run` registers its workers' version and makes it current (docs/versioning.md).
        "WORKER_MAKE_CURRENT": "true",
    }
