"""A deletion's status comes from PostgreSQL alone (deletion_requests.status): recorded by the API, by the run as
it changes it, and by the reconciler for what only Temporal knows. The status GET asks no worker and no Temporal.

Runs that must close in a given way without recording it (a run of older code, say) are stand-ins under the real
workflow id on a task queue of their own; a real run is the lifecycle worker's.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import datetime

from temporalio import workflow

# The sandbox re-imports this module to run StatusStandIn: everything else passes through untouched.
with workflow.unsafe.imports_passed_through():
    import asyncpg
    import httpx
    import pytest
    import pytest_asyncio
    from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
    from temporalio.common import SearchAttributePair, TypedSearchAttributes
    from temporalio.exceptions import ApplicationError
    from temporalio.testing import ActivityEnvironment
    from temporalio.worker import Worker

    from activities.deletion.records import DeletionRecords
    from activities.resources import ActivityResources
    from api.app import create_app
    from devstack.ports import free_port
    from lifecycle.deletion.workflow_types import account_deletion_id, bot_deletion_id
    from lifecycle.search_attributes import LIFECYCLE_STATUS
    from lifecycle.settings import Settings
    from lifecycle.shared_contracts import DeletionStatusChange
    from lifecycle.statuses import DeletionState
    from tests.conftest import ADMIN_HEADERS, ApiAccount
    from tests.db import connection
    from tests.deletion.helpers import run_reconciler
    from tests.eventually import eventually
    from tests.operators.starts import start_bot_deletion
    from worker import LifecycleWorkers


@workflow.defn(name="StatusStandIn")
class StatusStandIn:
    """Ends the way the test asks, recording nothing: completes (publishing `incomplete` if asked, as a run of
    code older than the recording does), fails, or waits to be cancelled."""

    @workflow.run
    async def run(self, ending: str) -> None:
        if ending == "incomplete":
            workflow.upsert_search_attributes([LIFECYCLE_STATUS.value_set(ending)])
        if ending == "fail":
            raise ApplicationError("made to fail", non_retryable=True)
        if ending == "wait":
            await workflow.wait_condition(lambda: False)


@pytest_asyncio.fixture
async def stand_in_queue(temporal_client: Client) -> AsyncIterator[str]:
    queue = f"status-stand-in-{uuid.uuid4().hex[:8]}"
    async with Worker(temporal_client, task_queue=queue, workflows=[StatusStandIn]):
        yield queue


async def _bot_with_deletion_record(database_url: str, account: ApiAccount, api: httpx.AsyncClient) -> str:
    """A bot whose deletion is recorded, as the API records it, but not started."""
    bot = (await api.post("/bots", json={"name": "doomed"}, headers=account.headers)).json()
    await _execute(
        database_url,
        "INSERT INTO deletion_requests (workflow_id, kind, account_id, bot_id) VALUES ($1, 'bot', $2, $3)",
        bot_deletion_id(bot["id"]),
        uuid.UUID(account.id),
        uuid.UUID(bot["id"]),
    )
    return str(bot["id"])


async def _execute(database_url: str, sql: str, *args: object) -> None:
    async with connection(database_url) as conn:
        await conn.execute(sql, *args)


async def _events(database_url: str, workflow_id: str) -> int:
    """How many changes of the deletion the events table holds (each wakes its streams)."""
    async with connection(database_url) as conn:
        return int(await conn.fetchval("SELECT count(*) FROM lifecycle_events WHERE subject_id = $1", workflow_id))


async def _progress(database_url: str, workflow_id: str, service: str, deleted: int, total: int, **flags: bool) -> None:
    await _execute(
        database_url,
        "INSERT INTO deletion_progress (workflow_id, service, deleted, total, done, skipped)"
        " VALUES ($1, $2, $3, $4, $5, $6)",
        workflow_id,
        service,
        deleted,
        total,
        flags.get("done", False),
        flags.get("skipped", False),
    )


async def _status(api: httpx.AsyncClient, bot_id: str, account: ApiAccount) -> dict[str, object]:
    response = await api.get(f"/bots/{bot_id}/deletion", headers=account.headers)
    assert response.status_code == 200, response.text
    body: dict[str, object] = response.json()
    return body


async def _as_of(api: httpx.AsyncClient, bot_id: str, account: ApiAccount) -> datetime:
    return datetime.fromisoformat(str((await _status(api, bot_id, account))["as_of"]))


async def _paused_bot_deletion(
    api: httpx.AsyncClient, account: ApiAccount, settings: Settings, client: Client
) -> tuple[str, WorkflowHandle[object, object]]:
    """A real bot deletion, recorded first as the API does, started paused on the session's worker; returned
    once its run recorded `paused`."""
    bot_id = await _bot_with_deletion_record(settings.database_url, account, api)
    handle = await start_bot_deletion(client, settings.task_queue, bot_id=bot_id, account_id=account.id, paused=True)

    async def shown() -> object:
        return (await _status(api, bot_id, account))["status"]

    await eventually(shown, "the run records that it is paused", until=lambda status: status == "paused")
    return bot_id, handle


async def test_recorded_but_not_started_is_accepted_with_committed_progress(
    api: httpx.AsyncClient, account: ApiAccount, settings: Settings
) -> None:
    bot_id = await _bot_with_deletion_record(settings.database_url, account, api)
    await _progress(settings.database_url, bot_deletion_id(bot_id), "messages", 40, 100)
    await _progress(settings.database_url, bot_deletion_id(bot_id), "conversations", 10, 10, done=True)

    status = await _status(api, bot_id, account)
    assert status["status"] == "accepted"
    assert status["progress"] == {
        "conversations": {"deleted": 10, "total": 10},
        "messages": {"deleted": 40, "total": 100},
    }
    assert status["resume"] is None


async def test_a_paused_deletion_shows_paused_from_postgresql_with_temporal_unreachable(
    api: httpx.AsyncClient, account: ApiAccount, settings: Settings, temporal_client: Client, worker: LifecycleWorkers
) -> None:
    bot_id, handle = await _paused_bot_deletion(api, account, settings, temporal_client)
    try:
        # An API whose Temporal address answers nothing: it never connects, and the status does not need it.
        cut_off = create_app(settings.model_copy(update={"temporal_address": f"127.0.0.1:{free_port()}"}))
        async with cut_off.router.lifespan_context(cut_off):
            transport = httpx.ASGITransport(app=cut_off)
            async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as alone:
                status = await _status(alone, bot_id, account)
                assert status["status"] == "paused"
                assert status["rows_per_second"] == 0 and status["resume"] is None
                assert (await alone.get("/readyz")).status_code == 503  # Temporal is indeed out of reach
    finally:
        await handle.terminate()


async def test_a_terminated_run_is_recorded_by_the_reconciler(
    api: httpx.AsyncClient, account: ApiAccount, settings: Settings, temporal_client: Client, worker: LifecycleWorkers
) -> None:
    bot_id, handle = await _paused_bot_deletion(api, account, settings, temporal_client)
    recorded = await _as_of(api, bot_id, account)
    # The run is open: a pass confirms its status, as of the pass.
    await run_reconciler(temporal_client, settings)
    confirmed = await _as_of(api, bot_id, account)
    assert confirmed > recorded
    await handle.terminate(reason="an operator's terminate")
    # The run could not record it: until the reconciler does, the status is the last one recorded, as of the
    # last confirmation.
    assert (await _status(api, bot_id, account))["status"] == "paused"
    assert await _as_of(api, bot_id, account) == confirmed
    events = await _events(settings.database_url, bot_deletion_id(bot_id))

    assert (await run_reconciler(temporal_client, settings)).deletion_statuses_recorded >= 1
    status = await _status(api, bot_id, account)
    assert status["status"] == "terminated"
    assert status["resume"] == f"Repeat DELETE /bots/{bot_id} with the account's API key."
    # A change like any other: one event for the streams, appended with it.
    assert await _events(settings.database_url, bot_deletion_id(bot_id)) == events + 1


async def test_a_run_that_recorded_nothing_is_recorded_by_the_reconciler_from_what_it_publishes(
    api: httpx.AsyncClient, account: ApiAccount, settings: Settings, temporal_client: Client, worker: LifecycleWorkers
) -> None:
    """As after a reset: the open run publishes a status it has not recorded."""
    bot_id = await _bot_with_deletion_record(settings.database_url, account, api)
    # Nobody polls this queue: the run never runs, and publishes only what it was started with.
    handle = await temporal_client.start_workflow(
        "BotDeletion",
        id=bot_deletion_id(bot_id),
        task_queue=f"unpolled-{uuid.uuid4().hex[:8]}",
        search_attributes=TypedSearchAttributes([SearchAttributePair(LIFECYCLE_STATUS, "waiting_for_operator")]),
    )
    try:
        assert (await _status(api, bot_id, account))["status"] == "accepted"
        await run_reconciler(temporal_client, settings)
        assert (await _status(api, bot_id, account))["status"] == "waiting_for_operator"
    finally:
        await handle.terminate()


async def _closed_stand_in(client: Client, bot_id: str, queue: str, ending: str) -> None:
    handle = await client.start_workflow("StatusStandIn", ending, id=bot_deletion_id(bot_id), task_queue=queue)
    if ending == "wait":
        await handle.cancel()
    if ending in ("fail", "wait"):
        with pytest.raises(WorkflowFailureError):
            await handle.result()
    else:
        await handle.result()


async def test_closings_no_run_recorded_are_recorded_by_the_reconciler(
    api: httpx.AsyncClient,
    account: ApiAccount,
    settings: Settings,
    temporal_client: Client,
    stand_in_queue: str,
    worker: LifecycleWorkers,
) -> None:
    bots = {}
    for ending in ("complete", "incomplete", "fail", "wait"):
        bots[ending] = await _bot_with_deletion_record(settings.database_url, account, api)
        await _closed_stand_in(temporal_client, bots[ending], stand_in_queue, ending)
    await run_reconciler(temporal_client, settings)

    shown = {ending: await _status(api, bot_id, account) for ending, bot_id in bots.items()}
    assert {ending: status["status"] for ending, status in shown.items()} == {
        "complete": "completed",
        "incomplete": "incomplete",
        "fail": "failed",
        "wait": "cancelled",
    }
    assert [ending for ending, status in shown.items() if status["resume"]] == ["fail", "wait"]


async def test_recording_a_status_is_idempotent(
    api: httpx.AsyncClient, account: ApiAccount, settings: Settings, temporal_client: Client
) -> None:
    bot_id = await _bot_with_deletion_record(settings.database_url, account, api)
    workflow_id = bot_deletion_id(bot_id)
    resources = ActivityResources.create(settings, temporal_client)
    records = DeletionRecords(resources)

    async def record(status: DeletionState) -> None:
        await ActivityEnvironment().run(records.record_deletion_status, DeletionStatusChange(workflow_id, status))

    try:
        requested = await _events(settings.database_url, workflow_id)
        await record(DeletionState.PAUSED)
        await record(DeletionState.PAUSED)  # a retry, or the same run's record after a reset
        assert await _events(settings.database_url, workflow_id) == requested + 1
        assert (await _status(api, bot_id, account))["status"] == "paused"
        await record(DeletionState.RUNNING)
        assert await _events(settings.database_url, workflow_id) == requested + 2
    finally:
        await resources.close()


async def test_every_deletion_state_and_no_other_can_be_recorded(
    api: httpx.AsyncClient, account: ApiAccount, settings: Settings
) -> None:
    workflow_id = bot_deletion_id(await _bot_with_deletion_record(settings.database_url, account, api))
    for state in DeletionState:
        await _execute(
            settings.database_url, "UPDATE deletion_requests SET status = $2 WHERE workflow_id = $1", workflow_id, state
        )
    with pytest.raises(asyncpg.CheckViolationError):
        await _execute(
            settings.database_url, "UPDATE deletion_requests SET status = 'unknown' WHERE workflow_id = $1", workflow_id
        )


async def test_account_deletion_needs_the_admin_token_and_adds_up_its_bots(
    api: httpx.AsyncClient, account: ApiAccount, settings: Settings, temporal_client: Client
) -> None:
    url = f"/accounts/{account.id}/deletion"
    missing = await api.get(url, headers=ADMIN_HEADERS)
    assert missing.status_code == 404
    assert missing.headers["content-type"] == "application/problem+json"
    assert (await api.get(url, headers=account.headers)).status_code == 403

    first = await _bot_with_deletion_record(settings.database_url, account, api)
    second = await _bot_with_deletion_record(settings.database_url, account, api)
    await _progress(settings.database_url, bot_deletion_id(first), "messages", 5, 10)
    await _progress(settings.database_url, bot_deletion_id(second), "messages", 7, 7, done=True)
    await _progress(settings.database_url, bot_deletion_id(second), "integrations", 1, 1, done=True)
    await _execute(
        settings.database_url,
        "INSERT INTO deletion_requests (workflow_id, kind, account_id) VALUES ($1, 'account', $2)",
        account_deletion_id(account.id),
        uuid.UUID(account.id),
    )

    status = (await api.get(url, headers=ADMIN_HEADERS)).json()
    assert status["workflow_id"] == account_deletion_id(account.id)
    assert status["status"] == "accepted"  # recorded, not started: the reconciler starts it
    assert status["progress"] == {"integrations": {"deleted": 1, "total": 1}, "messages": {"deleted": 12, "total": 17}}
    assert status["resume"] is None
