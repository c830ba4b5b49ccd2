"""Hostile values are 422 problems that name the field to fix, and touch nothing: no row, no workflow.

The site domain cases are in tests/sites/test_sites_api.py; this adds accounts, bots, path ids and bodies,
and checks for every hostile request that nothing was written or started.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import pytest
import pytest_asyncio
from temporalio.client import Client

from devstack.seed import asyncpg_dsn
from lifecycle.settings import Settings
from tests.conftest import ADMIN_HEADERS, ApiAccount

SQL = "'; DROP TABLE accounts; --"
PATH = "../../etc/passwd"
CONFUSABLE = "owner@ex\u0430mple.com"  # a Cyrillic a
LONG = "x" * 10_000
TABLES = ("accounts", "api_keys", "bots", "sites", "deletion_requests")


@pytest_asyncio.fixture
async def database(settings: Settings) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(asyncpg_dsn(settings.database_url))
    yield conn
    await conn.close()


async def _snapshot(database: asyncpg.Connection, client: Client, account_id: str) -> dict[str, Any]:
    rows = {table: await database.fetchval(f"SELECT count(*) FROM {table}") for table in TABLES}
    runs = [w.id async for w in client.list_workflows(f'AccountId="{account_id}"')]
    return {"rows": rows, "workflows": runs}


def _assert_explains(response: httpx.Response, location: str) -> None:
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert location in problem["detail"], problem
    assert any(error["location"] == location for error in problem["errors"]), problem


@pytest.mark.parametrize(
    ("body", "location"),
    [
        ({"name": "n", "email": SQL}, "body.email"),
        ({"name": "n", "email": f"{PATH}@example.com"}, "body.email"),
        ({"name": "n", "email": CONFUSABLE}, "body.email"),
        ({"name": "n", "email": f"{LONG}@example.com"}, "body.email"),
        ({"name": LONG, "email": "ok@example.com"}, "body.name"),
        ({"name": "bad\x00name", "email": "ok@example.com"}, "body.name"),
    ],
)
async def test_hostile_account_fields(
    api: httpx.AsyncClient,
    account: ApiAccount,
    database: asyncpg.Connection,
    temporal_client: Client,
    body: dict[str, str],
    location: str,
) -> None:
    before = await _snapshot(database, temporal_client, account.id)
    _assert_explains(await api.post("/accounts", json=body, headers=ADMIN_HEADERS), location)
    assert await _snapshot(database, temporal_client, account.id) == before


@pytest.mark.parametrize(
    ("method", "path", "body", "location"),
    [
        ("POST", "/bots", {"name": LONG}, "body.name"),
        ("POST", "/bots", {"name": "nul\x00"}, "body.name"),
        ("POST", "/bots", {"name": "ok", "account_id": str(uuid.uuid4())}, "body.account_id"),
        ("POST", "/sites", {"name": "n", "domain": SQL}, "body.domain"),
        ("POST", "/sites", {"name": "n", "domain": PATH}, "body.domain"),
        ("POST", "/sites", {"name": "n", "domain": "ex\u0430mple.com"}, "body.domain"),
        ("POST", "/sites", {"name": "n", "domain": LONG}, "body.domain"),
        ("DELETE", f"/bots/{SQL}", None, "path.bot_id"),
        ("GET", f"/sites/{LONG}", None, "path.site_id"),
    ],
)
async def test_hostile_values_touch_nothing(
    api: httpx.AsyncClient,
    account: ApiAccount,
    database: asyncpg.Connection,
    temporal_client: Client,
    method: str,
    path: str,
    body: dict[str, str] | None,
    location: str,
) -> None:
    before = await _snapshot(database, temporal_client, account.id)
    response = await api.request(method, path, json=body, headers=account.headers)
    _assert_explains(response, location)
    assert await _snapshot(database, temporal_client, account.id) == before


@pytest.mark.parametrize("path", ["/bots", "/sites"])
async def test_oversized_bodies_are_413(
    api: httpx.AsyncClient, account: ApiAccount, settings: Settings, path: str
) -> None:
    padding = "x" * (settings.max_request_body_bytes + 1)
    response = await api.post(path, json={"name": padding, "domain": "a.example.com"}, headers=account.headers)
    assert response.status_code == 413
    assert response.headers["content-type"] == "application/problem+json"
    assert str(settings.max_request_body_bytes) in response.json()["detail"]
    assert response.json()["instance"] == path


async def test_an_oversized_chunked_body_without_a_length_is_413(
    api: httpx.AsyncClient, account: ApiAccount, settings: Settings
) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"name": "'
        yield b"x" * settings.max_request_body_bytes
        yield b'"}'

    headers = account.headers | {"Content-Type": "application/json"}
    response = await api.post("/bots", content=chunks(), headers=headers)
    assert response.request.headers["transfer-encoding"] == "chunked"
    assert "content-length" not in response.request.headers
    assert response.status_code == 413
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["instance"] == "/bots"


async def test_path_outside_the_api_is_a_404_that_says_where_to_look(api: httpx.AsyncClient) -> None:
    response = await api.delete("/sites/..%2F..%2Fetc%2Fpasswd")
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/problem+json"
    assert "/docs" in response.json()["detail"]


async def test_malformed_json_is_a_422_problem(api: httpx.AsyncClient, account: ApiAccount) -> None:
    response = await api.post(
        "/bots", content=b'{"name": ', headers={**account.headers, "content-type": "application/json"}
    )
    assert response.status_code == 422
    assert response.headers["content-type"] == "application/problem+json"
    assert "JSON" in response.json()["detail"]


async def test_a_body_that_is_not_utf8_is_a_400_problem(api: httpx.AsyncClient, account: ApiAccount) -> None:
    response = await api.post(
        "/bots", content=b"\xff\xfe\xfa", headers={**account.headers, "content-type": "application/json"}
    )
    assert response.status_code == 400
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["instance"] == "/bots"
