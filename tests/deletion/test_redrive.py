"""Runs that closed without completing are not done: repeats, re-drives and the account's final check,
against real PostgreSQL, a real Temporal dev server and real workers."""

from __future__ import annotations

import asyncio
import uuid
from email import message_from_bytes

import asyncpg
import httpx
from fastapi import FastAPI
from temporalio.client import Client, WorkflowExecutionStatus

from api.deletion.requests import request_account_deletion
from devstack.seed import asyncpg_dsn, rows_per_service, seed
from devstack.smtp_sink import SmtpSink
from lifecycle.deletion.contracts import AccountDeletionResult, BotDeletionResult
from lifecycle.deletion.workflow_types import account_deletion_id, bot_deletion_id
from lifecycle.settings import Settings
from services.chat import CHAT
from services.runtime.database import service_database_url
from tests.deletion.helpers import remaining_objects, remaining_rows
from tests.eventually import eventually
from tests.operators.starts import start_bot_deletion
from tests.workers import own_queue, own_worker
from worker import LifecycleWorkers

CONFIRMATION = "Your account has been deleted"


async def _fetch(settings: Settings, sql: str, *args: object) -> object:
    conn = await asyncpg.connect(asyncpg_dsn(settings.database_url))
    try:
        return await conn.fetchval(sql, *args)
    finally:
        await conn.close()


def _confirmations(sink: SmtpSink, address: str) -> list[str]:
    messages = [message_from_bytes(path.read_bytes()) for path in sink.messages()]
    return [m["Message-ID"] for m in messages if m["To"] == address and m["Subject"] == CONFIRMATION]


async def _recorded_deleted(settings: Settings, workflow_id: str) -> int:
    value = await _fetch(
        settings, "SELECT coalesce(sum(deleted), 0) FROM deletion_progress WHERE workflow_id = $1", workflow_id
    )
    return int(value)  # type: ignore[call-overload]


async def test_a_terminated_bot_deletion_is_finished_by_a_repeated_delete_counting_on(
    api: httpx.AsyncClient, settings: Settings, worker: LifecycleWorkers, temporal_client: Client
) -> None:
    seeded = await seed(settings, bots=1, rows=20_000)
    headers = {"Authorization": f"Bearer {seeded.api_key}"}
    bot_id = seeded.bot_ids[0]
    workflow_id = bot_deletion_id(bot_id)
    # Small batches keep it open long enough for the operator to stop it half-way.
    first = await start_bot_deletion(
        temporal_client, settings.task_queue, bot_id=bot_id, account_id=seeded.account_id, batch_size=100
    )
    assert (await api.delete(f"/bots/{bot_id}", headers=headers)).status_code == 202  # joins the open run

    async def some_deleted() -> int:
        return await _recorded_deleted(settings, workflow_id)

    await eventually(some_deleted, "the first run records progress")
    await first.terminate(reason="operator test")
    stopped_at = await _recorded_deleted(settings, workflow_id)
    assert 0 < stopped_at < 20_000
    assert sum((await remaining_rows(settings.database_url, bot_id)).values()) > 0

    again = await api.delete(f"/bots/{bot_id}", headers=headers)
    assert again.status_code == 202 and again.json()["status"] == "accepted"
    result = await temporal_client.get_workflow_handle(workflow_id, result_type=BotDeletionResult).result()
    assert result.status == "completed"
    # The new run counted on from what the first one recorded, not from zero.
    expected = rows_per_service(20_000)
    assert {name: (p.deleted, p.total) for name, p in result.services.items()} == {
        name: (n, n) for name, n in expected.items()
    }
    assert set((await remaining_rows(settings.database_url, bot_id)).values()) == {0}
    assert await remaining_objects(settings, bot_id) == 0
    assert await _fetch(settings, "SELECT count(*) FROM bots WHERE id = $1::uuid", bot_id) == 0
    runs = [run async for run in temporal_client.list_workflows(f'WorkflowId = "{workflow_id}"')]
    assert sorted(run.status.name for run in runs if run.status) == ["COMPLETED", "TERMINATED"]


async def test_an_account_deletion_redrives_bot_deletions_an_operator_stopped(
    settings: Settings, temporal_client: Client, smtp_sink: SmtpSink, app: FastAPI
) -> None:
    seeded = await seed(settings, bots=2, rows=300)
    address = await _fetch(settings, "SELECT email FROM accounts WHERE id = $1::uuid", seeded.account_id)
    # One bot's deletion was started by DELETE /bots and is paused: the account deletion joins it.
    joined = seeded.bot_ids[0]
    own = own_queue(settings)
    await start_bot_deletion(temporal_client, own.task_queue, bot_id=joined, account_id=seeded.account_id, paused=True)
    account = temporal_client.get_workflow_handle(
        account_deletion_id(seeded.account_id), result_type=AccountDeletionResult
    )
    async with app.state.sessionmaker() as session:
        await request_account_deletion(session, temporal_client, own, account_id=uuid.UUID(seeded.account_id))
    # Paused before any worker polls: the account starts its other bot's deletion paused, so both stay open.
    await account.signal("pause")
    child = seeded.bot_ids[1]
    async with own_worker(own, temporal_client):

        async def both_open() -> bool:
            statuses = [await _status(temporal_client, bot_deletion_id(b)) for b in seeded.bot_ids]
            return all(s == WorkflowExecutionStatus.RUNNING for s in statuses)

        await eventually(both_open, "both bot deletions are open")
        # An operator stops both: the run the account joined, and the account's own child.
        await temporal_client.get_workflow_handle(bot_deletion_id(joined)).terminate(reason="operator test")
        await temporal_client.get_workflow_handle(bot_deletion_id(child)).cancel()
        await account.signal("resume")
        result = await asyncio.wait_for(account.result(), timeout=90)

    assert result.status == "completed" and result.account_row_deleted
    for bot_id in seeded.bot_ids:
        assert set((await remaining_rows(settings.database_url, bot_id)).values()) == {0}
    assert await _fetch(settings, "SELECT count(*) FROM accounts WHERE id = $1::uuid", seeded.account_id) == 0
    assert len(_confirmations(smtp_sink, str(address))) == 1


async def _status(client: Client, workflow_id: str) -> WorkflowExecutionStatus | None:
    try:
        return (await client.get_workflow_handle(workflow_id).describe()).status
    except Exception:
        return None


async def test_a_bot_created_while_the_keys_were_revoked_is_deleted_before_the_account(
    settings: Settings, temporal_client: Client, smtp_sink: SmtpSink, app: FastAPI
) -> None:
    seeded = await seed(settings, bots=1, rows=100)
    address = await _fetch(settings, "SELECT email FROM accounts WHERE id = $1::uuid", seeded.account_id)
    own = own_queue(settings)
    account = temporal_client.get_workflow_handle(
        account_deletion_id(seeded.account_id), result_type=AccountDeletionResult
    )
    async with app.state.sessionmaker() as session:
        await request_account_deletion(session, temporal_client, own, account_id=uuid.UUID(seeded.account_id))
    await account.signal("pause")
    async with own_worker(own, temporal_client):

        async def listed() -> bool:
            return await _status(temporal_client, bot_deletion_id(seeded.bot_ids[0])) == WorkflowExecutionStatus.RUNNING

        # The account's bots are listed (its first bot's deletion is open, paused) when the racing
        # POST /bots commits: it authorized before the keys were revoked.
        await eventually(listed, "the listed bot's deletion is open")
        raced = await _fetch(
            settings,
            "INSERT INTO bots (id, account_id, name) VALUES (gen_random_uuid(), $1::uuid, 'raced') RETURNING id::text",
            seeded.account_id,
        )
        # And a message of it in the chat service's own database.
        chat = await asyncpg.connect(asyncpg_dsn(service_database_url(CHAT.name, beside=settings.database_url)))
        try:
            await chat.execute(
                "INSERT INTO messages (bot_id, conversation_ref, body) VALUES ($1::uuid, 1, 'hello')", raced
            )
        finally:
            await chat.close()
        await account.signal("resume")
        result = await asyncio.wait_for(account.result(), timeout=90)

    assert result.status == "completed" and result.account_row_deleted
    assert set((await remaining_rows(settings.database_url, str(raced))).values()) == {0}
    assert await _fetch(settings, "SELECT count(*) FROM bots WHERE account_id = $1::uuid", seeded.account_id) == 0
    assert await _fetch(settings, "SELECT count(*) FROM accounts WHERE id = $1::uuid", seeded.account_id) == 0
    assert len(_confirmations(smtp_sink, str(address))) == 1
