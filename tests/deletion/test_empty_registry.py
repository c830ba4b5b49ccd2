"""A deletion never completes having reached nobody. With the registry of deletion services empty (a new
environment, a registry lost in a restore), a bot deletion shows `waiting` with its reason, alerts once, deletes
nothing, and goes on by itself once a service registers: on the API's signal, or on its own timer. Only an
operator's `nothing_to_reach` ends it without any service, `incomplete`, and its receipt is never complete.

Against real PostgreSQL, a real Temporal dev server, the session's real gateway worker, the project's services
(their workers polling all along) and the API.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg
import httpx
import pytest
import pytest_asyncio
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle, WorkflowUpdateFailedError

from devstack.seed import rows_per_service, seed
from lifecycle.deletion.contracts import BotDeletionInput, BotDeletionResult
from lifecycle.deletion.registry import NO_SERVICE_REGISTERED, NOTHING_TO_REACH, SERVICE_REGISTERED
from lifecycle.deletion.workflow_types import bot_deletion_id, bot_deletion_options
from lifecycle.settings import Settings
from lifecycle.statuses import DeletionState
from tests.conftest import ADMIN_HEADERS
from tests.deletion.helpers import remaining_rows
from tests.eventually import eventually
from worker import LifecycleWorkers

ROWS = 600


@dataclass(frozen=True)
class EmptiedRegistry:
    # The services the test retired: only these are brought back, never one an earlier test retired for good.
    names: list[str]
    # Registers them again through the API, as a service's worker does at start-up.
    register_again: Callable[[], Awaitable[None]]


@pytest_asyncio.fixture
async def empty_registry(conn: asyncpg.Connection, api: httpx.AsyncClient) -> AsyncIterator[EmptiedRegistry]:
    """Every active deletion service retired for the test (their workers keep polling); registered again through
    the API by the test or, at the latest, afterwards, so the session's later deletions reach them."""
    retired = await conn.fetch(
        "UPDATE deletion_services SET retired_at = now() WHERE retired_at IS NULL RETURNING name, task_queue, contract"
    )
    assert retired, "the session's services were registered"

    async def register_again() -> None:
        for name, task_queue, contract in retired:
            answer = await api.put(
                f"/deletion-services/{name}",
                json={"task_queue": task_queue, "contract": contract},
                headers=ADMIN_HEADERS,
            )
            assert answer.status_code == 200, answer.text

    yield EmptiedRegistry([row["name"] for row in retired], register_again)
    await register_again()


def _status(api: httpx.AsyncClient, bot_id: str, headers: dict[str, str]) -> Callable[[], Awaitable[dict[str, Any]]]:
    async def status() -> dict[str, Any]:
        answer = await api.get(f"/bots/{bot_id}/deletion", headers=headers)
        assert answer.status_code == 200, answer.text
        body: dict[str, Any] = answer.json()
        # Never completed while no service was reached.
        assert body["status"] != DeletionState.COMPLETED or body["progress"], body
        return body

    return status


async def _waiting(status: Callable[[], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
    return await eventually(status, "the deletion shows `waiting`", until=lambda body: body["status"] == "waiting")


async def _alerts(conn: asyncpg.Connection, workflow_id: str) -> list[str]:
    return [row["reason"] for row in await conn.fetch("SELECT reason FROM alerts WHERE workflow_id = $1", workflow_id)]


async def _registry_reads(handle: WorkflowHandle[Any, Any]) -> int:
    """How often the run has read the registry so far, by its history."""
    reads = [
        event
        async for event in handle.fetch_history_events()
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and event.activity_task_scheduled_event_attributes.activity_type.name == "list_deletion_services"
    ]
    return len(reads)


@pytest.mark.long
async def test_a_deletion_with_no_service_waits_alerts_once_and_completes_once_one_registers(
    api: httpx.AsyncClient,
    conn: asyncpg.Connection,
    settings: Settings,
    worker: LifecycleWorkers,
    temporal_client: Client,
    empty_registry: EmptiedRegistry,
) -> None:
    seeded = await seed(settings, bots=1, rows=ROWS)
    bot_id, headers = seeded.bot_ids[0], {"Authorization": f"Bearer {seeded.api_key}"}
    workflow_id = bot_deletion_id(bot_id)
    status = _status(api, bot_id, headers)
    assert (await api.delete(f"/bots/{bot_id}", headers=headers)).status_code == 202

    waiting = await _waiting(status)
    assert waiting["reason"] == NO_SERVICE_REGISTERED and waiting["progress"] == {}
    await eventually(lambda: _alerts(conn, workflow_id), "the deletion alerts")
    # Read again and again (each signal, with the registry still empty): still waiting, and no second alert.
    handle = temporal_client.get_workflow_handle(workflow_id)
    for reads in (2, 3):
        await handle.signal(SERVICE_REGISTERED)
        read = await eventually(lambda: _registry_reads(handle), "read again", until=lambda n: n >= reads)  # noqa: B023
        assert read == reads
    assert (await status())["status"] == "waiting"
    assert len(await _alerts(conn, workflow_id)) == 1
    assert await remaining_rows(settings.database_url, bot_id) == rows_per_service(ROWS)
    assert (await api.get(f"/bots/{bot_id}/deletion/receipt", headers=headers)).status_code == 404

    await empty_registry.register_again()  # the services register again: the API signals the deletion that waits
    done = await eventually(status, "the deletion completes", until=lambda body: body["status"] == "completed")
    assert "reason" not in done
    assert await remaining_rows(settings.database_url, bot_id) == dict.fromkeys(rows_per_service(ROWS), 0)
    receipt = (await api.get(f"/bots/{bot_id}/deletion/receipt", headers=headers)).json()["receipt"]
    listed = (await api.get("/deletion-services", headers=ADMIN_HEADERS)).json()["services"]
    registered_at = {s["name"]: s["registered_at"] for s in listed if s["retired_at"] is None}
    assert {entry["service"] for entry in receipt["registry"]} == set(rows_per_service(ROWS))
    for entry in receipt["registry"]:
        # The same moment as the registry says, in the receipt's own format (RFC 3339, UTC).
        assert _same_time(entry["registered_at"], registered_at[entry["service"]]), entry
    assert {name: s["rows_deleted"] for name, s in receipt["services"].items()} == rows_per_service(ROWS)
    assert receipt["complete"] is True
    assert len(await _alerts(conn, workflow_id)) == 1


async def test_without_the_signal_the_timer_reads_the_registry_again(
    conn: asyncpg.Connection,
    settings: Settings,
    worker: LifecycleWorkers,
    temporal_client: Client,
    empty_registry: EmptiedRegistry,
) -> None:
    seeded = await seed(settings, bots=1, rows=ROWS)
    bot_id = seeded.bot_ids[0]
    handle = await bot_deletion_options(bot_id, seeded.account_id).start(
        temporal_client,
        BotDeletionInput(
            bot_id=bot_id, account_id=seeded.account_id, registry_recheck_seconds=1, registry_settle_seconds=1
        ),
        task_queue=settings.task_queue,
        result_type=BotDeletionResult,
    )
    await eventually(lambda: _registry_reads(handle), "the registry read on the timer", until=lambda n: n >= 2)
    # Registered behind the API's back: no signal, only the run's own timer sees it.
    await conn.execute("UPDATE deletion_services SET retired_at = NULL WHERE name = ANY($1)", empty_registry.names)
    result = await handle.result()
    assert result.status == DeletionState.COMPLETED
    assert {name: p.deleted for name, p in result.services.items()} == rows_per_service(ROWS)


async def test_nothing_to_reach_is_an_operators_decision_and_never_a_complete_receipt(
    api: httpx.AsyncClient,
    conn: asyncpg.Connection,
    settings: Settings,
    worker: LifecycleWorkers,
    temporal_client: Client,
    empty_registry: EmptiedRegistry,
) -> None:
    seeded = await seed(settings, bots=1, rows=ROWS)
    bot_id, headers = seeded.bot_ids[0], {"Authorization": f"Bearer {seeded.api_key}"}
    handle = temporal_client.get_workflow_handle(bot_deletion_id(bot_id))
    status = _status(api, bot_id, headers)
    assert (await api.delete(f"/bots/{bot_id}", headers=headers)).status_code == 202
    await _waiting(status)

    answer = await handle.execute_update(NOTHING_TO_REACH, result_type=str)
    assert "incomplete" in answer
    with pytest.raises(WorkflowUpdateFailedError):
        await handle.execute_update(NOTHING_TO_REACH, result_type=str)  # once only
    ended = await eventually(status, "the deletion ends", until=lambda body: body["status"] == "incomplete")
    assert "reason" not in ended
    receipt = (await api.get(f"/bots/{bot_id}/deletion/receipt", headers=headers)).json()["receipt"]
    assert receipt["registry"] == [] and receipt["services"] == {}
    assert receipt["complete"] is False
    assert [a["action"] for a in receipt["operator_actions"] if a["action"] != "budget"] == [NOTHING_TO_REACH]
    # Nothing was reached: every service still holds the bot's rows.
    assert await remaining_rows(settings.database_url, bot_id) == rows_per_service(ROWS)


async def test_nothing_to_reach_is_refused_while_a_service_is_registered(
    settings: Settings, worker: LifecycleWorkers, temporal_client: Client
) -> None:
    seeded = await seed(settings, bots=1, rows=ROWS)
    bot_id = seeded.bot_ids[0]
    handle = await bot_deletion_options(bot_id, seeded.account_id).start(
        temporal_client,
        BotDeletionInput(bot_id=bot_id, account_id=seeded.account_id, paused=True),
        task_queue=settings.task_queue,
        result_type=BotDeletionResult,
    )
    await eventually(lambda: _registry_reads(handle), "the registry read", until=lambda n: n >= 1)
    with pytest.raises(WorkflowUpdateFailedError) as refused:
        await handle.execute_update(NOTHING_TO_REACH, result_type=str)
    assert "not waiting for a deletion service" in str(refused.value.cause)
    await handle.signal("resume")
    result = await handle.result()
    assert result.status == DeletionState.COMPLETED
    assert {name: p.deleted for name, p in result.services.items()} == rows_per_service(ROWS)


def _same_time(a: str, b: str) -> bool:
    return datetime.fromisoformat(a) == datetime.fromisoformat(b)


async def test_an_account_deletion_waits_once_for_all_its_bots_and_nothing_to_reach_ends_it_incomplete(
    api: httpx.AsyncClient,
    conn: asyncpg.Connection,
    settings: Settings,
    worker: LifecycleWorkers,
    temporal_client: Client,
    empty_registry: EmptiedRegistry,
) -> None:
    seeded = await seed(settings, bots=2, rows=ROWS)
    headers = {"Authorization": f"Bearer {seeded.api_key}"}
    url = f"/accounts/{seeded.account_id}/deletion"

    async def status() -> dict[str, Any]:
        answer = await api.get(url, headers=ADMIN_HEADERS)
        assert answer.status_code == 200, answer.text
        body: dict[str, Any] = answer.json()
        assert body["status"] != DeletionState.COMPLETED, body
        return body

    assert (await api.delete("/account", headers=headers)).status_code == 202
    waiting = await _waiting(status)
    assert waiting["reason"] == NO_SERVICE_REGISTERED
    workflow_id = waiting["workflow_id"]
    await eventually(lambda: _alerts(conn, workflow_id), "the account deletion alerts")
    # The account waits before any bot: no bot deletion started, so none alerts on its own.
    bot_runs = [bot_deletion_id(bot_id) for bot_id in seeded.bot_ids]
    assert await conn.fetchval("SELECT count(*) FROM alerts WHERE workflow_id = ANY($1)", bot_runs) == 0

    await temporal_client.get_workflow_handle(workflow_id).execute_update(NOTHING_TO_REACH, result_type=str)
    await eventually(status, "the account deletion ends", until=lambda body: body["status"] == "incomplete")
    receipt = (await api.get(f"{url}/receipt", headers=ADMIN_HEADERS)).json()["receipt"]
    assert receipt["registry"] == [] and receipt["complete"] is False and receipt["erased"] is False
    assert NOTHING_TO_REACH in {action["action"] for action in receipt["operator_actions"] if "bot" not in action}
    # Its bot deletions took the operator's decision: each receipt says so, and none is complete.
    for bot_id in seeded.bot_ids:
        # Read from the database: the bots' receipts are the account's key's, and that key went with the account.
        canonical = await conn.fetchval(
            "SELECT canonical FROM deletion_receipts WHERE subject_kind = 'bot' AND subject_id = $1", bot_id
        )
        bot = json.loads(canonical)
        assert bot["complete"] is False and bot["registry"] == []
        assert NOTHING_TO_REACH in {action["action"] for action in bot["operator_actions"]}
        assert await remaining_rows(settings.database_url, bot_id) == rows_per_service(ROWS)
    assert len(await _alerts(conn, workflow_id)) == 1
