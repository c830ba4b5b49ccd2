"""A service's answer lost on the way (its work committed, the answer never reached the workflow) neither counts a
row twice nor loses one: through a real bot deletion, with the chat service's code over a database of its own,
whose every first answer of a slice the fault-injection interceptor drops after the slice ran (`lose:1`). The
workflow calls again from the same cursor, and the service answers from its ledger."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import pytest_asyncio
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.worker import Worker

from activities.fault_injection import FaultInjectionInterceptor
from devstack.postgres import PostgresServer
from devstack.seed import seed
from lifecycle.deletion.budget import DEFAULT_ROWS_PER_SECOND
from lifecycle.deletion.workflow_types import bot_deletion_id
from lifecycle.settings import Settings
from services.chat import CHAT
from services.runtime.seeding import seed_rows
from services.runtime.worker import CONTRACT, opened
from tests.conftest import ADMIN_HEADERS
from tests.eventually import eventually
from worker import LifecycleWorkers

pytestmark = pytest.mark.usefixtures("registry_left_as_found")

# Rows for two slices or more at the service's own rate, each slice and its retry lasting up to DELETER_SLICE (5 s).
MESSAGES = 30_000
CONVERSATIONS = 1_000
RATE = 2_500


@pytest_asyncio.fixture
async def lossy_chat(
    api: httpx.AsyncClient, settings: Settings, temporal_client: Client, postgres_server: PostgresServer
) -> AsyncIterator[tuple[str, str, str]]:
    """(name, task queue, database URL) of a chat service that loses the first answer of every slice."""
    suffix = uuid.uuid4().hex[:8]
    name, queue, url = f"lossy-chat-{suffix}", f"lossy-chat-{suffix}", postgres_server.url(f"lossy_chat_{suffix}")
    async with (
        opened(CHAT, settings, url) as (service, _),
        Worker(
            temporal_client,
            task_queue=queue,
            activities=service.activities,
            interceptors=[FaultInjectionInterceptor.from_spec("DeleteSubjectData=lose:1")],
        ),
    ):
        answer = await api.put(
            f"/deletion-services/{name}", json={"task_queue": queue, "contract": CONTRACT}, headers=ADMIN_HEADERS
        )
        assert answer.status_code == 201, answer.text
        yield name, queue, url


@pytest.mark.long
async def test_lost_answers_neither_double_count_nor_lose_rows(
    api: httpx.AsyncClient,
    settings: Settings,
    worker: LifecycleWorkers,
    temporal_client: Client,
    lossy_chat: tuple[str, str, str],
) -> None:
    name, queue, url = lossy_chat
    seeded = await seed(settings, bots=1, rows=100)
    bot_id = seeded.bot_ids[0]
    await seed_rows(CHAT, url, [bot_id], {"conversations": CONVERSATIONS, "messages": MESSAGES})
    headers = {"Authorization": f"Bearer {seeded.api_key}"}

    async def completed() -> dict[str, Any] | None:
        status = (await api.get(f"/bots/{bot_id}/deletion", headers=headers)).json()
        return status if status["status"] == "completed" else None

    # A rate of the service's own: each slice takes up to 5 s, so the deletion takes two slices or more.
    own_rate = {"rows_per_second": DEFAULT_ROWS_PER_SECOND, "services": {name: RATE}}
    assert (await api.put("/deletion-budget", json=own_rate, headers=ADMIN_HEADERS)).status_code == 200
    assert (await api.delete(f"/bots/{bot_id}", headers=headers)).status_code == 202
    status = await eventually(completed, "the deletion completes")

    held = CONVERSATIONS + MESSAGES
    assert status["progress"][name] == {"deleted": held, "total": held}
    receipt = (await api.get(f"/bots/{bot_id}/deletion/receipt", headers=headers)).json()["receipt"]
    assert receipt["services"][name] == {"rows_deleted": held, "files_deleted": 0, "remaining": 0}
    assert receipt["complete"] is True
    # Every slice's answer was lost once: each call completed on its second attempt.
    history = await temporal_client.get_workflow_handle(bot_deletion_id(bot_id)).fetch_history()
    scheduled = {
        event.event_id
        for event in history.events
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and event.activity_task_scheduled_event_attributes.task_queue.name == queue
        and event.activity_task_scheduled_event_attributes.activity_type.name == "DeleteSubjectData"
    }
    attempts = [
        event.activity_task_started_event_attributes.attempt
        for event in history.events
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
        and event.activity_task_started_event_attributes.scheduled_event_id in scheduled
    ]
    assert attempts and set(attempts) == {2}, attempts
