"""Finishing a bot deletion: the bot row's foreign keys are the check that nothing remains, against real
PostgreSQL (finish_bot_deletion relies on them instead of a pass of its own over every table)."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest
from temporalio.testing import ActivityEnvironment

from activities.deletion.deleters import DELETERS
from activities.deletion.records import DeletionRecords
from activities.resources import ActivityResources
from devstack.seed import asyncpg_dsn, seed
from lifecycle.deletion.contracts import FinishBotDeletionInput, FinishBotDeletionResult
from lifecycle.settings import Settings
from lifecycle.workflow_ids import bot_deletion_id
from tests.eventually import eventually


@pytest.fixture
def records(resources: ActivityResources) -> DeletionRecords:
    return DeletionRecords(resources)


async def _bot_emptied_but(settings: Settings, conn: asyncpg.Connection, kept: str | None = None) -> str:
    """A seeded bot whose rows are all gone but `kept`'s (as after the deleters), with its deletion recorded."""
    seeded = await seed(settings, bots=1, rows=50)
    bot_id = seeded.bot_ids[0]
    for name, deleter in DELETERS.items():
        if name != kept:
            await conn.execute(f"DELETE FROM {deleter.table} WHERE bot_id = $1::uuid", bot_id)
    await conn.execute(
        "INSERT INTO deletion_requests (workflow_id, kind, account_id, bot_id) VALUES ($1, 'bot', $2::uuid, $3::uuid)",
        bot_deletion_id(bot_id),
        seeded.account_id,
        bot_id,
    )
    return bot_id


async def _finish(records: DeletionRecords, bot_id: str) -> FinishBotDeletionResult:
    request = FinishBotDeletionInput(workflow_id=bot_deletion_id(bot_id), bot_id=bot_id, delete_bot_row=True)
    return await ActivityEnvironment().run(records.finish_bot_deletion, request)


async def _state(conn: asyncpg.Connection, bot_id: str) -> tuple[int, bool]:
    """(bot rows, whether the deletion is recorded as completed)."""
    bots = await conn.fetchval("SELECT count(*) FROM bots WHERE id = $1::uuid", bot_id)
    completed = await conn.fetchval(
        "SELECT completed_at IS NOT NULL FROM deletion_requests WHERE workflow_id = $1", bot_deletion_id(bot_id)
    )
    return bots, completed


async def test_every_deleters_table_references_the_bot_row_without_cascading(conn: asyncpg.Connection) -> None:
    # finish_bot_deletion's only check that no row remains is these constraints: a service without one (or
    # with ON DELETE CASCADE / SET NULL) would let the bot row go while its data stays.
    rows = await conn.fetch(
        "SELECT c.conrelid::regclass::text AS table_name FROM pg_constraint c"
        " JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = ANY(c.conkey)"
        " WHERE c.contype = 'f' AND c.confrelid = 'bots'::regclass AND a.attname = 'bot_id'"
        " AND c.confdeltype IN ('a', 'r')"
    )
    guarded = {row["table_name"] for row in rows}
    assert {deleter.table for deleter in DELETERS.values()} <= guarded


async def test_an_emptied_bot_is_removed_and_recorded_once_however_often_finishing_runs(
    settings: Settings, records: DeletionRecords, conn: asyncpg.Connection
) -> None:
    bot_id = await _bot_emptied_but(settings, conn)
    assert await _finish(records, bot_id) == FinishBotDeletionResult(bot_row_deleted=True)
    assert await _state(conn, bot_id) == (0, True)
    # A retry or a reset runs it again: still done, nothing else changes.
    assert await _finish(records, bot_id) == FinishBotDeletionResult(bot_row_deleted=True)
    assert await _state(conn, bot_id) == (0, True)


@pytest.mark.parametrize("service", list(DELETERS))
async def test_a_row_left_in_any_service_keeps_the_bot_row_and_names_the_service(
    settings: Settings, records: DeletionRecords, conn: asyncpg.Connection, service: str
) -> None:
    bot_id = await _bot_emptied_but(settings, conn, kept=service)
    assert await _finish(records, bot_id) == FinishBotDeletionResult(remaining_services=[service])
    assert await _state(conn, bot_id) == (1, False)


@pytest.mark.parametrize("writer_commits", [True, False])
async def test_a_writer_still_inside_its_transaction_is_waited_for(
    settings: Settings, records: DeletionRecords, conn: asyncpg.Connection, writer_commits: bool
) -> None:
    bot_id = await _bot_emptied_but(settings, conn)
    writer = await asyncpg.connect(asyncpg_dsn(settings.database_url))
    try:
        transaction = writer.transaction()
        await transaction.start()
        # Its foreign-key check locks the bot row until it commits or rolls back.
        await writer.execute(
            "INSERT INTO messages (bot_id, conversation_ref, body) VALUES ($1::uuid, 1, 'late')", bot_id
        )
        finishing = asyncio.create_task(_finish(records, bot_id))
        # Observed, not slept on: finishing is inside PostgreSQL, blocked by the writer's lock.
        writer_pid = writer.get_server_pid()
        await eventually(
            lambda: conn.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))", writer_pid
            ),
            "finishing waits on the writer's lock",
            within=30,
        )
        assert not finishing.done(), "finishing went ahead while a writer held the bot row"
        await (transaction.commit() if writer_commits else transaction.rollback())
        result = await finishing
    finally:
        await writer.close()
    if writer_commits:
        assert result == FinishBotDeletionResult(remaining_services=["messages"])
        assert await _state(conn, bot_id) == (1, False)
    else:
        assert result == FinishBotDeletionResult(bot_row_deleted=True)
        assert await _state(conn, bot_id) == (0, True)


async def test_a_skipped_service_keeps_the_bot_row_and_is_recorded(
    settings: Settings, records: DeletionRecords, conn: asyncpg.Connection
) -> None:
    bot_id = await _bot_emptied_but(settings, conn)
    request = FinishBotDeletionInput(
        workflow_id=bot_deletion_id(bot_id), bot_id=bot_id, delete_bot_row=False, skipped_services=["messages"]
    )
    assert await ActivityEnvironment().run(records.finish_bot_deletion, request) == FinishBotDeletionResult()
    assert await _state(conn, bot_id) == (1, False)
    skipped = await conn.fetchval(
        "SELECT skipped FROM deletion_progress WHERE workflow_id = $1 AND service = 'messages'",
        bot_deletion_id(bot_id),
    )
    assert skipped is True
