"""Accounts and authentication through the real app, on a real PostgreSQL."""

from __future__ import annotations

import re

import httpx
from fastapi import FastAPI
from sqlalchemy import select

from lifecycle.db.models import ApiKey
from tests.conftest import ADMIN_HEADERS, ApiAccount

PROBLEM = "application/problem+json"


async def test_admin_creates_account_and_key_reads_it(api: httpx.AsyncClient, account: ApiAccount) -> None:
    response = await api.get("/account", headers=account.headers)
    assert response.status_code == 200
    assert response.json() == {"id": account.id, "name": account.name, "email": account.email}


async def test_missing_and_wrong_keys_are_401_problems(api: httpx.AsyncClient) -> None:
    for headers in ({}, {"Authorization": "Bearer lk_not-a-key"}, {"Authorization": "Basic abc"}):
        response = await api.get("/account", headers=headers)
        assert response.status_code == 401, headers
        assert response.headers["content-type"] == PROBLEM
        assert response.json()["status"] == 401
        assert response.json()["detail"]


async def test_account_key_on_admin_endpoint_is_403(api: httpx.AsyncClient, account: ApiAccount) -> None:
    response = await api.post("/accounts", json={"name": "x", "email": "x@example.com"}, headers=account.headers)
    assert response.status_code == 403
    assert response.headers["content-type"] == PROBLEM


async def test_wrong_admin_token_is_401(api: httpx.AsyncClient) -> None:
    response = await api.post(
        "/accounts", json={"name": "x", "email": "x@example.com"}, headers={"Authorization": "Bearer nope"}
    )
    assert response.status_code == 401


async def test_invalid_account_body_is_422_with_locations(api: httpx.AsyncClient) -> None:
    response = await api.post("/accounts", json={"name": "", "email": "not-an-email"}, headers=ADMIN_HEADERS)
    assert response.status_code == 422
    assert response.headers["content-type"] == PROBLEM
    locations = {error["location"] for error in response.json()["errors"]}
    assert {"body.name", "body.email"} <= locations


async def test_keys_are_stored_hashed(api: httpx.AsyncClient, account: ApiAccount, app: FastAPI) -> None:
    async with app.state.sessionmaker() as session:
        hashes = (await session.execute(select(ApiKey.key_hash).where(ApiKey.account_id == account.id))).scalars()
        stored = list(hashes)
    assert len(stored) == 1
    assert account.api_key not in stored[0]
    assert len(stored[0]) == 64


async def test_oversized_body_is_413(api: httpx.AsyncClient) -> None:
    response = await api.post("/accounts", content=b"{" + b" " * 70_000 + b"}", headers=ADMIN_HEADERS)
    assert response.status_code == 413
    assert response.headers["content-type"] == PROBLEM


async def test_openapi_declares_problem_json_for_errors(api: httpx.AsyncClient) -> None:
    schema = (await api.get("/openapi.json")).json()
    responses = schema["paths"]["/accounts"]["post"]["responses"]
    for status in ("401", "403", "413", "422", "500", "503"):
        assert list(responses[status]["content"]) == [PROBLEM], status
    assert "Problem" in schema["components"]["schemas"]


async def test_the_schema_refuses_the_addresses_the_api_refuses(api: httpx.AsyncClient) -> None:
    """Schemathesis generates `…@….test` as a valid `format: email`; the pattern tells it, and any client, that
    the API refuses special-use domains and dotless ones."""
    schema = (await api.get("/openapi.json")).json()
    pattern = schema["components"]["schemas"]["AccountCreate"]["properties"]["email"]["pattern"]
    for domain in ("mail.example.com", "test.example.com", "a.test", "b.LOCAL", "c.invalid", "localhost", "dotless"):
        address = f"someone@{domain}"
        created = await api.post("/accounts", json={"name": "Someone", "email": address}, headers=ADMIN_HEADERS)
        assert created.status_code in (201, 422), created.text
        assert (created.status_code == 201) == bool(re.search(pattern, address)), address
