"""The pool hands out no connection PostgreSQL closed, without a round trip per checkout, and keeps every connection
it opens (lifecycle/db/engine.py)."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from lifecycle.db.engine import POOL_CAPACITY, make_engine
from tests.eventually import eventually


async def _pid(engine: AsyncEngine) -> int:
    async with engine.connect() as connection:
        return int((await connection.execute(text("SELECT pg_backend_pid()"))).scalar_one())


async def _terminate_pooled_connection(engine: AsyncEngine, database_url: str) -> int:
    """PostgreSQL closes the pool's one idle connection, as a restart or an admin's terminate does."""
    pid = await _pid(engine)
    other = create_async_engine(database_url)

    async def gone() -> bool:
        async with other.connect() as connection:
            found = await connection.execute(text("SELECT 1 FROM pg_stat_activity WHERE pid = :pid"), {"pid": pid})
            return found.first() is None

    try:
        async with other.connect() as connection:
            await connection.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
        await eventually(gone, "the backend exits")
    finally:
        await other.dispose()
    return pid


async def test_a_connection_postgres_closed_is_replaced_at_checkout(database_url: str) -> None:
    engine = make_engine(database_url, pool_size=1, max_overflow=0)
    try:
        closed = await _terminate_pooled_connection(engine, database_url)
        # The next checkout gets a new backend and no error reaches the caller.
        assert await _pid(engine) != closed
    finally:
        await engine.dispose()


async def test_the_control_without_the_check_hands_the_closed_connection_out(database_url: str) -> None:
    """Shows the scenario above is real: the same pool without the check fails its next statement."""
    engine = create_async_engine(database_url, pool_size=1, max_overflow=0)
    try:
        await _terminate_pooled_connection(engine, database_url)
        with pytest.raises(DBAPIError):
            await _pid(engine)
    finally:
        await engine.dispose()


async def _backends_of_busy_checkouts(engine: AsyncEngine, checkouts: int) -> set[int]:
    """The backends behind `checkouts` connections held at once, as a worker running that many activities holds."""
    all_held = asyncio.Barrier(checkouts)

    async def held() -> int:
        async with engine.connect() as connection:
            pid = int((await connection.execute(text("SELECT pg_backend_pid()"))).scalar_one())
            await all_held.wait()
            return pid

    return set(await asyncio.gather(*(held() for _ in range(checkouts))))


async def test_a_busy_process_reuses_the_connections_it_opened(database_url: str) -> None:
    """More checkouts at once than SQLAlchemy's default pool keeps (5): overflow connections used to be closed on
    return, so every busy moment opened new backends."""
    engine = make_engine(database_url)
    try:
        first = await _backends_of_busy_checkouts(engine, 14)
        again = await _backends_of_busy_checkouts(engine, 14)
        assert len(first) == 14 and again == first
        assert engine.pool.size() == POOL_CAPACITY  # type: ignore[attr-defined]
    finally:
        await engine.dispose()
