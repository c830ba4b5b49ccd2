"""Shared by the deletion tests: counting what a bot still owns, and waiting on a condition."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import asyncpg

from devstack.seed import asyncpg_dsn
from lifecycle.contracts import DELETION_SERVICES as SERVICES

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
