"""The pool hands out no connection PostgreSQL closed, without a round trip per checkout (lifecycle/db/engine.py)."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from lifecycle.db.engine import make_engine
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
