"""A stack of its own for fault drills: servers here get killed, stopped and restarted mid-run."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine
from temporalio.client import Client

from devstack.ports import free_port
from devstack.postgres import PostgresServer
from devstack.seaweedfs import SeaweedServer
from devstack.smtp_sink import SmtpSink
from devstack.temporal_server import TemporalDevServer
from lifecycle.data_converter import DATA_CONVERTER
from lifecycle.deletion.budget import set_budget
from lifecycle.migrate import upgrade_async
from lifecycle.settings import Settings
from tests.conftest import ADMIN_TOKEN, EXPORT_SIGNING_KEY, object_store_settings
from tests.processes import ApiProcess, ChildProcess, service_processes, worker_process

# The drills' deletion budget. They test recovery from kills and outages, not pacing: at the default 20,000
# rows/s (a quarter of it while autovacuum runs on a table) the chaos drill's 640,000 rows, sharing one budget,
# would keep it waiting minutes after its last kill. Every deleter still reserves its batches from this budget.
DRILL_ROWS_PER_SECOND = 100_000


@dataclass
class DrillStack:
    root: Path
    postgres: PostgresServer
    temporal: TemporalDevServer
    smtp: SmtpSink
    objects: SeaweedServer
    settings: Settings
    client: Client

    def worker(self, name: str = "worker", **overrides: str) -> ChildProcess:
        process = worker_process(self.settings, self.root / f"{name}-{uuid.uuid4().hex[:6]}.log", **overrides)
        process.start()
        return process

    def api(self, **overrides: str) -> ApiProcess:
        process = ApiProcess(self.settings, self.root / f"api-{uuid.uuid4().hex[:6]}.log", **overrides)
        process.start()
        return process

    def restart_temporal(self, down_seconds: float = 0.0) -> None:
        """Stop the dev server, stay down `down_seconds`, start it again on the same port and state file."""
        self.temporal.stop()
        time.sleep(down_seconds)  # the fault itself: the server stays down this long
        self.temporal.start()

    def restart_postgres(self, down_seconds: float = 0.0) -> None:
        """Fast shutdown (open transactions roll back), stay down `down_seconds`, start on the same data."""
        self.postgres.stop()
        time.sleep(down_seconds)  # the fault itself: the server stays down this long
        self.postgres.start()


@pytest.fixture(scope="package")
def drill_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("drills")


@pytest.fixture(scope="package")
def drill_postgres(drill_root: Path) -> Iterator[PostgresServer]:
    server = PostgresServer(drill_root / "postgres", free_port())
    server.start()
    server.create_database("lifecycle")
    yield server
    server.stop()


@pytest.fixture(scope="package")
def drill_temporal(drill_root: Path) -> Iterator[TemporalDevServer]:
    # A state file, so that a restart in the middle of a run loses nothing.
    server = TemporalDevServer(
        drill_root / "temporal.db", port=free_port(), ui_port=None, log_path=drill_root / "temporal.log"
    )
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="package")
def drill_smtp(drill_root: Path) -> Iterator[SmtpSink]:
    sink = SmtpSink(drill_root / "mail", free_port())
    sink.start()
    yield sink
    sink.stop()


@pytest.fixture(scope="package")
def drill_objects(drill_root: Path) -> Iterator[SeaweedServer]:
    server = SeaweedServer(drill_root / "seaweedfs")
    server.start()
    yield server
    server.stop()


@pytest_asyncio.fixture(scope="package")
async def drill_stack(
    drill_root: Path,
    drill_postgres: PostgresServer,
    drill_temporal: TemporalDevServer,
    drill_smtp: SmtpSink,
    drill_objects: SeaweedServer,
) -> AsyncIterator[DrillStack]:
    database_url = drill_postgres.url("lifecycle")
    await upgrade_async(database_url)
    engine = create_async_engine(database_url)
    try:
        async with engine.begin() as conn:
            await set_budget(conn, DRILL_ROWS_PER_SECOND)
    finally:
        await engine.dispose()
    settings = Settings(
        data_dir=drill_root / "data",
        database_url=database_url,
        temporal_address=drill_temporal.address,
        task_queue="drills",
        smtp_port=drill_smtp.port,
        mail_dir=drill_smtp.directory,
        admin_token=ADMIN_TOKEN,
        # Exports on, as `make run` has them: the erasure drill removes an earlier one.
        export_signing_key=EXPORT_SIGNING_KEY,
        # These tests follow deletions in the background (202); tests/deletion/test_inline_answer.py turns the
        # inline answer on for its own app.
        deletion_inline_wait=0,
        # Every worker of the drills makes its version current as it starts (docs/versioning.md).
        worker_make_current=True,
        # Its site-database servers and webhooks listen on loopback (lifecycle/outbound.py).
        outbound_allow_loopback=True,
        **object_store_settings(drill_objects),
    )
    client = await Client.connect(drill_temporal.address, data_converter=DATA_CONVERTER)
    # The services a deletion reaches: their own worker processes, registered in the drills' registry. A drill
    # that restarts PostgreSQL or Temporal restarts their dependencies too; they reconnect by themselves.
    services = service_processes(settings, drill_root, "drills")
    for process, _ in services.values():
        process.start()
    engine = create_async_engine(database_url)
    try:
        async with engine.begin() as conn:
            for name, (_, queue) in services.items():
                await conn.execute(_REGISTER, {"name": name, "queue": queue})
    finally:
        await engine.dispose()
    try:
        yield DrillStack(drill_root, drill_postgres, drill_temporal, drill_smtp, drill_objects, settings, client)
    finally:
        for process, _ in services.values():
            process.kill()


_REGISTER = text(
    "INSERT INTO deletion_services (name, task_queue, contract) VALUES (:name, :queue, 'lifecycle.deletion.v1')"
    " ON CONFLICT (name) DO UPDATE SET task_queue = EXCLUDED.task_queue, retired_at = NULL"
)
