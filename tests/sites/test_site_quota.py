"""MAX_SITES_PER_ACCOUNT: the site past the limit is refused with a problem, also when requests race for the last
places; sites that no longer hold anything (deleted, rolled back) leave their place free.

The API here starts creations on a task queue no worker polls: these tests are about the API's answer, so no
site is built. Rows stand in for sites made earlier, in statuses the site reconciler leaves alone.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import httpx
import pytest_asyncio
from sqlalchemy import text
from temporalio.client import Client

from api.app import create_app
from lifecycle.db.engine import make_engine
from lifecycle.settings import Settings
from lifecycle.sites.workflow_types import site_creation_id
from tests.conftest import ApiAccount
from tests.sites.helpers import record_sites

# What docs/api.md promises; the tests run with the default.
DEFAULT_QUOTA = 50


def _domain() -> str:
    return f"quota-{uuid.uuid4().hex[:10]}.example.com"


@pytest_asyncio.fixture
async def quota_api(settings: Settings, temporal_client: Client) -> AsyncIterator[httpx.AsyncClient]:
    own = settings.model_copy(update={"site_task_queue": f"quota-{uuid.uuid4().hex[:8]}"})
    app = create_app(own, temporal_client=temporal_client)
    accepted: set[str] = set()  # a repeated request answers with a site already in it

    async def remember(response: httpx.Response) -> None:
        if response.request.method == "POST" and response.status_code == 202:
            await response.aread()
            accepted.add(response.json()["id"])

    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://testserver", event_hooks={"response": [remember]}
        ) as client:
            yield client
    # Settled first, so no reconciler takes the terminated runs for ones to roll back.
    await _set_status(settings, sorted(accepted), "rolled_back")
    for site_id in accepted:
        await temporal_client.get_workflow_handle(site_creation_id(site_id)).terminate("quota test done")


async def _set_status(settings: Settings, site_ids: list[str], status: str) -> None:
    engine = make_engine(settings.database_url, pool_size=1)
    try:
        async with engine.begin() as connection:
            await connection.execute(
                text("UPDATE sites SET status = :status WHERE id = ANY(:ids)"),
                {"status": status, "ids": [uuid.UUID(site_id) for site_id in site_ids]},
            )
    finally:
        await engine.dispose()


async def _live_sites(settings: Settings, account_id: str) -> int:
    engine = make_engine(settings.database_url, pool_size=1)
    try:
        async with engine.connect() as connection:
            live: int = (
                await connection.execute(
                    text(
                        "SELECT count(*) FROM sites"
                        " WHERE account_id = :account AND status NOT IN ('deleted', 'rolled_back')"
                    ),
                    {"account": uuid.UUID(account_id)},
                )
            ).scalar_one()
    finally:
        await engine.dispose()
    return live


def _assert_quota_problem(response: httpx.Response) -> None:
    assert response.status_code == 409, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    problem = response.json()
    assert problem["title"] == "Site limit reached"
    assert problem["detail"] == (
        f"This account holds {DEFAULT_QUOTA} sites, the most it may have. Delete one to create another."
    )


async def test_the_site_past_the_limit_is_refused(
    quota_api: httpx.AsyncClient, account: ApiAccount, settings: Settings
) -> None:
    assert settings.max_sites_per_account == DEFAULT_QUOTA
    # 49 that count (one whose rollback failed still holds a database and files) and 7 that hold nothing.
    earlier = await record_sites(
        settings, account.id, {"active": DEFAULT_QUOTA - 2, "rollback_failed": 1, "deleted": 4, "rolled_back": 3}
    )
    fiftieth = {"name": "Fiftieth", "domain": _domain()}
    headers = {**account.headers, "Idempotency-Key": f"fiftieth-{uuid.uuid4().hex[:8]}"}
    created = await quota_api.post("/sites", json=fiftieth, headers=headers)
    assert created.status_code == 202, created.text

    refused = await quota_api.post(
        "/sites", json={"name": "One too many", "domain": _domain()}, headers=account.headers
    )
    _assert_quota_problem(refused)
    # A repeat of the request that took the last place is still that site, not a refusal.
    repeated = await quota_api.post("/sites", json=fiftieth, headers=headers)
    assert repeated.status_code == 202, repeated.text
    assert repeated.json()["id"] == created.json()["id"]

    # A site deleted (its teardown ended) frees its place.
    await _set_status(settings, earlier[:1], "deleted")
    again = await quota_api.post("/sites", json={"name": "In its place", "domain": _domain()}, headers=account.headers)
    assert again.status_code == 202, again.text
    _assert_quota_problem(
        await quota_api.post("/sites", json={"name": "No", "domain": _domain()}, headers=account.headers)
    )
    assert await _live_sites(settings, account.id) == DEFAULT_QUOTA


async def test_concurrent_requests_never_pass_the_limit(
    quota_api: httpx.AsyncClient, account: ApiAccount, settings: Settings
) -> None:
    free = 5
    await record_sites(settings, account.id, {"active": DEFAULT_QUOTA - free})
    responses = await asyncio.gather(
        *(
            quota_api.post("/sites", json={"name": f"Racer {index}", "domain": _domain()}, headers=account.headers)
            for index in range(2 * free)
        )
    )
    accepted = [response for response in responses if response.status_code == 202]
    assert len(accepted) == free, [response.text for response in responses]
    for response in responses:
        if response.status_code != 202:
            _assert_quota_problem(response)
    assert await _live_sites(settings, account.id) == DEFAULT_QUOTA
