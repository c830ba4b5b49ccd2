"""Finishing a bot deletion against real PostgreSQL. The services own their data in stores of their own, so no
foreign key of the product's database can prove nothing of the bot remains: the workflow finishes only once every
service's own count (VerifySubjectErased) found nothing (tests/deletion/test_bot_deletion_workflow.py), and
finishing removes the bot row and records the completion, idempotently, unless an operator skipped a service."""

from __future__ import annotations

import asyncpg
import pytest
from temporalio.testing import ActivityEnvironment

from activities.deletion.records import DeletionRecords
from activities.resources import ActivityResources
from devstack.seed import seed
from lifecycle.deletion.contracts import FinishBotDeletionInput, FinishBotDeletionResult
from lifecycle.deletion.workflow_types import bot_deletion_id
from lifecycle.settings import Settings


@pytest.fixture
def records(resources: ActivityResources) -> DeletionRecords:
    return DeletionRecords(resources)


async def _recorded_bot(settings: Settings, conn: asyncpg.Connection) -> str:
    """A seeded bot with its deletion recorded, as the API records it."""
    seeded = await seed(settings, bots=1, rows=10)
    bot_id = seeded.bot_ids[0]
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


async def test_the_bot_row_is_removed_and_recorded_once_however_often_finishing_runs(
    settings: Settings, records: DeletionRecords, conn: asyncpg.Connection
) -> None:
    bot_id = await _recorded_bot(settings, conn)
    assert await _finish(records, bot_id) == FinishBotDeletionResult(bot_row_deleted=True)
    assert await _state(conn, bot_id) == (0, True)
    # A retry or a reset runs it again: still done, nothing else changes.
    assert await _finish(records, bot_id) == FinishBotDeletionResult(bot_row_deleted=True)
    assert await _state(conn, bot_id) == (0, True)


async def test_a_skipped_service_keeps_the_bot_row_and_is_recorded(
    settings: Settings, records: DeletionRecords, conn: asyncpg.Connection
) -> None:
    bot_id = await _recorded_bot(settings, conn)
    request = FinishBotDeletionInput(
        workflow_id=bot_deletion_id(bot_id), bot_id=bot_id, delete_bot_row=False, skipped_services=["chat"]
    )
    assert await ActivityEnvironment().run(records.finish_bot_deletion, request) == FinishBotDeletionResult()
    assert await _state(conn, bot_id) == (1, False)
    skipped = await conn.fetchval(
        "SELECT skipped FROM deletion_progress WHERE workflow_id = $1 AND service = 'chat'",
        bot_deletion_id(bot_id),
    )
    assert skipped is True
