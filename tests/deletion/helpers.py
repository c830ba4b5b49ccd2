"""Shared by the deletion tests: counting what a bot still owns, and waiting on a condition."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import asyncpg
from temporalio.client import Client

from activities.resources import ActivityResources
from devstack.seed import asyncpg_dsn
from lifecycle.contracts import DELETION_SERVICES as SERVICES
from lifecycle.settings import Settings
from worker import build_worker

T = TypeVar("T")

# Generous: the machine is shared; tests assert outcomes, never durations.
WAIT_LIMIT_SECONDS = 90.0


async def remaining_rows(database_url: str, bot_id: str) -> dict[str, int]:
    conn = await asyncpg.connect(asyncpg_dsn(database_url))
    try:
        return {
            service: await conn.fetchval(f"SELECT count(*) FROM {service} WHERE bot_id = $1::uuid", bot_id)
            for service in SERVICES
        }
    finally:
        await conn.close()


def remaining_files(storage: Path, bot_id: str) -> int:
    directory = storage / bot_id
    return sum(1 for _ in directory.iterdir()) if directory.exists() else 0


async def eventually(probe: Callable[[], Awaitable[T | None]], what: str) -> T:
    """Poll until `probe` returns something truthy; fail with `what` if it never does."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_LIMIT_SECONDS
    while True:
        value = await probe()
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"never happened: {what}")
        await asyncio.sleep(0.2)


@contextlib.asynccontextmanager
async def own_worker(settings: Settings, client: Client, faults: str | None = None) -> AsyncIterator[Settings]:
    """A real worker polling the queues of `settings` (see own_queue), optionally with FAULT_INJECTION."""
    own = settings.model_copy(update={"fault_injection": faults})
    resources = ActivityResources.create(own, client)
    try:
        async with build_worker(client, resources, own):
            yield own
    finally:
        await resources.engine.dispose()


def own_queue(settings: Settings) -> Settings:
    """Settings with a queue nobody polls until own_worker starts: runs started there wait for the test."""
    queue = f"own-{uuid.uuid4().hex[:8]}"
    return settings.model_copy(update={"task_queue": queue, "site_task_queue": queue})
