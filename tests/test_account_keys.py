"""An account's keys: issue another (perhaps expiring), list them (never in full) with their last use, revoke one,
and never the last."""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime, timedelta

import httpx
from fastapi import FastAPI
from sqlalchemy import text

from tests.conftest import ADMIN_HEADERS, ApiAccount
from tests.eventually import eventually


def _bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def _issue(api: httpx.AsyncClient, key: str) -> tuple[str, str]:
    issued = await api.post("/account/keys", headers=_bearer(key))
    assert issued.status_code == 201, issued.text
    assert issued.headers["cache-control"] == "no-store"
    return issued.json()["id"], issued.json()["api_key"]


async def test_a_key_is_rotated_and_the_last_one_stays(api: httpx.AsyncClient, account: ApiAccount) -> None:
    second_id, second = await _issue(api, account.api_key)
    assert second != account.api_key
    listed = await api.get("/account/keys", headers=_bearer(second))
    assert listed.status_code == 200
    assert account.api_key not in listed.text and second not in listed.text
    keys = {key["prefix"]: key for key in listed.json()}
    assert set(keys) == {account.api_key[:8], second[:8]}
    assert keys[second[:8]]["id"] == second_id and keys[second[:8]]["created_at"]
    first_id = keys[account.api_key[:8]]["id"]

    # The second key works, and revokes the first: the first is refused from then on.
    assert (await api.get("/account", headers=_bearer(second))).json()["id"] == account.id
    assert (await api.delete(f"/account/keys/{first_id}", headers=_bearer(second))).status_code == 204
    assert (await api.get("/account", headers=account.headers)).status_code == 401
    assert [key["id"] for key in (await api.get("/account/keys", headers=_bearer(second))).json()] == [second_id]
    # Revoked already, or never this account's: no such key.
    for gone in (first_id, str(uuid.uuid4())):
        answer = await api.delete(f"/account/keys/{gone}", headers=_bearer(second))
        assert answer.status_code == 404 and answer.headers["content-type"] == "application/problem+json"

    last = await api.delete(f"/account/keys/{second_id}", headers=_bearer(second))
    assert last.status_code == 409, last.text
    assert last.headers["content-type"] == "application/problem+json"
    assert (await api.get("/account", headers=_bearer(second))).status_code == 200


async def test_another_accounts_key_is_not_found(api: httpx.AsyncClient, account: ApiAccount) -> None:
    mine = (await api.get("/account/keys", headers=account.headers)).json()
    created = await api.post("/accounts", json={"name": "Stranger", "email": "s@example.com"}, headers=ADMIN_HEADERS)
    stranger = created.json()["api_key"]
    await _issue(api, stranger)  # so that having one key left is not what stops it
    answer = await api.delete(f"/account/keys/{mine[0]['id']}", headers=_bearer(stranger))
    assert answer.status_code == 404 and answer.headers["content-type"] == "application/problem+json"
    assert (await api.get("/account", headers=account.headers)).status_code == 200


async def test_two_revocations_at_once_leave_one_key(api: httpx.AsyncClient, app: FastAPI, account: ApiAccount) -> None:
    """Each of two keys revokes the other at the same moment: one wins, the other is refused as the last."""
    second_id, second = await _issue(api, account.api_key)
    first_id = next(
        key["id"] for key in (await api.get("/account/keys", headers=account.headers)).json() if key["id"] != second_id
    )
    async with app.state.engine.connect() as holder:
        # Holds both keys' rows, so both revocations are in flight together when it lets go.
        await holder.execute(
            text("SELECT id FROM api_keys WHERE account_id = :account FOR UPDATE"), {"account": account.id}
        )
        revocations = [
            asyncio.create_task(api.delete(f"/account/keys/{first_id}", headers=_bearer(second))),
            asyncio.create_task(api.delete(f"/account/keys/{second_id}", headers=account.headers)),
        ]
        await eventually(lambda: _lock_waits(app), "both revocations wait", until=lambda waits: waits >= 2)
        await holder.rollback()
    answers = await asyncio.gather(*revocations)
    assert sorted(answer.status_code for answer in answers) == [204, 409], [answer.text for answer in answers]
    left = [await api.get("/account/keys", headers=headers) for headers in (account.headers, _bearer(second))]
    assert sorted(answer.status_code for answer in left) == [200, 401]
    assert [len(answer.json()) for answer in left if answer.status_code == 200] == [1]


async def _lock_waits(app: FastAPI) -> int:
    # A connection of its own: a transaction sees pg_stat_activity as it was at its first read.
    async with app.state.engine.connect() as connection:
        waits = await connection.execute(
            text(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
        )
        return int(waits.scalar_one())


async def test_a_key_past_its_expiry_opens_nothing(api: httpx.AsyncClient, account: ApiAccount) -> None:
    issued = await api.post("/account/keys", json={"expires_in": 3}, headers=account.headers)
    assert issued.status_code == 201, issued.text
    expiring, expires_at = issued.json()["api_key"], datetime.fromisoformat(issued.json()["expires_at"])
    lasting = await api.post("/account/keys", json={"expires_in": 30 * 24 * 3600}, headers=account.headers)
    assert lasting.status_code == 201, lasting.text
    listed = {key["id"]: key for key in (await api.get("/account/keys", headers=account.headers)).json()}
    assert datetime.fromisoformat(listed[issued.json()["id"]]["expires_at"]) == expires_at
    assert datetime.fromisoformat(listed[lasting.json()["id"]]["expires_at"]) > expires_at + timedelta(days=29)
    # Without one, a key does not expire.
    assert [key["expires_at"] for key in listed.values() if key["prefix"] == account.api_key[:8]] == [None]

    async def refused() -> bool:
        return (await api.get("/account", headers=_bearer(expiring))).status_code == 401

    await eventually(refused, "the key is refused once it expired")
    # Everywhere: also in the statement that authorizes a bot's deletion (api/deletion/requests.py).
    bot = await api.post("/bots", json={"name": "Kept"}, headers=account.headers)
    assert (await api.delete(f"/bots/{bot.json()['id']}", headers=_bearer(expiring))).status_code == 401
    assert (await api.get(f"/bots/{bot.json()['id']}", headers=account.headers)).status_code == 200
    # Gone from the list, and no longer revocable, as a revoked key.
    listed = {key["id"]: key for key in (await api.get("/account/keys", headers=account.headers)).json()}
    assert issued.json()["id"] not in listed and lasting.json()["id"] in listed
    assert (await api.delete(f"/account/keys/{issued.json()['id']}", headers=account.headers)).status_code == 404


async def test_an_expiry_must_be_later_than_now(api: httpx.AsyncClient, account: ApiAccount) -> None:
    for body in ({"expires_in": 0}, {"expires_in": -5}, {"expires_at": "2030-01-01T00:00:00Z"}):
        answer = await api.post("/account/keys", json=body, headers=account.headers)
        assert answer.status_code == 422, (body, answer.text)
        assert answer.headers["content-type"] == "application/problem+json"
    assert len((await api.get("/account/keys", headers=account.headers)).json()) == 1


async def test_the_last_use_of_each_key_is_shown_and_written_at_most_once_a_minute(
    api: httpx.AsyncClient, app: FastAPI, account: ApiAccount
) -> None:
    second_id, second = await _issue(api, account.api_key)
    listed = {key["id"]: key for key in (await api.get("/account/keys", headers=account.headers)).json()}
    first_id = next(key_id for key_id in listed if key_id != second_id)
    assert listed[first_id]["last_used_at"] is not None
    assert listed[second_id]["last_used_at"] is None  # issued, never used

    bot = await api.post("/bots", json={"name": "Used"}, headers=account.headers)
    # A use through DELETE /bots/{id} is recorded too.
    assert (await api.delete(f"/bots/{bot.json()['id']}", headers=_bearer(second))).status_code in (200, 202)
    used = {key["id"]: key["last_used_at"] for key in (await api.get("/account/keys", headers=account.headers)).json()}
    assert used[second_id] is not None
    # Uses within the minute write nothing: the time recorded stays the first's.
    for _ in range(3):
        assert (await api.get("/account", headers=_bearer(second))).status_code == 200
    again = {key["id"]: key["last_used_at"] for key in (await api.get("/account/keys", headers=account.headers)).json()}
    assert again == used
    # Once the recorded use is older than a minute, the next use writes it again.
    async with app.state.engine.begin() as connection:
        await connection.execute(
            text("UPDATE api_keys SET last_used_at = last_used_at - interval '2 minutes' WHERE id = :id"),
            {"id": second_id},
        )
    assert (await api.get("/account", headers=_bearer(second))).status_code == 200
    later = {key["id"]: key["last_used_at"] for key in (await api.get("/account/keys", headers=account.headers)).json()}
    # Written anew (now, after the first use), not left two minutes back.
    assert datetime.fromisoformat(later[second_id]) >= datetime.fromisoformat(used[second_id])
