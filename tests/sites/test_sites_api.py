"""The sites API end to end: real dev server, real worker, real PostgreSQL and filesystem."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
import pytest

from lifecycle.settings import Settings
from tests.conftest import ADMIN_HEADERS, ApiAccount
from tests.eventually import eventually
from tests.sites.helpers import site_state
from worker import LifecycleWorkers


def _domain() -> str:
    return f"site-{uuid.uuid4().hex[:10]}.example.com"


async def _wait_for(api: httpx.AsyncClient, account: ApiAccount, site_id: str, status: str) -> dict[str, Any]:
    async def site() -> dict[str, Any]:
        body: dict[str, Any] = (await api.get(f"/sites/{site_id}", headers=account.headers)).json()
        return body

    return await eventually(site, f"site {site_id} becomes {status}", until=lambda body: body["status"] == status)


async def test_create_then_delete_leaves_nothing(
    api: httpx.AsyncClient, account: ApiAccount, worker: LifecycleWorkers, settings: Settings
) -> None:
    domain = _domain()
    created = await api.post(
        "/sites",
        json={"name": "My blog", "tagline": "Thoughts", "domain": domain.upper()},
        headers=account.headers,
    )
    assert created.status_code == 202, created.text
    body = created.json()
    assert body["status"] == "provisioning"
    assert created.headers["Location"] == body["status_url"] == f"/sites/{body['id']}"

    site = await _wait_for(api, account, body["id"], "active")
    assert site["domain"] == domain
    assert site["steps"] == dict.fromkeys(["metadata", "filesystem", "database", "bootstrap"], "done")
    state = await site_state(settings, body["id"])
    assert state.database and state.role and state.directory
    assert (state.options["blogname"], state.options["blogdescription"]) == ("My blog", "Thoughts")
    assert state.options["siteurl"] == f"https://{domain}"

    deleted = await api.delete(f"/sites/{body['id']}", headers=account.headers)
    assert deleted.status_code == 202
    await _wait_for(api, account, body["id"], "deleted")
    state = await site_state(settings, body["id"])
    assert not (state.database or state.role or state.directory)

    # The domain is free again.
    again = await api.post("/sites", json={"name": "Reborn", "domain": domain}, headers=account.headers)
    assert again.status_code == 202
    await _wait_for(api, account, again.json()["id"], "active")


@pytest.mark.parametrize(
    "domain",
    [
        "'; DROP TABLE sites; --",
        "../../etc/passwd",
        "ex\u0430mple.com",  # a Cyrillic a: a confusable look-alike
        "localhost",
        "-bad.example.com",
        "a" * 64 + ".example.com",
        "x" * 10_000,
        "example.123",
        "",
    ],
)
async def test_invalid_domains_are_422(api: httpx.AsyncClient, account: ApiAccount, domain: str) -> None:
    response = await api.post("/sites", json={"name": "n", "domain": domain}, headers=account.headers)
    assert response.status_code == 422
    assert response.headers["content-type"].startswith("application/problem+json")


@pytest.mark.parametrize(
    "body",
    [{"name": "x" * 10_000}, {"name": ""}, {"tagline": "t" * 201}, {"name": "bad\x00name"}, {"extra": 1}],
)
async def test_invalid_fields_are_422(api: httpx.AsyncClient, account: ApiAccount, body: dict[str, Any]) -> None:
    response = await api.post("/sites", json={"name": "ok", "domain": _domain(), **body}, headers=account.headers)
    assert response.status_code == 422


async def test_concurrent_posts_for_one_domain_make_one_site(
    api: httpx.AsyncClient, app: Any, worker: LifecycleWorkers
) -> None:
    domain = _domain()
    accounts = []
    for index in range(8):
        created = await api.post(
            "/accounts",
            json={"name": f"Racer {index}", "email": f"racer-{index}-{uuid.uuid4().hex[:6]}@example.com"},
            headers=ADMIN_HEADERS,
        )
        accounts.append(created.json()["api_key"])
    responses = await asyncio.gather(
        *(
            api.post("/sites", json={"name": "Race", "domain": domain}, headers={"Authorization": f"Bearer {key}"})
            for key in accounts
        )
    )
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [202] + [409] * 7, [r.text for r in responses]


async def test_retries_return_the_same_site(
    api: httpx.AsyncClient, account: ApiAccount, worker: LifecycleWorkers
) -> None:
    body = {"name": "Once", "domain": _domain()}
    headers = {**account.headers, "Idempotency-Key": "create-once-1"}
    first, second = await asyncio.gather(
        api.post("/sites", json=body, headers=headers), api.post("/sites", json=body, headers=headers)
    )
    assert first.status_code == second.status_code == 202
    assert first.json()["id"] == second.json()["id"]
    # Without a key, an identical repeat while provisioning is the same site too (or a 409 once active).
    other = {"name": "Twin", "domain": _domain()}
    a = await api.post("/sites", json=other, headers=account.headers)
    b = await api.post("/sites", json=other, headers=account.headers)
    assert b.status_code in (202, 409)
    if b.status_code == 202:
        assert a.json()["id"] == b.json()["id"]
    # The same key with another body is refused.
    reused = await api.post("/sites", json={"name": "Else", "domain": _domain()}, headers=headers)
    assert reused.status_code == 409


async def test_other_accounts_site_is_404(
    api: httpx.AsyncClient, account: ApiAccount, worker: LifecycleWorkers
) -> None:
    created = await api.post("/sites", json={"name": "Mine", "domain": _domain()}, headers=account.headers)
    site_id = created.json()["id"]
    stranger = await api.post(
        "/accounts",
        json={"name": "Stranger", "email": f"stranger-{uuid.uuid4().hex[:6]}@example.com"},
        headers=ADMIN_HEADERS,
    )
    headers = {"Authorization": f"Bearer {stranger.json()['api_key']}"}
    assert (await api.get(f"/sites/{site_id}", headers=headers)).status_code == 404
    assert (await api.delete(f"/sites/{site_id}", headers=headers)).status_code == 404
    listed = await api.get("/sites", headers=account.headers)
    assert site_id in [site["id"] for site in listed.json()]


async def test_delete_right_after_create_ends_deleted(
    api: httpx.AsyncClient, account: ApiAccount, worker: LifecycleWorkers, settings: Settings
) -> None:
    """Whatever phase the creation is in when the DELETE arrives, the site ends deleted with nothing left."""
    created = await api.post("/sites", json={"name": "Brief", "domain": _domain()}, headers=account.headers)
    site_id = created.json()["id"]
    deleted = await api.delete(f"/sites/{site_id}", headers=account.headers)
    assert deleted.status_code == 202
    await _wait_for(api, account, site_id, "deleted")
    state = await site_state(settings, site_id)
    assert not (state.database or state.role or state.directory)
    # A repeat is answered from the tombstone.
    again = await api.delete(f"/sites/{site_id}", headers=account.headers)
    assert (again.status_code, again.json()["status"]) == (202, "deleted")
