"""A stack for one run of a script (benchmarks, history recording): its own PostgreSQL (migrated), SMTP sink,
SeaweedFS and Temporal dev server, in a temporary directory, all gone when the run ends."""

from __future__ import annotations

import secrets
import tempfile
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from devstack.binaries import temporal_cli
from devstack.ports import free_port
from devstack.postgres import PostgresServer
from devstack.search_team import DEV_SERVER_NAMESPACE_FLAGS
from devstack.seaweedfs import SeaweedServer
from devstack.smtp_sink import SmtpSink
from devstack.temporal_server import DEV_SERVER_TUNING
from lifecycle import search_attributes
from lifecycle.data_converter import DATA_CONVERTER
from lifecycle.migrate import upgrade_async
from lifecycle.settings import Settings


@dataclass(frozen=True)
class ThrowawayStack:
    settings: Settings
    env: WorkflowEnvironment
    mail: SmtpSink
    postgres: PostgresServer
    objects: SeaweedServer

    @property
    def address(self) -> str:
        return self.settings.temporal_address


@asynccontextmanager
async def throwaway_stack(
    purpose: str, *, admin_token: str | None = None, durable: bool = False
) -> AsyncIterator[ThrowawayStack]:
    """`durable` keeps fsync on, for runs whose figures compare against PostgreSQL's own speed."""
    with tempfile.TemporaryDirectory(prefix=f"{purpose}-") as scratch:
        root = Path(scratch)
        postgres = PostgresServer(root / "postgres", free_port(), durable=durable)
        mail = SmtpSink(root / "mail", free_port())
        objects = SeaweedServer(root / "seaweedfs")
        env: WorkflowEnvironment | None = None
        try:
            postgres.start()
            postgres.create_database("lifecycle")
            await upgrade_async(postgres.url("lifecycle"))
            mail.start()
            objects.start()
            env = await WorkflowEnvironment.start_local(
                port=free_port(),  # below the ephemeral ports, where the SDK's own pick would be
                dev_server_existing_path=temporal_cli(),
                search_attributes=search_attributes.ALL,
                dev_server_extra_args=["--ui-disable-news-fetch", *DEV_SERVER_TUNING, *DEV_SERVER_NAMESPACE_FLAGS],
                data_converter=DATA_CONVERTER,
            )
            settings = Settings(
                data_dir=root / "data",
                database_url=postgres.url("lifecycle"),
                temporal_address=env.client.service_client.config.target_host,
                task_queue=f"{purpose}-{uuid.uuid4().hex[:8]}",
                admin_token=admin_token,
                # A throwaway key: links it signs die with the stack.
                export_signing_key=secrets.token_urlsafe(32),
                smtp_port=mail.port,
                mail_dir=mail.directory,
                # One developer's stack: its workers make their version current as they start.
                worker_make_current=True,
                # Development only: its site-database servers and processors listen on loopback.
                outbound_allow_loopback=True,
                s3_endpoint_url=objects.endpoint_url,
                s3_bucket=objects.bucket,
                s3_access_key_id=objects.access_key_id,
                s3_secret_access_key=objects.secret_access_key,
            )
            yield ThrowawayStack(settings, env, mail, postgres, objects)
        finally:
            if env is not None:
                await env.shutdown()
            objects.stop()
            mail.stop()
            postgres.stop()
