"""Every operation in the OpenAPI schema refuses callers who may not act: no key, a bad key, a revoked key."""

from __future__ import annotations

import re
import uuid

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import update

from lifecycle.db.models import ApiKey
from tests.conftest import ADMIN_HEADERS, ApiAccount

# The signed download link is its own credential (an HMAC, checked in tests/exports), so it takes no key.
PUBLIC = {("GET", "/healthz"), ("GET", "/readyz"), ("GET", "/exports/{export_id}/download")}
ADMIN_ONLY = {("POST", "/accounts")}


def _operations(app: FastAPI) -> list[tuple[str, str]]:
    found = []
    for path, item in app.openapi()["paths"].items():
        for method in item:
            found.append((method.upper(), path))
    return sorted(found)


def _concrete(path: str) -> str:
    return re.sub(r"\{[^}]+\}", str(uuid.uuid4()), path)


async def _call(api: httpx.AsyncClient, method: str, path: str, headers: dict[str, str]) -> httpx.Response:
    body: dict[str, str] | None = {} if method in {"POST", "PUT", "PATCH"} else None
    return await api.request(method, _concrete(path), headers=headers, json=body)


async def test_the_matrix_covers_every_protected_operation(app: FastAPI) -> None:
    protected = [op for op in _operations(app) if op not in PUBLIC]
    assert ("GET", "/account") in protected
    assert len(protected) >= 2


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer lk_wrong"}, {"Authorization": "Bearer "}, {"Authorization": "Token abc"}],
    ids=["no-key", "unknown-key", "empty-key", "wrong-scheme"],
)
async def test_every_protected_operation_refuses_without_a_valid_key(
    api: httpx.AsyncClient, app: FastAPI, headers: dict[str, str]
) -> None:
    for method, path in _operations(app):
        if (method, path) in PUBLIC:
            continue
        response = await _call(api, method, path, headers)
        assert response.status_code == 401, (method, path, response.status_code, response.text)
        assert response.headers["content-type"] == "application/problem+json"
        assert response.json()["detail"]


async def test_revoked_key_is_refused_everywhere(api: httpx.AsyncClient, app: FastAPI, account: ApiAccount) -> None:
    async with app.state.sessionmaker() as session:
        await session.execute(
            update(ApiKey).where(ApiKey.account_id == uuid.UUID(account.id)).values(revoked_at=ApiKey.created_at)
        )
        await session.commit()
    for method, path in _operations(app):
        if (method, path) in PUBLIC:
            continue
        response = await _call(api, method, path, account.headers)
        assert response.status_code == 401, (method, path, response.status_code)


async def test_account_keys_on_admin_endpoints_are_403(api: httpx.AsyncClient, account: ApiAccount) -> None:
    for method, path in ADMIN_ONLY:
        response = await _call(api, method, path, account.headers)
        assert response.status_code == 403, (method, path)


async def test_admin_token_is_not_an_account_key(api: httpx.AsyncClient) -> None:
    response = await api.get("/account", headers=ADMIN_HEADERS)
    assert response.status_code == 401
