"""GET /bots/{id}/deletion/events and the admin account stream; pruning of the events table."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import timedelta

import httpx
from sqlalchemy import func, insert, select
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from devstack.seed import rows_per_service, seed
from lifecycle.db.events import DELETION, LifecycleEvent, prune_events
from lifecycle.settings import Settings
from tests.conftest import ADMIN_HEADERS, ContractServices
from tests.eventually import eventually
from tests.sse.conftest import ServedApi, serve
from tests.sse.test_site_events import _collect
from tests.workers import own_worker


async def test_a_bot_deletion_streams_its_progress_and_ends_at_completed(
    served: ServedApi, http: httpx.AsyncClient, temporal_client: Client, contract_services: ContractServices
) -> None:
    seeded = await seed(served.settings, bots=1, rows=60)
    headers = {"Authorization": f"Bearer {seeded.api_key}"}
    bot_id = seeded.bot_ids[0]
    assert (await http.delete(f"/bots/{bot_id}", headers=headers)).status_code == 202
    path = f"/bots/{bot_id}/deletion/events"

    connected = asyncio.Event()
    stream = asyncio.create_task(_collect(http, path, headers, connected))
    await asyncio.wait_for(connected.wait(), 30)
    async with own_worker(served.settings, temporal_client):
        events = await asyncio.wait_for(stream, 60)

    bodies = [json.loads(event.data) for event in events]
    ids = [int(event.id) for event in events]
    assert ids == sorted(set(ids)), ids
    assert bodies[0]["status"] == "accepted"  # recorded; no worker has begun its run yet
    assert [body["status"] for body in bodies].count("completed") == 1
    assert bodies[-1]["status"] == "completed"
    assert bodies[-1] == (await http.get(f"/bots/{bot_id}/deletion", headers=headers)).json()
    # The stream carries the pace as the status does (tests/deletion/test_deletion_budget.py shows its values).
    assert all({"rows_per_second", "estimated_completion", "throttled"} <= body.keys() for body in bodies)
    deleted = [sum(count["deleted"] for count in body["progress"].values()) for body in bodies]
    assert deleted == sorted(deleted) and deleted[-1] == sum(rows_per_service(60).values())

    # A resume from an earlier event gets the final state under its own id; from the final event, the final
    # state once more (the client reconnected, so it may have missed it), then the end.
    resumed = await _collect(http, path, {**headers, "Last-Event-ID": events[0].id})
    assert [(e.id, e.data) for e in resumed] == [(events[-1].id, events[-1].data)]
    resumed = await _collect(http, path, {**headers, "Last-Event-ID": events[-1].id})
    assert [(e.id, e.data) for e in resumed] == [(events[-1].id, events[-1].data)]

    # Another account cannot follow it.
    stranger = await http.post("/accounts", json={"name": "S", "email": "s@example.com"}, headers=ADMIN_HEADERS)
    other = {"Authorization": f"Bearer {stranger.json()['api_key']}"}
    response = await http.get(path, headers=other)
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/problem+json"


async def test_the_account_stream_is_admin_only(http: httpx.AsyncClient) -> None:
    created = await http.post("/accounts", json={"name": "A", "email": "a@example.com"}, headers=ADMIN_HEADERS)
    account = {"Authorization": f"Bearer {created.json()['api_key']}"}
    path = f"/accounts/{created.json()['id']}/deletion/events"
    assert (await http.get(path, headers=account)).status_code == 403
    response = await http.get(path, headers=ADMIN_HEADERS)
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/problem+json"


async def test_pruning_deletes_events_past_retention_only(served: ServedApi) -> None:
    engine = served.app.state.engine
    subject = f"prune-{uuid.uuid4().hex[:8]}"
    # A retention shorter than the hubs' own (a day), with both events inside a day: the hub of any API started
    # meanwhile prunes on its first round, and would otherwise delete the old event before this call does.
    retention = timedelta(hours=2)
    async with engine.begin() as connection:
        for age in (timedelta(hours=3), timedelta(hours=1)):
            await connection.execute(
                insert(LifecycleEvent).values(subject_kind=DELETION, subject_id=subject, created_at=func.now() - age)
            )
    assert await prune_events(engine, retention) >= 1
    async with engine.connect() as connection:
        left = await connection.execute(select(func.count()).where(LifecycleEvent.subject_id == subject))
        assert left.scalar_one() == 1


async def test_the_account_stream_ends_when_the_account_is_restored_in_its_grace_period(
    settings: Settings, temporal_client: Client
) -> None:
    seeded = await seed(settings, bots=1, rows=20)
    path = f"/accounts/{seeded.account_id}/deletion/events"
    async with (
        serve(settings, temporal_client, account_deletion_grace=timedelta(hours=1)) as graced,
        graced.client() as http,
        own_worker(graced.settings, temporal_client),
    ):
        deleting = await http.delete("/account", headers={"Authorization": f"Bearer {seeded.api_key}"})
        assert deleting.status_code == 202 and deleting.json()["status"] == "scheduled", deleting.text
        connected = asyncio.Event()
        stream = asyncio.create_task(_collect(http, path, ADMIN_HEADERS, connected))
        await asyncio.wait_for(connected.wait(), 30)
        run = temporal_client.get_workflow_handle(deleting.json()["workflow_id"])

        async def waiting_out_its_grace() -> bool:
            events = [event.event_type async for event in run.fetch_history_events()]
            return EventType.EVENT_TYPE_TIMER_STARTED in events

        await eventually(waiting_out_its_grace, "the grace period's timer started")
        restored = await http.post(f"/accounts/{seeded.account_id}/restore", headers=ADMIN_HEADERS)
        assert restored.status_code == 200, restored.text
        # `restored` is terminal: the stream ends after it, as after any other deletion's end.
        events = await asyncio.wait_for(stream, 30)
    statuses = [json.loads(event.data)["status"] for event in events]
    assert statuses[0] == "scheduled" and statuses[-1] == "restored", statuses
