"""A deleter's progress against real PostgreSQL: the total is estimated without a count of every row, and the
deleted figure is exact, also when two calls of one workflow id overlap (a terminated run's call beside the
new run's)."""

from __future__ import annotations

import asyncio

import asyncpg
from temporalio.testing import ActivityEnvironment

from activities.deletion.deleters import DELETERS, ESTIMATE_SAMPLE, BotDataDeleters
from activities.resources import ActivityResources
from devstack.seed import seed
from lifecycle.deletion.contracts import DeleteServiceInput, ServiceProgress
from lifecycle.settings import Settings
from lifecycle.workflow_ids import bot_deletion_id


async def _bot(settings: Settings) -> str:
    return (await seed(settings, bots=1, rows=10)).bot_ids[0]


async def _add_messages(conn: asyncpg.Connection, bot_id: str, count: int) -> None:
    await conn.execute(
        "INSERT INTO messages (bot_id, conversation_ref, body) SELECT $1::uuid, g, 'm' FROM generate_series(1, $2) g",
        bot_id,
        count,
    )


async def _estimate(resources: ActivityResources, bot_id: str, cursor: int = 0) -> int:
    async with resources.engine.connect() as connection:
        return await DELETERS["messages"].estimate_remaining(connection, bot_id, cursor)


async def test_below_the_sample_the_estimate_is_the_exact_count(
    settings: Settings, resources: ActivityResources, conn: asyncpg.Connection
) -> None:
    bot_id = await _bot(settings)
    await _add_messages(conn, bot_id, ESTIMATE_SAMPLE // 2)
    exact = await conn.fetchval("SELECT count(*) FROM messages WHERE bot_id = $1::uuid", bot_id)
    assert await _estimate(resources, bot_id) == exact
    # Above a cursor, only what lies above it.
    cursor = await conn.fetchval(
        "SELECT id FROM messages WHERE bot_id = $1::uuid ORDER BY id OFFSET 99 LIMIT 1", bot_id
    )
    assert await _estimate(resources, bot_id, cursor) == exact - 100


async def test_a_bot_written_in_bulk_is_estimated_exactly(
    settings: Settings, resources: ActivityResources, conn: asyncpg.Connection
) -> None:
    bot_id = await _bot(settings)
    await _add_messages(conn, bot_id, 5 * ESTIMATE_SAMPLE)
    exact = await conn.fetchval("SELECT count(*) FROM messages WHERE bot_id = $1::uuid", bot_id)
    assert await _estimate(resources, bot_id) == exact


async def test_a_bot_whose_rows_arrived_among_others_is_estimated_closely(
    settings: Settings, resources: ActivityResources, conn: asyncpg.Connection
) -> None:
    bot_id, other = await _bot(settings), await _bot(settings)
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
    assert abs(await _estimate(resources, bot_id) - exact) <= 0.05 * exact


async def test_overlapping_calls_of_one_workflow_id_add_up_to_the_exact_count(
    settings: Settings, resources: ActivityResources, conn: asyncpg.Connection
) -> None:
    bot_id = await _bot(settings)
    await _add_messages(conn, bot_id, 20_000)
    exact = await conn.fetchval("SELECT count(*) FROM messages WHERE bot_id = $1::uuid", bot_id)
    workflow_id = bot_deletion_id(bot_id)
    request = DeleteServiceInput(
        workflow_id=workflow_id, bot_id=bot_id, service="messages", batch_size=500, progress=ServiceProgress()
    )
    deleters = BotDataDeleters(resources)
    # Two calls over the same rows at once, as a terminated run's call and its successor's may be.
    first, second = await asyncio.gather(
        ActivityEnvironment().run(deleters.delete_bot_service, request),
        ActivityEnvironment().run(deleters.delete_bot_service, request),
    )
    assert first.done and second.done
    recorded = await conn.fetchrow(
        "SELECT deleted, total, done FROM deletion_progress WHERE workflow_id = $1 AND service = 'messages'",
        workflow_id,
    )
    assert (recorded["deleted"], recorded["total"], recorded["done"]) == (exact, exact, True)
    assert await conn.fetchval("SELECT count(*) FROM messages WHERE bot_id = $1::uuid", bot_id) == 0
    # The one that finished last reports the whole figure.
    assert max(first.deleted, second.deleted) == exact
