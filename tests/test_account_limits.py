"""An account's limits: bots (MAX_BOTS_PER_ACCOUNT) and live keys (MAX_KEYS_PER_ACCOUNT) past which a creation is
refused with a problem, also when requests race for the last places; and its requests a second
(ACCOUNT_REQUESTS_PER_SECOND), past which the API answers 429 with `Retry-After`.

Each test runs its own API with small limits, so the session's API keeps its defaults.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import httpx
from fastapi import FastAPI
from sqlalchemy import text
from temporalio.client import Client

from api.app import create_app
from lifecycle.settings import Settings
from tests.conftest import ADMIN_HEADERS, ApiAccount
from tests.eventually import eventually

PROBLEM = "application/problem+json"


@asynccontextmanager
async def _own_api(settings: Settings, temporal_client: Client, **limits: int) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings.model_copy(update=limits), temporal_client=temporal_client)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
            client.app = app  # type: ignore[attr-defined]
            yield client


async def _new_account(api: httpx.AsyncClient, name: str) -> ApiAccount:
    created = await api.post("/accounts", json={"name": name, "email": f"{name}@example.com"}, headers=ADMIN_HEADERS)
    assert created.status_code == 201, created.text
    body = created.json()
    return ApiAccount(id=body["id"], name=name, email=body["email"], api_key=body["api_key"])


def _assert_limit_problem(response: httpx.Response, title: str, detail: str) -> None:
    assert response.status_code == 429, response.text
    assert response.headers["retry-after"] == "60"
    assert response.headers["content-type"] == PROBLEM
    assert (response.json()["title"], response.json()["detail"]) == (title, detail)


async def _lock_waits(app: FastAPI) -> int:
    # A connection of its own: a transaction sees pg_stat_activity as it was at its first read.
    async with app.state.engine.connect() as connection:
        waits = await connection.execute(
            text(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
        )
        return int(waits.scalar_one())


async def _all_at_once(
    app: FastAPI, hold: str, account_id: str, requests: list[Callable[[], Coroutine[Any, Any, httpx.Response]]]
) -> list[httpx.Response]:
    """The requests, each in flight and waiting on the lock that `hold` takes when that lock is let go: they
    reach the limit's count together, as concurrent requests of one account do at worst."""
    async with app.state.engine.connect() as holder:
        await holder.execute(text(hold), {"account": account_id})
        sent = [asyncio.create_task(request()) for request in requests]
        await eventually(lambda: _lock_waits(app), "every request waits", until=lambda waits: waits >= len(sent))
        await holder.rollback()
    return list(await asyncio.gather(*sent))


async def test_the_bot_past_the_limit_is_refused_and_a_deleted_one_frees_its_place(
    settings: Settings, temporal_client: Client
) -> None:
    async with _own_api(settings, temporal_client, max_bots_per_account=3) as api:
        account = await _new_account(api, "bots-limit")
        made = [await api.post("/bots", json={"name": f"Bot {n}"}, headers=account.headers) for n in range(3)]
        assert [answer.status_code for answer in made] == [201] * 3
        refused = await api.post("/bots", json={"name": "One too many"}, headers=account.headers)
        _assert_limit_problem(
            refused,
            "Bot limit reached",
            "This account holds 3 bots, the most it may have. Delete one to create another.",
        )
        # Another account has places of its own.
        other = await _new_account(api, "bots-limit-other")
        assert (await api.post("/bots", json={"name": "Theirs"}, headers=other.headers)).status_code == 201

        deleted = await api.delete(f"/bots/{made[0].json()['id']}", headers=account.headers)
        assert deleted.status_code in (200, 202), deleted.text
        assert (await api.post("/bots", json={"name": "In its place"}, headers=account.headers)).status_code == 201
        assert len((await api.get("/bots", headers=account.headers)).json()) == 3


async def test_concurrent_bot_creations_never_pass_the_limit(settings: Settings, temporal_client: Client) -> None:
    async with _own_api(settings, temporal_client, max_bots_per_account=4) as api:
        account = await _new_account(api, "bots-race")
        for n in range(2):
            assert (await api.post("/bots", json={"name": f"Early {n}"}, headers=account.headers)).status_code == 201
        answers = await _all_at_once(
            api.app,  # type: ignore[attr-defined]
            "SELECT id FROM accounts WHERE id = :account FOR UPDATE",
            account.id,
            [partial(api.post, "/bots", json={"name": f"Racer {n}"}, headers=account.headers) for n in range(6)],
        )
        assert sorted(answer.status_code for answer in answers) == [201] * 2 + [429] * 4, [a.text for a in answers]
        assert len((await api.get("/bots", headers=account.headers)).json()) == 4


async def test_the_key_past_the_limit_is_refused_and_a_revoked_one_frees_its_place(
    settings: Settings, temporal_client: Client
) -> None:
    async with _own_api(settings, temporal_client, max_keys_per_account=3) as api:
        account = await _new_account(api, "keys-limit")
        issued = [await api.post("/account/keys", headers=account.headers) for _ in range(2)]
        assert [answer.status_code for answer in issued] == [201, 201]
        refused = await api.post("/account/keys", headers=account.headers)
        _assert_limit_problem(
            refused,
            "Key limit reached",
            "This account holds 3 live keys, the most it may have. Revoke one to issue another.",
        )
        revoked = await api.delete(f"/account/keys/{issued[0].json()['id']}", headers=account.headers)
        assert revoked.status_code == 204
        assert (await api.post("/account/keys", headers=account.headers)).status_code == 201
        assert len((await api.get("/account/keys", headers=account.headers)).json()) == 3


async def test_concurrent_key_issues_never_pass_the_limit(settings: Settings, temporal_client: Client) -> None:
    async with _own_api(settings, temporal_client, max_keys_per_account=3) as api:
        account = await _new_account(api, "keys-race")
        answers = await _all_at_once(
            api.app,  # type: ignore[attr-defined]
            "SELECT pg_advisory_xact_lock(hashtext('api_keys'), hashtext(:account))",
            account.id,
            [partial(api.post, "/account/keys", headers=account.headers) for _ in range(5)],
        )
        assert sorted(answer.status_code for answer in answers) == [201] * 2 + [429] * 3, [a.text for a in answers]
        assert len((await api.get("/account/keys", headers=account.headers)).json()) == 3


def _assert_too_many(response: httpx.Response) -> None:
    assert response.status_code == 429, response.text
    assert response.headers["content-type"] == PROBLEM
    assert int(response.headers["retry-after"]) >= 1
    problem: dict[str, Any] = response.json()
    assert problem["status"] == 429 and problem["title"] == "Too many requests"


async def test_requests_past_the_accounts_rate_answer_429_with_retry_after(
    settings: Settings, temporal_client: Client
) -> None:
    async with _own_api(settings, temporal_client, account_requests_per_second=2) as api:
        account = await _new_account(api, "rate")
        other = await _new_account(api, "rate-other")
        bot = await api.post("/bots", json={"name": "Counted"}, headers=account.headers)

        async def burst() -> list[httpx.Response]:
            return list(await asyncio.gather(*(api.get("/account", headers=account.headers) for _ in range(20))))

        answers = await burst()
        statuses = [answer.status_code for answer in answers]
        # The bot's creation took one of this second's two (or a new second began meanwhile).
        assert set(statuses) == {200, 429} and 1 <= statuses.count(200) <= 4, statuses
        _assert_too_many(next(answer for answer in answers if answer.status_code == 429))
        # Per account: another account's requests are its own.
        assert (await api.get("/account", headers=other.headers)).status_code == 200
        # The admin token is not counted against any account.
        assert (await api.get(f"/accounts/{account.id}/deletion", headers=ADMIN_HEADERS)).status_code != 429

        # DELETE /bots/{id}, which checks its key in the statement that acts, is counted too.
        async def refused_deletion() -> httpx.Response | None:
            await burst()
            answer = await api.delete(f"/bots/{bot.json()['id']}", headers=account.headers)
            return answer if answer.status_code == 429 else None

        _assert_too_many(await eventually(refused_deletion, "a DELETE /bots/{id} past the rate is refused"))

        # Once the window passes, the account's requests go through again.
        async def passes() -> bool:
            return (await api.get("/account", headers=account.headers)).status_code == 200

        await eventually(passes, "a request after Retry-After passes")


async def test_the_openapi_document_declares_the_429_on_keyed_operations_only(api: httpx.AsyncClient) -> None:
    paths = (await api.get("/openapi.json")).json()["paths"]
    too_many = paths["/bots"]["get"]["responses"]["429"]
    assert too_many["content"] == {PROBLEM: {"schema": {"$ref": "#/components/schemas/Problem"}}}
    assert "Retry-After" in too_many["headers"]
    assert "429" in paths["/bots/{bot_id}"]["delete"]["responses"]
    assert "429" not in paths["/accounts"]["post"]["responses"]
