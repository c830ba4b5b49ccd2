"""The tests' own queries, on a small pool per database instead of a connection per query.

A new connection costs PostgreSQL a backend of its own (a fork, then its catalog caches) and the client a
handshake: about 8 ms of CPU in all, and the suite's probes ask every 0.1 s. The pools live as long as the
session's event loop. A pooled connection that a server restart (the drills) or a forced drop broke is replaced,
as a connection per query would have been, so a probe sees no difference.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg

from devstack.seed import asyncpg_dsn

# Enough for the probes a test runs side by side; an idle connection closes soon, so that none outlives the test
# that opened it by much (nor keeps a database a test drops busy).
POOL_SIZE = 4
IDLE_SECONDS = 5.0
# What a connection that a restart or a forced drop broke raises on its next use.
BROKEN = (asyncpg.ConnectionDoesNotExistError, asyncpg.InterfaceError, asyncpg.AdminShutdownError, OSError)

_pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Future[asyncpg.Pool]]] = (
    weakref.WeakKeyDictionary()
)


async def _pool(database_url: str) -> asyncpg.Pool:
    pools = _pools.setdefault(asyncio.get_running_loop(), {})
    dsn = asyncpg_dsn(database_url)
    if dsn not in pools:
        # A future, so that probes asking at once share one pool.
        pools[dsn] = asyncio.ensure_future(
            asyncpg.create_pool(dsn, min_size=0, max_size=POOL_SIZE, max_inactive_connection_lifetime=IDLE_SECONDS)
        )
    return await pools[dsn]


@asynccontextmanager
async def connection(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    """A pooled connection to `database_url` (a SQLAlchemy or a plain PostgreSQL URL), checked before it is lent."""
    pool = await _pool(database_url)
    for attempt in (1, 2):
        conn = await pool.acquire()
        try:
            await conn.fetchval("SELECT 1")
        except BROKEN:
            await pool.release(conn)
            if attempt == 2:
                raise
            # The others idle beside it were broken by the same restart: the next acquire connects afresh.
            await pool.expire_connections()
            continue
        try:
            yield conn
        finally:
            await pool.release(conn)
        return


async def fetchval(database_url: str, sql: str, *args: Any) -> Any:
    async with connection(database_url) as conn:
        return await conn.fetchval(sql, *args)
