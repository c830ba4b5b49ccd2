"""The deletion API against real PostgreSQL, a real Temporal dev server and a real worker."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from temporalio.client import Client

from devstack.seed import rows_per_service, seed
from lifecycle.settings import Settings
from tests.conftest import ADMIN_HEADERS, ApiAccount
from tests.deletion.helpers import remaining_objects, remaining_rows
from tests.eventually import eventually
from worker import LifecycleWorkers


async def test_bot_crud_and_isolation(api: httpx.AsyncClient, account: ApiAccount) -> None:
    created = await api.post("/bots", json={"name": "helper"}, headers=account.headers)
    assert created.status_code == 201, created.text
    bot = created.json()
    assert bot["name"] == "helper"
    listed = await api.get("/bots", headers=account.headers)
    assert [b["id"] for b in listed.json()] == [bot["id"]]
    assert (await api.get(f"/bots/{bot['id']}", headers=account.headers)).json() == bot

    other = await seed_account(api)
    response = await api.get(f"/bots/{bot['id']}", headers=other)
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/problem+json"
    assert (await api.delete(f"/bots/{bot['id']}", headers=other)).status_code == 404


async def seed_account(api: httpx.AsyncClient) -> dict[str, str]:
    created = await api.post(
        "/accounts",
        json={"name": "Other", "email": "other@example.com"},
        headers=ADMIN_HEADERS,
    )
    return {"Authorization": f"Bearer {created.json()['api_key']}"}


async def test_delete_bot_removes_everything_and_repeats_return_the_same_deletion(
    api: httpx.AsyncClient, settings: Settings, worker: LifecycleWorkers, temporal_client: Client
) -> None:
    seeded = await seed(settings, bots=1, rows=3_000)
    headers = {"Authorization": f"Bearer {seeded.api_key}"}
    bot_id = seeded.bot_ids[0]

    accepted = await api.delete(f"/bots/{bot_id}", headers=headers)
    assert accepted.status_code == 202, accepted.text
    body = accepted.json()
    assert body["workflow_id"] == f"bot-deletion-{bot_id}"
    assert accepted.headers["location"] == body["status_url"] == f"/bots/{bot_id}/deletion"
    # The bot leaves the API at once.
    assert (await api.get(f"/bots/{bot_id}", headers=headers)).status_code == 404
    assert (await api.get("/bots", headers=headers)).json() == []

    async def completed() -> dict[str, Any] | None:
        status = (await api.get(f"/bots/{bot_id}/deletion", headers=headers)).json()
        return status if status["status"] == "completed" else None

    status = await eventually(completed, "the bot deletion completes")
    expected = rows_per_service(3_000)
    assert status["progress"] == {name: {"deleted": n, "total": n} for name, n in expected.items()}
    assert status["completed_at"] is not None
    assert set((await remaining_rows(settings.database_url, bot_id)).values()) == {0}
    assert await remaining_objects(settings, bot_id) == 0

    again = await api.delete(f"/bots/{bot_id}", headers=headers)
    assert again.status_code == 202
    assert again.json()["workflow_id"] == body["workflow_id"]
    assert again.json()["status"] == "completed"
    runs = [run async for run in temporal_client.list_workflows(f'WorkflowId = "{body["workflow_id"]}"')]
    assert len(runs) == 1


async def test_concurrent_duplicate_deletes_start_one_execution(
    api: httpx.AsyncClient, settings: Settings, temporal_client: Client
) -> None:
    # No worker needed: only the start path is under test, and the run may stay queued.
    seeded = await seed(settings, bots=1, rows=10)
    headers = {"Authorization": f"Bearer {seeded.api_key}"}
    bot_id = seeded.bot_ids[0]

    responses = await asyncio.gather(*(api.delete(f"/bots/{bot_id}", headers=headers) for _ in range(100)))

    assert {r.status_code for r in responses} == {202}
    assert {r.json()["workflow_id"] for r in responses} == {f"bot-deletion-{bot_id}"}
    runs = [run async for run in temporal_client.list_workflows(f'WorkflowId = "bot-deletion-{bot_id}"')]
    assert len(runs) == 1
