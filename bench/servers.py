"""A benchmark run's own servers: PostgreSQL (migrated) and a Temporal dev server, in a temp directory."""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from devstack.binaries import temporal_cli
from devstack.ports import free_port
from devstack.postgres import PostgresServer
from lifecycle import search_attributes
from lifecycle.migrate import upgrade_async
from lifecycle.settings import Settings


@asynccontextmanager
async def bench_servers() -> AsyncIterator[tuple[Settings, WorkflowEnvironment]]:
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        root = Path(tmp)
        postgres = PostgresServer(root / "postgres", free_port(), durable=True)
        postgres.start()
        env: WorkflowEnvironment | None = None
        try:
            postgres.create_database("bench")
            url = postgres.url("bench")
            await upgrade_async(url)
            env = await WorkflowEnvironment.start_local(
                dev_server_existing_path=temporal_cli(),
                search_attributes=search_attributes.ALL,
                dev_server_extra_args=["--ui-disable-news-fetch"],
            )
            settings = Settings(
                data_dir=root / "data",
                database_url=url,
                temporal_address=env.client.service_client.config.target_host,
                task_queue=f"bench-{uuid.uuid4().hex[:8]}",
                admin_token="bench",
            )
            yield settings, env
        finally:
            if env is not None:
                await env.shutdown()
            postgres.stop()
