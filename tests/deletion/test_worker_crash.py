"""An account deletion survives the worker process being killed mid-batch (real PostgreSQL and Temporal)."""

from __future__ import annotations

import email
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import asyncpg
import pytest
from temporalio.client import Client

from activities.deletion.deleters import DELETION_SERVICES as SERVICES
from api.deletion.requests import request_account_deletion
from devstack.seed import asyncpg_dsn, seed
from devstack.smtp_sink import SmtpSink
from lifecycle.db.engine import make_engine, make_sessionmaker
from lifecycle.deletion.contracts import AccountDeletionResult, DeletionStatus
from lifecycle.settings import Settings
from lifecycle.workflow_ids import bot_deletion_id
from tests.deletion.helpers import remaining_files, remaining_rows
from tests.eventually import eventually

PROJECT_ROOT = Path(__file__).resolve().parents[2]
ROWS_PER_BOT = 150_000


@contextmanager
def worker_process(settings: Settings, task_queue: str, faults: str = "") -> Iterator[subprocess.Popen[bytes]]:
    env = {
        "FAULT_INJECTION": faults,
        **os.environ,
        "DATA_DIR": str(settings.data_dir),
        "DATABASE_URL": settings.database_url,
        "TEMPORAL_ADDRESS": settings.temporal_address,
        "TASK_QUEUE": task_queue,
        # Both roles on the test's own queue: a version made current on a queue another deployment serves would
        # take that queue's work away from it.
        "SITE_TASK_QUEUE": task_queue,
        "SMTP_HOST": settings.smtp_host,
        "SMTP_PORT": str(settings.smtp_port),
        "MAIL_DIR": str(settings.mail_path),
        "STORAGE_DIR": str(settings.storage_path),
        "WORKER_MAKE_CURRENT": "true",
    }
    process = subprocess.Popen([sys.executable, "worker.py"], cwd=PROJECT_ROOT, env=env)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            process.wait(60)


async def sample(client: Client, bot_ids: list[str], seen: dict[str, list[dict[str, int]]]) -> None:
    """Record each bot deletion's per-service progress, when a worker is there to answer."""
    for bot_id in bot_ids:
        handle = client.get_workflow_handle(bot_deletion_id(bot_id))
        try:
            status = await handle.query("progress", result_type=DeletionStatus, rpc_timeout=timedelta(seconds=2))
        except Exception:
            continue
        seen.setdefault(bot_id, []).append({s: p.deleted for s, p in status.services.items()})


async def test_account_deletion_survives_a_killed_worker(
    settings: Settings, temporal_client: Client, smtp_sink: SmtpSink
) -> None:
    task_queue = f"crash-{uuid.uuid4().hex[:8]}"
    seeded = await seed(settings.database_url, settings.storage_path, bots=2, rows=ROWS_PER_BOT)
    conn = await asyncpg.connect(asyncpg_dsn(settings.database_url))
    address = await conn.fetchval("SELECT email FROM accounts WHERE id = $1::uuid", seeded.account_id)
    engine = make_engine(settings.database_url, pool_size=2)
    seen: dict[str, list[dict[str, int]]] = {}
    try:
        # Each deleter call waits half a second first: with the worker's few deletion slots, some services are
        # deleted while others still wait, so the kill below always lands mid-deletion.
        with worker_process(settings, task_queue, faults="delete_bot_service=delay:0.5") as first:
            async with make_sessionmaker(engine)() as session:
                own = settings.model_copy(update={"task_queue": task_queue, "site_task_queue": task_queue})
                accepted = await request_account_deletion(
                    session, temporal_client, own, account_id=uuid.UUID(seeded.account_id)
                )

            async def mid_deletion() -> bool:
                # The deleters' own committed progress, read every 20 ms: no worker has to answer.
                deleted = await conn.fetchval(
                    "SELECT coalesce(sum(deleted), 0) FROM deletion_progress WHERE workflow_id = ANY($1::text[])",
                    [bot_deletion_id(bot_id) for bot_id in seeded.bot_ids],
                )
                return deleted > 0

            await eventually(mid_deletion, "the first worker deleted something", within=60, interval=0.02)
            first.kill()
            first.wait()
        remaining_after_kill = 0
        for bot_id in seeded.bot_ids:
            remaining_after_kill += sum((await remaining_rows(settings.database_url, bot_id)).values())
        assert remaining_after_kill > 0, "the worker must die mid-deletion for this test to mean anything"

        with worker_process(settings, task_queue):
            handle = temporal_client.get_workflow_handle(accepted.workflow_id, result_type=AccountDeletionResult)

            async def finished() -> AccountDeletionResult | None:
                await sample(temporal_client, seeded.bot_ids, seen)
                description = await handle.describe()
                return await handle.result() if description.close_time else None

            result = await eventually(finished, "the account deletion completes on the second worker")

        assert result.account_row_deleted
        assert result.bots_deleted == 2
        for bot_id in seeded.bot_ids:
            assert set((await remaining_rows(settings.database_url, bot_id)).values()) == {0}
            assert remaining_files(settings.storage_path, bot_id) == 0
        assert await conn.fetchval("SELECT count(*) FROM accounts WHERE id = $1::uuid", seeded.account_id) == 0
        assert await conn.fetchval("SELECT count(*) FROM api_keys WHERE account_id = $1::uuid", seeded.account_id) == 0
        for runs in seen.values():
            for service in SERVICES:
                counts = [run.get(service, 0) for run in runs]
                assert counts == sorted(counts), f"{service} progress went backwards: {counts}"
        mails = [email.message_from_bytes(p.read_bytes()) for p in smtp_sink.messages()]
        assert sum(m["To"] == address for m in mails) == 1
    finally:
        await conn.close()
        await engine.dispose()


pytestmark = pytest.mark.timeout(240)
