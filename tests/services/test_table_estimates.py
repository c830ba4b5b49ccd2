"""A service's estimate of a bot's rows left (TableDeleter.estimate_remaining), which its DeleteResponse carries
for progress and an expected end time: exact below the sample, close above it, against real PostgreSQL."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest_asyncio
from sqlalchemy.ext.asyncio import create_async_engine

from devstack.postgres import PostgresServer
from services.chat import CHAT
from services.runtime.database import asyncpg_dsn
from services.runtime.seeding import prepare
from services.runtime.tables import ESTIMATE_SAMPLE, TableDeleter

MESSAGES = TableDeleter("messages")


@pytest_asyncio.fixture(scope="module")
async def chat_url(postgres_server: PostgresServer) -> str:
    url = postgres_server.url("own_estimates")
    await prepare(CHAT, url)
    return url


@pytest_asyncio.fixture
async def conn(chat_url: str) -> AsyncIterator[asyncpg.Connection]:
    connection = await asyncpg.connect(asyncpg_dsn(chat_url))
    try:
        yield connection
    finally:
        await connection.close()


async def _add_messages(conn: asyncpg.Connection, bot_id: str, count: int) -> None:
    await conn.execute(
        "INSERT INTO messages (bot_id, conversation_ref, body) SELECT $1::uuid, g, 'm' FROM generate_series(1, $2) g",
        bot_id,
        count,
    )


async def _estimate(chat_url: str, bot_id: str, cursor: int = 0) -> int:
    engine = create_async_engine(chat_url)
    try:
        async with engine.connect() as connection:
            return await MESSAGES.estimate_remaining(connection, bot_id, cursor)
    finally:
        await engine.dispose()


async def test_below_the_sample_the_estimate_is_the_exact_count(chat_url: str, conn: asyncpg.Connection) -> None:
    bot_id = str(uuid.uuid4())
    await _add_messages(conn, bot_id, ESTIMATE_SAMPLE // 2)
    assert await _estimate(chat_url, bot_id) == ESTIMATE_SAMPLE // 2
    # Above a cursor, only what lies above it.
    cursor = await conn.fetchval(
        "SELECT id FROM messages WHERE bot_id = $1::uuid ORDER BY id OFFSET 99 LIMIT 1", bot_id
    )
    assert await _estimate(chat_url, bot_id, cursor) == ESTIMATE_SAMPLE // 2 - 100


async def test_a_bot_written_in_bulk_is_estimated_exactly(chat_url: str, conn: asyncpg.Connection) -> None:
    bot_id = str(uuid.uuid4())
    await _add_messages(conn, bot_id, 5 * ESTIMATE_SAMPLE)
    assert await _estimate(chat_url, bot_id) == 5 * ESTIMATE_SAMPLE


async def test_a_bot_whose_rows_arrived_among_others_is_estimated_closely(
    chat_url: str, conn: asyncpg.Connection
) -> None:
    bot_id, other = str(uuid.uuid4()), str(uuid.uuid4())
    # About a third of the rows are this bot's, spread at random over the whole id range.
    await conn.execute(
        "INSERT INTO messages (bot_id, conversation_ref, body) SELECT CASE WHEN random() < 0.33 THEN $1::uuid"
        " ELSE $2::uuid END, g, 'm' FROM generate_series(1, $3) g",
        bot_id,
        other,
        15 * ESTIMATE_SAMPLE,
    )
    exact = await conn.fetchval("SELECT count(*) FROM messages WHERE bot_id = $1::uuid", bot_id)
    assert exact > ESTIMATE_SAMPLE
    assert abs(await _estimate(chat_url, bot_id) - exact) <= 0.05 * exact
