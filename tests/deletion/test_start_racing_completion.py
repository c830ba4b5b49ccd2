"""A repeated request whose start reaches Temporal just as the run completes joins that run: never a second one.

The request checks the bot or account row, then starts the workflow (DELETION_REUSE allows a new run after any
close, so that a stopped deletion can be driven on). If the run deleted the row and completed between the check
and the start, the start would begin a second run. The flood drill (200 identical DELETEs) once saw exactly that.
Here the request is held inside the client's start, by a client interceptor on a real client, while the run is
resumed and goes as far as it can; then the start is let through (lifecycle/deletion/starts.py says why it joins
or starts nothing, with no database lock held meanwhile).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from email import message_from_bytes
from typing import Any

import pytest
import pytest_asyncio
from sqlalchemy.ext.asyncio import AsyncEngine
from temporalio import client as temporal
from temporalio.client import Client

from api.deletion.requests import Accepted, request_account_deletion, request_bot_deletion
from devstack.seed import seed
from devstack.smtp_sink import SmtpSink
from lifecycle.db.engine import make_engine, make_sessionmaker
from lifecycle.deletion import starts as deletion_starts
from lifecycle.deletion.workflow_types import account_deletion_id, bot_deletion_id
from lifecycle.settings import Settings
from tests.db import fetchval
from tests.deletion.helpers import start_paused_account_deletion
from tests.eventually import eventually
from tests.operators.starts import start_bot_deletion
from worker import LifecycleWorkers


class HeldStart(temporal.Interceptor):
    """Holds this client's workflow starts until released: the moment between a request's check and its start."""

    def __init__(self) -> None:
        self.reached = asyncio.Event()
        self.released = asyncio.Event()

    def intercept_client(self, next: temporal.OutboundInterceptor) -> temporal.OutboundInterceptor:
        return _Holding(next, self)


class _Holding(temporal.OutboundInterceptor):
    def __init__(self, next: temporal.OutboundInterceptor, hold: HeldStart) -> None:
        super().__init__(next)
        self._hold = hold

    async def start_workflow(self, input: temporal.StartWorkflowInput) -> temporal.WorkflowHandle[Any, Any]:
        self._hold.reached.set()
        await self._hold.released.wait()
        return await super().start_workflow(input)


def _held_client(client: Client, hold: HeldStart) -> Client:
    return Client(
        client.service_client, namespace=client.namespace, data_converter=client.data_converter, interceptors=[hold]
    )


@pytest_asyncio.fixture
async def engine(settings: Settings) -> AsyncIterator[AsyncEngine]:
    created = make_engine(settings.database_url, pool_size=2)
    try:
        yield created
    finally:
        await created.dispose()


async def _closed_or_blocked(client: Client, settings: Settings, workflow_id: str, row_statement: str) -> bool:
    """The run closed, or its last step waits for a lock on the row (as it would if a request held one while it
    starts: none does)."""
    if (await client.get_workflow_handle(workflow_id).describe()).status != temporal.WorkflowExecutionStatus.RUNNING:
        return True
    waiting = await fetchval(
        settings.database_url,
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE $1",
        f"{row_statement}%",
    )
    return bool(waiting)


async def _runs(client: Client, workflow_id: str) -> list[str]:
    return [str(run.status.name) async for run in client.list_workflows(f'WorkflowId = "{workflow_id}"') if run.status]


async def _let_through_when_it_cannot_go_further(
    client: Client, settings: Settings, hold: HeldStart, workflow_id: str, row_statement: str
) -> None:
    async def stuck() -> bool:
        return await _closed_or_blocked(client, settings, workflow_id, row_statement)

    await eventually(stuck, f"{workflow_id} closes, or its last step waits for the row's lock")
    hold.released.set()


@pytest.mark.usefixtures("worker")
async def test_a_bot_deletion_requested_again_as_it_completes_stays_one_run(
    settings: Settings, temporal_client: Client, engine: AsyncEngine
) -> None:
    seeded = await seed(settings, bots=1, rows=30)
    bot_id = seeded.bot_ids[0]
    workflow_id = bot_deletion_id(bot_id)
    running = await start_bot_deletion(
        temporal_client, settings.task_queue, bot_id=bot_id, account_id=seeded.account_id, paused=True
    )
    hold = HeldStart()

    async def request_again() -> Accepted | None:
        async with make_sessionmaker(engine)() as session:
            return await request_bot_deletion(
                session,
                engine,
                _held_client(temporal_client, hold),
                settings.task_queue,
                account_id=uuid.UUID(seeded.account_id),
                bot_id=uuid.UUID(bot_id),
                due_within=settings.erasure_due_within,
                registry_settle_seconds=settings.deletion_registry_settle_seconds,
            )

    request = asyncio.create_task(request_again())
    await asyncio.wait_for(hold.reached.wait(), timeout=30)
    await running.signal("resume")
    await _let_through_when_it_cannot_go_further(temporal_client, settings, hold, workflow_id, "DELETE FROM bots")

    accepted = await asyncio.wait_for(request, timeout=30)
    assert accepted is not None and accepted.workflow_id == workflow_id
    result = await asyncio.wait_for(temporal_client.get_workflow_handle(workflow_id).result(), timeout=60)
    assert result["status"] == "completed"
    assert await fetchval(settings.database_url, "SELECT count(*) FROM bots WHERE id = $1::uuid", bot_id) == 0
    assert await _runs(temporal_client, workflow_id) == ["COMPLETED"]


async def test_an_account_deletion_redriven_as_it_completes_stays_one_run_and_one_email(
    settings: Settings, temporal_client: Client, worker: LifecycleWorkers, smtp_sink: SmtpSink, engine: AsyncEngine
) -> None:
    seeded = await seed(settings, bots=1, rows=30)
    address = await fetchval(settings.database_url, "SELECT email FROM accounts WHERE id = $1::uuid", seeded.account_id)
    workflow_id = account_deletion_id(seeded.account_id)
    running = await start_paused_account_deletion(temporal_client, settings, seeded.account_id)
    hold = HeldStart()

    async def redrive() -> None:
        async with make_sessionmaker(engine)() as session:
            await request_account_deletion(
                session, _held_client(temporal_client, hold), settings, account_id=uuid.UUID(seeded.account_id)
            )

    request = asyncio.create_task(redrive())
    await asyncio.wait_for(hold.reached.wait(), timeout=30)
    await running.signal("resume")
    await _let_through_when_it_cannot_go_further(
        temporal_client, settings, hold, workflow_id, "SELECT id FROM accounts WHERE id = $1 FOR UPDATE"
    )

    await asyncio.wait_for(request, timeout=30)
    result = await asyncio.wait_for(temporal_client.get_workflow_handle(workflow_id).result(), timeout=60)
    assert result["status"] == "completed" and result["account_row_deleted"]
    assert (
        await fetchval(settings.database_url, "SELECT count(*) FROM accounts WHERE id = $1::uuid", seeded.account_id)
        == 0
    )
    assert await _runs(temporal_client, workflow_id) == ["COMPLETED"]
    mails = [message_from_bytes(path.read_bytes()) for path in smtp_sink.messages()]
    assert len([m for m in mails if m["To"] == address]) == 1


@pytest.mark.usefixtures("worker")
async def test_a_start_after_the_deletion_completed_reads_the_row_once_and_starts_nothing(
    settings: Settings, temporal_client: Client, engine: AsyncEngine
) -> None:
    seeded = await seed(settings, bots=1, rows=30)
    bot_id = seeded.bot_ids[0]
    done = await start_bot_deletion(temporal_client, settings.task_queue, bot_id=bot_id, account_id=seeded.account_id)
    await asyncio.wait_for(done.result(), timeout=60)
    asked: list[str] = []

    async def row_exists() -> bool:
        asked.append(bot_id)
        return await deletion_starts.row_check(engine, "bots", bot_id)()

    started = await deletion_starts.start_bot_deletion(
        temporal_client, settings.task_queue, bot_id=bot_id, account_id=seeded.account_id, row_exists=row_exists
    )
    # Temporal refused the start (the run completed); the row, read then, is gone: nothing starts.
    assert (started, asked) == (False, [bot_id])
    assert await _runs(temporal_client, bot_deletion_id(bot_id)) == ["COMPLETED"]


@pytest.mark.usefixtures("worker")
async def test_an_account_that_went_while_its_request_ran_is_answered_finished(
    settings: Settings, temporal_client: Client, engine: AsyncEngine
) -> None:
    """The admin's re-drive found the account row, then the deletion completed before the request read it."""
    seeded = await seed(settings, bots=1, rows=30)
    account_id = uuid.UUID(seeded.account_id)
    sessions = make_sessionmaker(engine)
    async with sessions() as session:
        first = await request_account_deletion(session, temporal_client, settings, account_id=account_id)
    await asyncio.wait_for(temporal_client.get_workflow_handle(first.workflow_id).result(), timeout=60)

    async with sessions() as session:
        again = await request_account_deletion(session, temporal_client, settings, account_id=account_id)
    assert (again.workflow_id, again.finished) == (first.workflow_id, True)
    assert await _runs(temporal_client, first.workflow_id) == ["COMPLETED"]
