"""Stops read true: `temporal workflow cancel` on a bot deletion mid-way is recorded by the run itself as it stops,
with rows left, and a repeated request finishes it; a `terminate`, which the run cannot record, reads `terminated`
once the reconciler passes, and until then its status says how old it is (`as_of`)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import httpx
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle

from devstack.seed import rows_per_service, seed
from lifecycle.deletion.contracts import BotDeletionInput
from lifecycle.deletion.workflow_types import bot_deletion_id, bot_deletion_options
from lifecycle.settings import Settings
from tests.conftest import FEW_DOCUMENTS, ApiAccount
from tests.db import connection
from tests.deletion.helpers import completed, remaining_rows, run_reconciler, status_of
from tests.deletion.test_deletion_budget import budget
from tests.eventually import eventually
from tests.operators.cli import AsyncCli
from tests.workers import own_queue, own_worker
from worker import LifecycleWorkers

ROWS = 20_000
# Shared by both deletions: slow enough that each is still deleting when the operator stops it.
ROWS_PER_SECOND = 1_000
# Where the cancel lands: a run's first step, which asks whether a legal hold is in force.
HELD_STEP = "legal_hold_in_force"
HELD_SECONDS = 10
# Events in a run before it continues as new: past the first slices of every service, well short of the default.
SHORT_RUN = 40
SEEDED = sum(rows_per_service(ROWS, FEW_DOCUMENTS).values())


async def _database_now(settings: Settings) -> datetime:
    """The database's clock, which writes `as_of`."""
    async with connection(settings.database_url) as conn:
        now: datetime = await conn.fetchval("SELECT now()")
        return now


async def _under_way(api: httpx.AsyncClient, bot_id: str, account: ApiAccount) -> dict[str, Any]:
    status = status_of(api, bot_id, account)

    async def deleting() -> dict[str, Any] | None:
        body = await status()
        deleted = sum(service["deleted"] for service in body["progress"].values())
        return body if body["status"] == "running" and deleted > 0 else None

    return await eventually(deleting, f"the deletion of bot {bot_id} is under way")


async def _stopped(client: Client, workflow_id: str, how: WorkflowExecutionStatus) -> None:
    async def closed() -> bool:
        return (await client.get_workflow_handle(workflow_id).describe()).status == how

    await eventually(closed, f"{workflow_id} is {how.name}")


async def _requested(settings: Settings, account_id: str, bot_id: str) -> None:
    """The bot marked and its deletion recorded, as DELETE /bots/{id} does before it starts the run."""
    async with connection(settings.database_url) as conn:
        await conn.execute("UPDATE bots SET deletion_requested_at = now() WHERE id = $1::uuid", bot_id)
        await conn.execute(
            "INSERT INTO deletion_requests (workflow_id, kind, account_id, bot_id) VALUES ($1, 'bot', $2, $3)",
            bot_deletion_id(bot_id),
            uuid.UUID(account_id),
            uuid.UUID(bot_id),
        )


async def _continued_and_starting(handle: WorkflowHandle[Any, Any]) -> None:
    """Until the run continued as new once and the next run waits in its first step (the fault holds it)."""
    first = (await handle.describe()).run_id

    async def starting() -> bool:
        described = await handle.describe()
        pending = described.raw_description.pending_activities
        return described.run_id != first and any(a.activity_type.name == HELD_STEP for a in pending)

    await eventually(starting, f"{handle.id} continues as new and its next run begins")


async def test_a_cancel_reads_cancelled_as_the_run_stops_and_a_terminate_once_the_reconciler_passes(
    cli: AsyncCli,
    api: httpx.AsyncClient,
    temporal_client: Client,
    settings: Settings,
    task_queue: str,
    worker: LifecycleWorkers,
) -> None:
    seeded = await seed(settings, bots=2, rows=ROWS, documents=FEW_DOCUMENTS)
    account = ApiAccount(id=seeded.account_id, name="seeded", email="", api_key=seeded.api_key)
    cancelled, terminated = seeded.bot_ids
    faulted = own_queue(settings, task_queue)
    async with budget(api, ROWS_PER_SECOND), own_worker(faulted, temporal_client, f"{HELD_STEP}=delay:{HELD_SECONDS}"):
        await _requested(settings, seeded.account_id, cancelled)
        # Short runs, so the deletion continues as new after its first slices: a cancel lands as the next run
        # begins, in its first step, while the data is half deleted.
        handle = await bot_deletion_options(cancelled, seeded.account_id).start(
            temporal_client,
            BotDeletionInput(bot_id=cancelled, account_id=seeded.account_id, continue_as_new_after_events=SHORT_RUN),
            task_queue=task_queue,
        )
        requested = await api.delete(f"/bots/{terminated}", headers=account.headers)
        assert requested.status_code == 202, requested.text
        assert requested.json()["status"] == "accepted"
        await _under_way(api, terminated, account)
        before_terminate = await _database_now(settings)
        await cli.run("workflow", "terminate", "--workflow-id", bot_deletion_id(terminated), "--reason", "stops")
        await _stopped(temporal_client, bot_deletion_id(terminated), WorkflowExecutionStatus.TERMINATED)

        await _continued_and_starting(handle)
        before_cancel = await _database_now(settings)
        await cli.run("workflow", "cancel", "--workflow-id", bot_deletion_id(cancelled))
        await _stopped(temporal_client, bot_deletion_id(cancelled), WorkflowExecutionStatus.CANCELED)

    # No reconciler pass yet: the cancelled run recorded its own stop before it closed.
    shown = await status_of(api, cancelled, account)()
    assert shown["status"] == "cancelled"
    assert datetime.fromisoformat(shown["as_of"]) >= before_cancel
    assert shown["resume"] == f"Repeat DELETE /bots/{cancelled} with the account's API key."
    # Stopped mid-way: the first run's slices deleted rows, the rest remain.
    assert 0 < sum((await remaining_rows(settings.database_url, cancelled)).values()) < SEEDED

    # The terminated run recorded nothing: its last status shows, as of before the terminate.
    unknown = await status_of(api, terminated, account)()
    assert unknown["status"] == "running"
    assert datetime.fromisoformat(unknown["as_of"]) < before_terminate
    await run_reconciler(temporal_client, settings)
    recorded = await status_of(api, terminated, account)()
    assert recorded["status"] == "terminated"
    assert datetime.fromisoformat(recorded["as_of"]) > before_terminate
    assert sum((await remaining_rows(settings.database_url, terminated)).values()) > 0

    for bot_id in seeded.bot_ids:
        repeated = await api.delete(f"/bots/{bot_id}", headers=account.headers)
        assert repeated.status_code == 202, repeated.text
        # A new run: the request is accepted again until that run begins.
        assert repeated.json()["status"] == "accepted"
    for bot_id in seeded.bot_ids:
        await completed(api, bot_id, account)
        assert set((await remaining_rows(settings.database_url, bot_id)).values()) == {0}
