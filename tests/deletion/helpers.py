"""Shared by the deletion tests: counting what a bot still owns, starting a paused account deletion, running the
reconciler once, following a bot's deletion through the API and reading the Nexus operations its run called."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import httpx
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle, WorkflowHistory

from lifecycle.deletion.contracts import AccountDeletionInput, AccountDeletionResult
from lifecycle.deletion.workflow_types import RECONCILER_WORKFLOW, account_deletion_options
from lifecycle.object_keys import bot_documents_prefix
from lifecycle.object_store import ObjectStore
from lifecycle.settings import Settings
from lifecycle.shared_contracts import ReconcileResult
from services.catalog import SERVICES
from services.runtime.database import service_database_url
from tests.conftest import ApiAccount
from tests.db import connection
from tests.eventually import eventually

T = TypeVar("T")


async def remaining_rows(database_url: str, bot_id: str) -> dict[str, int]:
    """The bot's rows left in each service's own database (beside `database_url`, the product's), by service."""
    found = {}
    for service in SERVICES:
        async with connection(service_database_url(service.name, beside=database_url)) as conn:
            found[service.name] = sum(
                [
                    await conn.fetchval(f"SELECT count(*) FROM {table} WHERE bot_id = $1::uuid", bot_id)
                    for table in service.seeds
                ]
            )
    return found


async def remaining_objects(settings: Settings, bot_id: str) -> int:
    """The bot's document objects left in the object store, listed there."""
    store = ObjectStore(settings)
    try:
        return await store.count(bot_documents_prefix(bot_id))
    finally:
        await store.close()


async def start_paused_account_deletion(
    client: Client, settings: Settings, account_id: str, **changes: Any
) -> WorkflowHandle[Any, AccountDeletionResult]:
    """The account's deletion, started as the API starts it (its start options) but paused from its first task
    (signal-with-start), so its bot deletions start paused too. Nothing is marked or recorded: the admin's
    re-drive does that."""
    return await account_deletion_options(account_id).start(
        client,
        AccountDeletionInput(account_id=account_id, site_task_queue=settings.site_task_queue, **changes),
        task_queue=settings.task_queue,
        start_signal="pause",
        result_type=AccountDeletionResult,
    )


async def run_reconciler(client: Client, settings: Settings) -> ReconcileResult:
    """One run of the reconciler on `settings`' queue, as its schedule starts it."""
    return await client.execute_workflow(
        RECONCILER_WORKFLOW,
        id=f"reconciler-test-{uuid.uuid4().hex[:8]}",
        task_queue=settings.task_queue,
        result_type=ReconcileResult,
    )


async def a_bot(api: httpx.AsyncClient, account: ApiAccount) -> str:
    created = await api.post("/bots", json={"name": "indexed"}, headers=account.headers)
    assert created.status_code == 201, created.text
    return str(created.json()["id"])


def status_of(api: httpx.AsyncClient, bot_id: str, account: ApiAccount) -> Callable[[], Awaitable[dict[str, Any]]]:
    async def status() -> dict[str, Any]:
        answer = await api.get(f"/bots/{bot_id}/deletion", headers=account.headers)
        assert answer.status_code == 200, answer.text
        return dict(answer.json())

    return status


async def completed(api: httpx.AsyncClient, bot_id: str, account: ApiAccount) -> dict[str, Any]:
    status = status_of(api, bot_id, account)

    async def done() -> dict[str, Any] | None:
        body = await status()
        return body if body["status"] == "completed" else None

    return await eventually(done, "the bot deletion completes")


async def receipt_of(api: httpx.AsyncClient, bot_id: str, account: ApiAccount) -> dict[str, Any]:
    answer = await api.get(f"/bots/{bot_id}/deletion/receipt", headers=account.headers)
    assert answer.status_code == 200, answer.text
    return dict(answer.json()["receipt"])


def nexus_calls(history: WorkflowHistory, endpoint: str) -> list[str]:
    """The operations a deletion's run called through `endpoint`, in order."""
    return [
        event.nexus_operation_scheduled_event_attributes.operation
        for event in history.events
        if event.event_type == EventType.EVENT_TYPE_NEXUS_OPERATION_SCHEDULED
        and event.nexus_operation_scheduled_event_attributes.endpoint == endpoint
    ]


async def waiting_on_the_hold(handle: WorkflowHandle[Any, Any]) -> bool:
    """The run stopped: nothing in flight, and it waits on the hold's timer."""
    if (await handle.describe()).raw_description.pending_activities:
        return False
    events = [event async for event in handle.fetch_history_events()]
    timers = [e for e in events if e.HasField("timer_started_event_attributes")]
    return bool(timers) and b"legal hold on account" in timers[-1].user_metadata.summary.data
