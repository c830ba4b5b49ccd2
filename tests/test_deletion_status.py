"""Deletion status comes from PostgreSQL and the Temporal server's describe, never from a worker.

No test here runs the lifecycle worker: each run is either started with no worker polling its queue, or driven
to the closing under test by a stand-in workflow on a task queue of its own, under the real workflow id.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

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
    from temporalio.worker import Worker

    from devstack.seed import asyncpg_dsn
    from lifecycle.search_attributes import LIFECYCLE_STATUS
    from lifecycle.settings import Settings
    from lifecycle.workflow_ids import account_deletion_id, bot_deletion_id
    from tests.conftest import ADMIN_HEADERS, ApiAccount


@workflow.defn(name="StatusStandIn")
class StatusStandIn:
    """Ends the way the test asks: completes, fails, or waits to be cancelled."""

    @workflow.run
    async def run(self, ending: str) -> None:
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
    conn = await asyncpg.connect(asyncpg_dsn(database_url))
    try:
        await conn.execute(sql, *args)
    finally:
        await conn.close()


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


async def test_recorded_but_not_started_is_running_with_committed_progress(
    api: httpx.AsyncClient, account: ApiAccount, settings: Settings
) -> None:
    bot_id = await _bot_with_deletion_record(settings.database_url, account, api)
    await _progress(settings.database_url, bot_deletion_id(bot_id), "messages", 40, 100)
    await _progress(settings.database_url, bot_deletion_id(bot_id), "conversations", 10, 10, done=True)

    status = await _status(api, bot_id, account)
    assert status["status"] == "running"
    assert status["progress"] == {
        "conversations": {"deleted": 10, "total": 10},
        "messages": {"deleted": 40, "total": 100},
    }
    assert status["resume"] is None


async def test_running_run_shows_its_lifecycle_status_without_any_worker(
    api: httpx.AsyncClient, account: ApiAccount, settings: Settings, temporal_client: Client
) -> None:
    bot_id = await _bot_with_deletion_record(settings.database_url, account, api)
    # Nobody polls this queue: a query would hang, describe answers at once.
    handle = await temporal_client.start_workflow(
        "BotDeletion",
        id=bot_deletion_id(bot_id),
        task_queue=f"unpolled-{uuid.uuid4().hex[:8]}",
        search_attributes=TypedSearchAttributes([SearchAttributePair(LIFECYCLE_STATUS, "waiting_for_operator")]),
    )
    try:
        status = await asyncio.wait_for(_status(api, bot_id, account), timeout=10)
        assert status["status"] == "waiting_for_operator"
    finally:
        await handle.terminate()
    terminated = await _status(api, bot_id, account)
    assert terminated["status"] == "terminated"
    assert terminated["resume"] == f"Repeat DELETE /bots/{bot_id} with the account's API key."


async def _run_stand_in(client: Client, bot_id: str, queue: str, ending: str) -> WorkflowHandle[object, object]:
    return await client.start_workflow("StatusStandIn", ending, id=bot_deletion_id(bot_id), task_queue=queue)


async def test_completed_is_completed_or_incomplete_after_a_skip(
    api: httpx.AsyncClient, account: ApiAccount, settings: Settings, temporal_client: Client, stand_in_queue: str
) -> None:
    whole = await _bot_with_deletion_record(settings.database_url, account, api)
    await (await _run_stand_in(temporal_client, whole, stand_in_queue, "complete")).result()
    assert (await _status(api, whole, account))["status"] == "completed"

    skipped = await _bot_with_deletion_record(settings.database_url, account, api)
    await _progress(settings.database_url, bot_deletion_id(skipped), "messages", 0, 5, skipped=True)
    await (await _run_stand_in(temporal_client, skipped, stand_in_queue, "complete")).result()
    status = await _status(api, skipped, account)
    assert status["status"] == "incomplete"
    assert status["resume"] is None


async def test_failed_and_cancelled_say_how_to_resume(
    api: httpx.AsyncClient, account: ApiAccount, settings: Settings, temporal_client: Client, stand_in_queue: str
) -> None:
    failing = await _bot_with_deletion_record(settings.database_url, account, api)
    failed = await _run_stand_in(temporal_client, failing, stand_in_queue, "fail")
    with pytest.raises(WorkflowFailureError):
        await failed.result()
    status = await _status(api, failing, account)
    assert status["status"] == "failed"
    assert status["resume"] == f"Repeat DELETE /bots/{failing} with the account's API key."

    cancelling = await _bot_with_deletion_record(settings.database_url, account, api)
    waiting = await _run_stand_in(temporal_client, cancelling, stand_in_queue, "wait")
    await waiting.cancel()
    with pytest.raises(WorkflowFailureError):
        await waiting.result()
    assert (await _status(api, cancelling, account))["status"] == "cancelled"


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
    assert status["status"] == "running"  # recorded, not started: the reconciler starts it
    assert status["progress"] == {"integrations": {"deleted": 1, "total": 1}, "messages": {"deleted": 12, "total": 17}}
    assert status["resume"] is None
