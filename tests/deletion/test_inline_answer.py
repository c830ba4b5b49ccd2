"""Small deletions answer at once, so a client need not follow one that is over in a moment: 200 with the
finished deletion if it ends within DELETION_INLINE_WAIT or `Prefer: wait=N`, 202 otherwise; against real
PostgreSQL, a real Temporal dev server, real workers and the services' own worker processes."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from email import message_from_bytes
from typing import Any

import asyncpg
import httpx
import pytest
from fastapi import FastAPI
from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError

from api.app import create_app
from devstack.seed import asyncpg_dsn, rows_per_service, seed
from devstack.smtp_sink import SmtpSink
from lifecycle.deletion.workflow_types import account_deletion_id, bot_deletion_id
from lifecycle.settings import Settings
from tests.deletion.broken_service import broken_service
from tests.deletion.helpers import remaining_objects, remaining_rows
from tests.eventually import eventually
from tests.workers import own_queue, own_worker
from worker import LifecycleWorkers

# Small enough to finish well within the inline wait: about 100 rows.
SMALL = 100
# Waits that a healthy run never reaches: the tests assert answers, never durations.
GENEROUS_WAIT = 60.0


@contextlib.asynccontextmanager
async def inline_app(settings: Settings, client: Client, **overrides: Any) -> AsyncIterator[FastAPI]:
    """The API with the inline answer on (the suite's shared settings turn it off), plus `overrides`."""
    own = settings.model_copy(update={"deletion_inline_wait": GENEROUS_WAIT, **overrides})
    app = create_app(own, temporal_client=client)
    async with app.router.lifespan_context(app):
        yield app


@contextlib.asynccontextmanager
async def http_to(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://testserver") as api:
        yield api


@contextlib.asynccontextmanager
async def inline_api(settings: Settings, client: Client, **overrides: Any) -> AsyncIterator[httpx.AsyncClient]:
    async with inline_app(settings, client, **overrides) as app, http_to(app) as api:
        yield api


async def _bot_row_exists(settings: Settings, bot_id: str) -> bool:
    conn = await asyncpg.connect(asyncpg_dsn(settings.database_url))
    try:
        return bool(await conn.fetchval("SELECT EXISTS (SELECT FROM bots WHERE id = $1::uuid)", bot_id))
    finally:
        await conn.close()


async def test_a_small_bot_answers_200_once_everything_is_gone(
    settings: Settings, worker: LifecycleWorkers, temporal_client: Client
) -> None:
    seeded = await seed(settings, bots=1, rows=SMALL)
    bot_id = seeded.bot_ids[0]
    async with inline_api(settings, temporal_client) as api:
        answer = await api.delete(f"/bots/{bot_id}", headers={"Authorization": f"Bearer {seeded.api_key}"})

    assert answer.status_code == 200, answer.text
    assert answer.json() == {
        "workflow_id": bot_deletion_id(bot_id),
        "status": "completed",
        "deleted": rows_per_service(SMALL),
        "status_url": f"/bots/{bot_id}/deletion",
    }
    assert answer.headers["vary"] == "Prefer"
    assert "preference-applied" not in answer.headers
    # Gone by the time the answer came, not eventually.
    assert set((await remaining_rows(settings.database_url, bot_id)).values()) == {0}
    assert await remaining_objects(settings, bot_id) == 0
    assert not await _bot_row_exists(settings, bot_id)


async def test_with_the_inline_wait_off_a_bot_answers_202_at_once(
    settings: Settings, worker: LifecycleWorkers, temporal_client: Client
) -> None:
    seeded = await seed(settings, bots=1, rows=SMALL)
    bot_id = seeded.bot_ids[0]
    async with inline_api(settings, temporal_client, deletion_inline_wait=0) as api:
        answer = await api.delete(f"/bots/{bot_id}", headers={"Authorization": f"Bearer {seeded.api_key}"})
    assert answer.status_code == 202, answer.text
    assert answer.json() == {
        "workflow_id": bot_deletion_id(bot_id),
        "status": "accepted",
        "status_url": f"/bots/{bot_id}/deletion",
    }
    assert answer.headers["location"] == f"/bots/{bot_id}/deletion"
    assert answer.headers["vary"] == "Prefer"


async def test_respond_async_answers_202_for_a_small_bot(
    settings: Settings, worker: LifecycleWorkers, temporal_client: Client
) -> None:
    seeded = await seed(settings, bots=1, rows=SMALL)
    headers = {"Authorization": f"Bearer {seeded.api_key}", "Prefer": "respond-async"}
    async with inline_api(settings, temporal_client) as api:
        answer = await api.delete(f"/bots/{seeded.bot_ids[0]}", headers=headers)
    assert answer.status_code == 202, answer.text
    assert answer.json()["status"] == "accepted"
    assert answer.headers["preference-applied"] == "respond-async"
    assert answer.headers["vary"] == "Prefer"


async def test_prefer_wait_waits_even_with_the_inline_wait_off_capped_at_the_maximum(
    settings: Settings, worker: LifecycleWorkers, temporal_client: Client
) -> None:
    seeded = await seed(settings, bots=1, rows=SMALL)
    bot_id = seeded.bot_ids[0]
    headers = {"Authorization": f"Bearer {seeded.api_key}", "Prefer": "respond-async, wait=3600"}
    overrides = {"deletion_inline_wait": 0, "deletion_prefer_wait_max": GENEROUS_WAIT}
    async with inline_api(settings, temporal_client, **overrides) as api:
        answer = await api.delete(f"/bots/{bot_id}", headers=headers)
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "completed"
    assert answer.json()["deleted"] == rows_per_service(SMALL)
    # Honoured up to the cap; `respond-async` was not needed, the answer came in time.
    assert answer.headers["preference-applied"] == f"wait={int(GENEROUS_WAIT)}"
    assert set((await remaining_rows(settings.database_url, bot_id)).values()) == {0}


async def test_a_prefer_header_it_cannot_use_is_ignored(
    settings: Settings, worker: LifecycleWorkers, temporal_client: Client
) -> None:
    seeded = await seed(settings, bots=1, rows=SMALL)
    headers = {"Authorization": f"Bearer {seeded.api_key}", "Prefer": 'wait=soon, respond-async=please, x="open'}
    async with inline_api(settings, temporal_client) as api:
        answer = await api.delete(f"/bots/{seeded.bot_ids[0]}", headers=headers)
    # Neither an error nor a preference: the inline wait applies, and this bot is small.
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "completed"
    assert "preference-applied" not in answer.headers


async def test_a_small_account_answers_200_once_it_is_gone_and_told(
    settings: Settings, worker: LifecycleWorkers, temporal_client: Client, smtp_sink: SmtpSink
) -> None:
    seeded = await seed(settings, bots=2, rows=SMALL // 2)
    headers = {"Authorization": f"Bearer {seeded.api_key}"}
    conn = await asyncpg.connect(asyncpg_dsn(settings.database_url))
    try:
        email = await conn.fetchval("SELECT email FROM accounts WHERE id = $1::uuid", seeded.account_id)
        async with inline_api(settings, temporal_client) as api:
            answer = await api.delete("/account", headers=headers)
            assert answer.status_code == 200, answer.text
            assert answer.json() == {
                "workflow_id": account_deletion_id(seeded.account_id),
                "status": "completed",
                # The account's workflow also counts the sites it tore down: none here.
                "deleted": {service: 2 * n for service, n in rows_per_service(SMALL // 2).items()} | {"sites": 0},
                "bots_deleted": 2,
                "status_url": None,
            }
            assert answer.headers["vary"] == "Prefer"
            assert (await api.get("/account", headers=headers)).status_code == 401
        assert not await conn.fetchval("SELECT EXISTS (SELECT FROM accounts WHERE id = $1::uuid)", seeded.account_id)
    finally:
        await conn.close()
    for bot_id in seeded.bot_ids:
        assert set((await remaining_rows(settings.database_url, bot_id)).values()) == {0}
    # The confirmation went out before the answer did.
    recipients = [message_from_bytes(path.read_bytes())["To"] for path in smtp_sink.messages()]
    assert recipients.count(email) == 1


async def test_a_wait_that_runs_out_answers_202_and_the_deletion_still_finishes(
    settings: Settings, temporal_client: Client
) -> None:
    queue = own_queue(settings)
    seeded = await seed(settings, bots=1, rows=SMALL)
    bot_id = seeded.bot_ids[0]
    headers = {"Authorization": f"Bearer {seeded.api_key}"}
    # The run's first step (is a legal hold in force?) takes a second longer than the request is allowed to wait.
    async with (
        own_worker(queue, temporal_client, faults="legal_hold_in_force=delay:1"),
        inline_api(queue, temporal_client, deletion_inline_wait=0.2) as api,
    ):
        answer = await api.delete(f"/bots/{bot_id}", headers=headers)
        assert answer.status_code == 202, answer.text
        # The run has not begun: its first step is still under way.
        assert answer.json()["status"] == "accepted"
        assert answer.headers["location"] == f"/bots/{bot_id}/deletion"

        async def completed() -> bool:
            status = (await api.get(f"/bots/{bot_id}/deletion", headers=headers)).json()
            return bool(status["status"] == "completed")

        await eventually(completed, "the deletion finishes after its 202")


@pytest.mark.usefixtures("registry_left_as_found")
async def test_a_run_that_stops_for_an_operator_answers_202_with_that_status(
    settings: Settings, worker: LifecycleWorkers, temporal_client: Client
) -> None:
    seeded = await seed(settings, bots=1, rows=SMALL)
    bot_id = seeded.bot_ids[0]
    headers = {"Authorization": f"Bearer {seeded.api_key}"}
    async with inline_api(settings, temporal_client) as api, broken_service(api, temporal_client):
        started = await api.delete(f"/bots/{bot_id}", headers=headers | {"Prefer": "respond-async"})
        assert started.status_code == 202, started.text

        async def waiting() -> bool:
            status = (await api.get(f"/bots/{bot_id}/deletion", headers=headers)).json()
            return bool(status["status"] == "waiting_for_operator")

        await eventually(waiting, "the poisoned deletion asks an operator")
        try:
            # The repeat joins the open run, which will not end by itself: the wait runs out, and the answer
            # says what the run waits for instead of `running` or a claim of completion.
            again = await api.delete(f"/bots/{bot_id}", headers=headers | {"Prefer": "wait=1"})
            assert again.status_code == 202, again.text
            assert again.json()["status"] == "waiting_for_operator"
            assert again.headers["preference-applied"] == "wait=1"
        finally:
            await temporal_client.get_workflow_handle(bot_deletion_id(bot_id)).terminate("test over")


async def _terminated_while_waiting(
    app: FastAPI, handle: WorkflowHandle[Any, Any], request: asyncio.Task[httpx.Response]
) -> httpx.Response:
    """Once the request waits on the run, check it holds no database connection, then terminate the run."""

    async def started() -> bool:
        try:
            await handle.describe()
        except RPCError:
            return False
        return True

    await eventually(started, "the request started the run")
    pool = app.state.engine.pool

    async def waiting_without_a_connection() -> bool:
        # Twice, a moment apart: not the instant between the start and the wait.
        if pool.checkedout() != 0:
            return False
        await asyncio.sleep(0.3)  # the moment apart that the two looks need (see above)
        return pool.checkedout() == 0

    await eventually(waiting_without_a_connection, "the waiting request holds no connection")
    assert not request.done()
    await handle.terminate("an operator stops it")
    return await request


async def test_a_bot_run_terminated_during_the_wait_answers_202_not_an_error(
    settings: Settings, temporal_client: Client
) -> None:
    # Nobody polls this queue: the run stays open until the operator terminates it.
    queue = own_queue(settings)
    seeded = await seed(settings, bots=1, rows=SMALL)
    bot_id = seeded.bot_ids[0]
    handle = temporal_client.get_workflow_handle(bot_deletion_id(bot_id))
    async with inline_app(queue, temporal_client) as app, http_to(app) as api:
        request = asyncio.create_task(
            api.delete(f"/bots/{bot_id}", headers={"Authorization": f"Bearer {seeded.api_key}"})
        )
        answer = await _terminated_while_waiting(app, handle, request)
    assert answer.status_code == 202, answer.text
    # What happened, not `running` and not a 500; the bot and its data stay until a repeat finishes them.
    assert answer.json()["status"] == "terminated"
    assert await _bot_row_exists(settings, bot_id)


async def test_an_account_run_terminated_during_the_wait_answers_202_not_an_error(
    settings: Settings, temporal_client: Client
) -> None:
    queue = own_queue(settings)
    seeded = await seed(settings, bots=1, rows=SMALL)
    handle = temporal_client.get_workflow_handle(account_deletion_id(seeded.account_id))
    async with inline_app(queue, temporal_client) as app, http_to(app) as api:
        request = asyncio.create_task(api.delete("/account", headers={"Authorization": f"Bearer {seeded.api_key}"}))
        answer = await _terminated_while_waiting(app, handle, request)
    assert answer.status_code == 202, answer.text
    assert answer.json() == {
        "workflow_id": account_deletion_id(seeded.account_id),
        "status": "terminated",
        "status_url": None,
    }


def test_both_answers_and_both_headers_are_in_the_openapi_schema(app: FastAPI) -> None:
    schema = app.openapi()
    for path, finished in (("/bots/{bot_id}", "DeletionFinished"), ("/account", "AccountDeletionFinished")):
        operation = schema["paths"][path]["delete"]
        assert "Prefer" in {p["name"] for p in operation["parameters"] if p["in"] == "header"}
        responses = operation["responses"]
        assert responses["200"]["content"]["application/json"]["schema"]["$ref"].endswith(f"/{finished}")
        assert responses["202"]["content"]["application/json"]["schema"]["$ref"].endswith("/DeletionAccepted")
        for status in ("200", "202"):
            assert {"Vary", "Preference-Applied"} <= set(responses[status]["headers"])
