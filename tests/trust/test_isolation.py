"""Another account's bot, site and deletion are 404 (never 403) and stay exactly as they were."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg
import httpx
import pytest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from devstack.seed import asyncpg_dsn
from lifecycle.deletion.workflow_types import bot_deletion_id
from lifecycle.settings import Settings
from lifecycle.sites.workflow_types import site_deletion_id
from tests.conftest import ADMIN_HEADERS, ApiAccount
from tests.eventually import eventually
from worker import LifecycleWorkers


async def _stranger(api: httpx.AsyncClient) -> dict[str, str]:
    created = await api.post(
        "/accounts",
        json={"name": "Stranger", "email": f"stranger-{uuid.uuid4().hex[:6]}@example.com"},
        headers=ADMIN_HEADERS,
    )
    return {"Authorization": f"Bearer {created.json()['api_key']}"}


async def _exists(client: Client, workflow_id: str) -> bool:
    try:
        await client.get_workflow_handle(workflow_id).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return False
        raise
    return True


def _assert_same_404(response: httpx.Response, missing: httpx.Response) -> None:
    """Answered exactly as for an id that never existed, so existence does not leak."""
    assert response.status_code == 404, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["detail"] == missing.json()["detail"]


async def _active_site(api: httpx.AsyncClient, account: ApiAccount) -> dict[str, Any]:
    domain = f"mine-{uuid.uuid4().hex[:10]}.example.com"
    created = await api.post("/sites", json={"name": "Mine", "domain": domain}, headers=account.headers)
    site_id = created.json()["id"]

    async def site() -> dict[str, Any]:
        body: dict[str, Any] = (await api.get(f"/sites/{site_id}", headers=account.headers)).json()
        return body

    return await eventually(site, f"site {site_id} becomes active", until=lambda body: body["status"] == "active")


async def test_other_accounts_bot_is_404_and_untouched(
    api: httpx.AsyncClient, account: ApiAccount, temporal_client: Client, settings: Settings
) -> None:
    bot = (await api.post("/bots", json={"name": "private"}, headers=account.headers)).json()
    stranger = await _stranger(api)
    missing = uuid.uuid4()

    _assert_same_404(
        await api.get(f"/bots/{bot['id']}", headers=stranger),
        await api.get(f"/bots/{missing}", headers=stranger),
    )
    _assert_same_404(
        await api.delete(f"/bots/{bot['id']}", headers=stranger),
        await api.delete(f"/bots/{missing}", headers=stranger),
    )

    assert (await api.get(f"/bots/{bot['id']}", headers=account.headers)).json() == bot
    conn = await asyncpg.connect(asyncpg_dsn(settings.database_url))
    try:
        marked = await conn.fetchval("SELECT deletion_requested_at FROM bots WHERE id = $1", uuid.UUID(bot["id"]))
        recorded = await conn.fetchval(
            "SELECT count(*) FROM deletion_requests WHERE workflow_id = $1", bot_deletion_id(bot["id"])
        )
    finally:
        await conn.close()
    assert marked is None and recorded == 0
    assert not await _exists(temporal_client, bot_deletion_id(bot["id"]))


async def test_other_accounts_deletion_is_404(
    api: httpx.AsyncClient, account: ApiAccount, worker: LifecycleWorkers
) -> None:
    bot = (await api.post("/bots", json={"name": "doomed"}, headers=account.headers)).json()
    assert (await api.delete(f"/bots/{bot['id']}", headers=account.headers)).status_code == 202
    stranger = await _stranger(api)
    _assert_same_404(
        await api.get(f"/bots/{bot['id']}/deletion", headers=stranger),
        await api.get(f"/bots/{uuid.uuid4()}/deletion", headers=stranger),
    )
    # Repeating someone else's finished or running deletion reveals nothing either.
    assert (await api.delete(f"/bots/{bot['id']}", headers=stranger)).status_code == 404
    assert (await api.get(f"/bots/{bot['id']}/deletion", headers=account.headers)).status_code == 200


async def test_other_accounts_site_is_404_and_untouched(
    api: httpx.AsyncClient, account: ApiAccount, worker: LifecycleWorkers, temporal_client: Client
) -> None:
    site = await _active_site(api, account)
    stranger = await _stranger(api)
    missing = uuid.uuid4()
    _assert_same_404(
        await api.get(f"/sites/{site['id']}", headers=stranger),
        await api.get(f"/sites/{missing}", headers=stranger),
    )
    _assert_same_404(
        await api.delete(f"/sites/{site['id']}", headers=stranger),
        await api.delete(f"/sites/{missing}", headers=stranger),
    )
    assert (await api.get(f"/sites/{site['id']}", headers=account.headers)).json() == site
    assert not await _exists(temporal_client, site_deletion_id(site["id"]))


@pytest.mark.parametrize("path", ["/account", "/bots", "/sites"])
async def test_account_deletion_signs_out_at_once(
    api: httpx.AsyncClient, account: ApiAccount, settings: Settings, path: str
) -> None:
    accepted = await api.delete("/account", headers=account.headers)
    assert accepted.status_code == 202, accepted.text
    # The keys were revoked in the same transaction that recorded the request, before the workflow start.
    conn = await asyncpg.connect(asyncpg_dsn(settings.database_url))
    try:
        live = await conn.fetchval(
            "SELECT count(*) FROM api_keys WHERE account_id = $1 AND revoked_at IS NULL",
            uuid.UUID(account.id),
        )
    finally:
        await conn.close()
    assert live == 0
    refused = await api.get(path, headers=account.headers)
    assert refused.status_code == 401
    assert refused.headers["content-type"] == "application/problem+json"
