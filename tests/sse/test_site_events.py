"""GET /sites/{id}/events against a real API under uvicorn, a real worker and the real triggers."""

from __future__ import annotations

import asyncio
import itertools
import json
import uuid
from typing import Any

import httpx
from httpx_sse import ServerSentEvent, aconnect_sse
from sqlalchemy import event, text
from temporalio.client import Client

from lifecycle.sites.contracts import SITE_STEPS
from tests.conftest import ADMIN_HEADERS
from tests.eventually import eventually
from tests.sse.conftest import ServedApi
from tests.workers import own_worker


async def _account(http: httpx.AsyncClient) -> dict[str, str]:
    created = await http.post("/accounts", json={"name": "Watcher", "email": "w@example.com"}, headers=ADMIN_HEADERS)
    assert created.status_code == 201, created.text
    return {"Authorization": f"Bearer {created.json()['api_key']}"}


async def _site(http: httpx.AsyncClient, headers: dict[str, str]) -> str:
    domain = f"sse-{uuid.uuid4().hex[:10]}.example.com"
    created = await http.post("/sites", json={"name": "Live", "tagline": "Watch", "domain": domain}, headers=headers)
    assert created.status_code == 202, created.text
    return str(created.json()["id"])


async def _collect(
    http: httpx.AsyncClient, path: str, headers: dict[str, str], connected: asyncio.Event | None = None
) -> list[ServerSentEvent]:
    """Every event of one stream, until the server ends it."""
    async with aconnect_sse(http, "GET", path, headers=headers) as source:
        assert source.response.status_code == 200, await source.response.aread()
        assert source.response.headers["content-type"].startswith("text/event-stream")
        if connected is not None:
            connected.set()
        # httpx-sse hands a keepalive comment over as an event without data once an id was seen; the
        # specification drops those, and so does this.
        return [event async for event in source.aiter_sse() if event.data]


async def _stream_of_a_creation(
    served: ServedApi, http: httpx.AsyncClient, temporal_client: Client, headers: dict[str, str], site_id: str
) -> list[ServerSentEvent]:
    """The site's stream, connected before any worker polls the queue, while a worker then builds it."""
    connected = asyncio.Event()
    stream = asyncio.create_task(_collect(http, f"/sites/{site_id}/events", headers, connected))
    await asyncio.wait_for(connected.wait(), 30)
    async with own_worker(served.settings, temporal_client):
        return await asyncio.wait_for(stream, 60)


FORWARD = ["pending", "running", "done"]


def _changes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    changed = [step for step in SITE_STEPS if before["steps"][step] != after["steps"][step]]
    return changed + [key for key in ("status", "error") if before[key] != after[key]]


def _done_order(bodies: list[dict[str, Any]]) -> list[str]:
    order: list[str] = []
    for body in bodies:
        for step in SITE_STEPS:
            if body["steps"][step] == "done" and step not in order:
                order.append(step)
    return order


async def test_a_creation_streams_every_step_in_order_then_resumes_after_any_event(
    served: ServedApi, http: httpx.AsyncClient, temporal_client: Client
) -> None:
    headers = await _account(http)
    site_id = await _site(http, headers)
    events = await _stream_of_a_creation(served, http, temporal_client, headers, site_id)

    bodies = [json.loads(event.data) for event in events]
    ids = [int(event.id) for event in events]
    assert ids == sorted(set(ids)), ids
    assert bodies[0]["status"] == "provisioning"
    assert set(bodies[0]["steps"].values()) == {"pending"}
    # One event per change: each differs from the one before in exactly one step or in the status, steps only
    # move forward, and they finish in their order.
    for before, after in itertools.pairwise(bodies):
        assert len(_changes(before, after)) == 1, (before, after)
    for step in SITE_STEPS:
        states = [FORWARD.index(body["steps"][step]) for body in bodies]
        assert states == sorted(states), (step, states)
    assert _done_order(bodies) == list(SITE_STEPS)
    # It ends at `active`, with exactly what GET /sites/{id} answers.
    assert bodies[-1]["status"] == "active"
    assert [body["status"] for body in bodies].count("active") == 1
    assert bodies[-1] == (await http.get(f"/sites/{site_id}", headers=headers)).json()

    # A reconnect with Last-Event-ID gets what followed that event: no repeats, nothing missed.
    for cut in (0, len(events) // 2, len(events) - 2):
        resumed = await _collect(http, f"/sites/{site_id}/events", {**headers, "Last-Event-ID": events[cut].id})
        assert [(e.id, e.data) for e in resumed] == [(e.id, e.data) for e in events[cut + 1 :]]
    # After the final event there is nothing to resume: the stream ends at once.
    assert await _collect(http, f"/sites/{site_id}/events", {**headers, "Last-Event-ID": events[-1].id}) == []
    # A fresh connection to a settled site gets its current state and ends.
    fresh = await _collect(http, f"/sites/{site_id}/events", headers)
    assert [(e.id, e.data) for e in fresh] == [(events[-1].id, events[-1].data)]


async def test_fifty_watchers_see_the_same_final_event_over_one_listen_connection(
    served: ServedApi, http: httpx.AsyncClient, temporal_client: Client
) -> None:
    headers = await _account(http)
    site_id = await _site(http, headers)
    watchers = 50
    before = served.hub.watch_count
    limits = httpx.Limits(max_connections=watchers + 5)
    async with httpx.AsyncClient(base_url=served.base_url, limits=limits, timeout=60) as many:
        streams = [asyncio.create_task(_collect(many, f"/sites/{site_id}/events", headers)) for _ in range(watchers)]
        await eventually(lambda: _true(served.hub.watch_count == before + watchers), "every stream is registered")
        assert await _listeners(served) == 1
        async with own_worker(served.settings, temporal_client):
            results = await asyncio.wait_for(asyncio.gather(*streams), 90)
    finals = {(events[-1].id, events[-1].data) for events in results}
    assert len(finals) == 1
    assert json.loads(finals.pop()[1])["status"] == "active"
    # Every watcher saw the same events, and the registrations went with the streams.
    assert len({tuple((e.id, e.data) for e in events) for events in results}) == 1
    assert served.hub.watch_count == before


async def _true(condition: bool) -> bool:
    return condition


async def _listeners(served: ServedApi) -> int:
    async with served.app.state.engine.connect() as connection:
        count = await connection.execute(
            text("SELECT count(*) FROM pg_stat_activity WHERE application_name = :name"),
            {"name": served.hub.application_name},
        )
        return int(count.scalar_one())


async def test_an_idle_stream_gets_keepalive_comments_and_a_disconnect_releases_it(
    served: ServedApi, http: httpx.AsyncClient
) -> None:
    headers = await _account(http)
    site_id = await _site(http, headers)
    before = served.hub.watch_count
    lines = []
    async with http.stream("GET", f"/sites/{site_id}/events", headers=headers) as response:
        assert response.status_code == 200
        async for line in response.aiter_lines():
            lines.append(line)
            if line.startswith(":"):
                break
        assert served.hub.watch_count == before + 1
    # No worker polls the queue: nothing changed, so the first event is the site as created, then a comment.
    assert lines[0].startswith("id: ")
    assert json.loads(lines[1].removeprefix("data: "))["status"] == "provisioning"
    assert ": keepalive" in lines
    await eventually(lambda: _true(served.hub.watch_count == before), "the disconnect releases the registration")


async def test_another_accounts_site_is_404_and_a_bad_last_event_id_is_422(
    http: httpx.AsyncClient,
) -> None:
    owner = await _account(http)
    site_id = await _site(http, owner)
    stranger = await _account(http)
    for path in (f"/sites/{site_id}/events", f"/sites/{uuid.uuid4()}/events"):
        response = await http.get(path, headers=stranger)
        assert response.status_code == 404
        assert response.headers["content-type"] == "application/problem+json"
    response = await http.get(f"/sites/{site_id}/events", headers={**owner, "Last-Event-ID": "yesterday"})
    assert response.status_code == 422
    assert response.headers["content-type"] == "application/problem+json"
    assert (await http.get(f"/sites/{site_id}/events")).status_code == 401


async def test_an_unwatched_hub_reads_nothing_and_its_first_watcher_is_woken_by_the_next_change(
    served: ServedApi,
) -> None:
    """A change no stream watches costs the API process no query; the first watcher still misses nothing."""
    engine = served.app.state.engine
    reads: list[str] = []

    def count_event_reads(_conn: object, _cursor: object, statement: str, *_: object) -> None:
        # Reads only: the hub's prune of old events (a DELETE every prune interval) may land in the window.
        if "FROM lifecycle_events" in statement and statement.lstrip().upper().startswith("SELECT"):
            reads.append(statement)

    async def change(subject: str) -> None:
        async with engine.begin() as connection:
            await connection.execute(
                text("INSERT INTO lifecycle_events (subject_kind, subject_id) VALUES ('deletion', :subject)"),
                {"subject": subject},
            )
            await connection.execute(text("SELECT pg_notify('lifecycle_events', '')"))

    assert served.hub.watch_count == 0
    event.listen(engine.sync_engine, "before_cursor_execute", count_event_reads)
    try:
        for n in range(20):
            await change(f"unwatched-{n}")
        # A negative check with nothing to observe (a notification ignored leaves no trace): the hub handles one
        # within milliseconds, and it has a second for these twenty.
        await asyncio.sleep(1.0)  # a negative check with nothing to observe: see above
        assert reads == []

        subject = f"watched-{uuid.uuid4().hex[:8]}"
        async with served.hub.watch(("deletion", subject)) as watch:
            await change(subject)
            # Woken by the notification, well before the hub's own poll (events_poll_interval, 5 s).
            await asyncio.wait_for(watch.changed.wait(), 2.0)
        # The control: with a watcher, the same kind of change was read.
        assert reads
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", count_event_reads)
