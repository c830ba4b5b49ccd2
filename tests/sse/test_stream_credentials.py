"""An open stream ends, with a last `credentials-ended` event, once what opened it no longer would: its token
expired, its key (or the key that minted its token) was revoked, or its account asked to be deleted."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest_asyncio
from httpx_sse import ServerSentEvent, aconnect_sse
from temporalio.client import Client

from lifecycle.settings import Settings
from tests.conftest import ADMIN_HEADERS
from tests.eventually import eventually
from tests.sse.conftest import ServedApi, serve
from tests.sse.test_site_events import _site

# How soon the task asks a stream to end after its credential does.
ENDS_WITHIN_SECONDS = 10.0
# Long enough to mint a token and open its stream on a busy machine, short enough to wait for.
TOKEN_TTL = timedelta(seconds=4)
# Checks the keys often, so that a test waits for the check far less than for the bound above.
RECHECK_SECONDS = 0.2
# What a test waits for a stream to end at most before it fails: the stream was left open.
GIVE_UP_SECONDS = 60.0


@pytest_asyncio.fixture(scope="module")
async def rechecking(settings: Settings, temporal_client: Client) -> AsyncIterator[ServedApi]:
    async with serve(settings, temporal_client, stream_credentials_recheck=RECHECK_SECONDS) as api:
        yield api


@dataclass(frozen=True)
class Followed:
    events: list[ServerSentEvent]
    ended_at: float  # Unix time at which the server ended the stream


async def _follow(http: httpx.AsyncClient, path: str, opened: asyncio.Event, **request: Any) -> Followed:
    """Every event of one stream until the server ends it; `opened` is set at its first event."""
    async with aconnect_sse(http, "GET", path, **request) as source:
        assert source.response.status_code == 200, await source.response.aread()
        events = []
        async for event in source.aiter_sse():
            if event.data:  # not a keepalive comment
                events.append(event)
                opened.set()
        return Followed(events, time.time())


@contextlib.asynccontextmanager
async def _streams(
    *follows: tuple[httpx.AsyncClient, str, dict[str, Any]],
) -> AsyncIterator[list[asyncio.Task[Followed]]]:
    """The streams, each open (its first event received) before the block runs; cancelled after it if still open."""
    opened = [asyncio.Event() for _ in follows]
    tasks = [
        asyncio.create_task(_follow(http, path, each, **request))
        for (http, path, request), each in zip(follows, opened, strict=True)
    ]
    try:
        for each, task in zip(opened, tasks, strict=True):
            await eventually(lambda: each.is_set() or task.done(), "the stream sends its first event")  # noqa: B023
            if task.done():
                task.result()  # it failed to open: its error
        yield tasks
    finally:
        for task in tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def _ending(followed: Followed) -> tuple[str, dict[str, Any]]:
    last = followed.events[-1]
    return last.event, json.loads(last.data)


def _bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def _new_account(http: httpx.AsyncClient) -> str:
    created = await http.post("/accounts", json={"name": "Watcher", "email": "w@example.com"}, headers=ADMIN_HEADERS)
    assert created.status_code == 201, created.text
    key: str = created.json()["api_key"]
    return key


async def _token(http: httpx.AsyncClient, site_id: str, key: str) -> dict[str, Any]:
    minted = await http.post(f"/sites/{site_id}/events/token", headers=_bearer(key))
    assert minted.status_code == 201, minted.text
    body: dict[str, Any] = minted.json()
    return body


async def test_a_stream_ends_when_its_token_expires(settings: Settings, temporal_client: Client) -> None:
    async with (
        serve(settings, temporal_client, stream_token_ttl=TOKEN_TTL) as api,
        api.client() as http,
        api.client() as browser,
    ):
        key = await _new_account(http)
        site_id = await _site(http, _bearer(key))
        minted = await _token(http, site_id, key)
        expires = datetime.fromisoformat(minted["expires_at"]).timestamp()
        path = f"/sites/{site_id}/events"
        # The site is provisioning and stays so (no worker polls its queue): only the expiry can end the stream.
        async with _streams((browser, path, {"params": {"access_token": minted["token"]}})) as (stream,):
            followed = await asyncio.wait_for(stream, TOKEN_TTL.total_seconds() + GIVE_UP_SECONDS)
        assert followed.events[0].event == "message"
        assert _ending(followed) == ("credentials-ended", {"reason": "token_expired"})
        assert expires <= followed.ended_at < expires + ENDS_WITHIN_SECONDS
        assert (await browser.get(path, params={"access_token": minted["token"]})).status_code == 401


async def test_streams_end_when_their_key_is_revoked(rechecking: ServedApi) -> None:
    async with rechecking.client() as http, rechecking.client() as browser:
        first = await _new_account(http)
        second = (await http.post("/account/keys", headers=_bearer(first))).json()["api_key"]
        site_id = await _site(http, _bearer(first))
        token = (await _token(http, site_id, first))["token"]
        path = f"/sites/{site_id}/events"
        async with _streams(
            (http, path, {"headers": _bearer(first)}),
            (browser, path, {"params": {"access_token": token}}),  # minted with the first key
            (http, path, {"headers": _bearer(second)}),
        ) as (by_key, by_token, by_other_key):
            listed = (await http.get("/account/keys", headers=_bearer(second))).json()
            first_id = next(key["id"] for key in listed if key["prefix"] == first[:8])
            assert (await http.delete(f"/account/keys/{first_id}", headers=_bearer(second))).status_code == 204
            revoked_at = time.time()
            for stream in (by_key, by_token):
                followed = await asyncio.wait_for(stream, GIVE_UP_SECONDS)
                assert _ending(followed) == ("credentials-ended", {"reason": "key_revoked"})
                assert followed.ended_at < revoked_at + ENDS_WITHIN_SECONDS
            # The check that ended those covered the second key too, and left its stream open.
            assert not by_other_key.done()
        assert (await http.get("/account", headers=_bearer(first))).status_code == 401
        assert (await browser.get(path, params={"access_token": token})).status_code == 401


async def test_a_stream_ends_when_its_key_expires(rechecking: ServedApi) -> None:
    async with rechecking.client() as http:
        key = await _new_account(http)
        issued = await http.post(
            "/account/keys", json={"expires_in": int(TOKEN_TTL.total_seconds())}, headers=_bearer(key)
        )
        expiring = issued.json()["api_key"]
        expires = datetime.fromisoformat(issued.json()["expires_at"]).timestamp()
        site_id = await _site(http, _bearer(key))
        path = f"/sites/{site_id}/events"
        async with _streams((http, path, {"headers": _bearer(expiring)})) as (stream,):
            followed = await asyncio.wait_for(stream, TOKEN_TTL.total_seconds() + GIVE_UP_SECONDS)
        # Refused as a revoked key is, and said the same way.
        assert _ending(followed) == ("credentials-ended", {"reason": "key_revoked"})
        assert expires <= followed.ended_at < expires + ENDS_WITHIN_SECONDS
        assert (await http.get("/account", headers=_bearer(expiring))).status_code == 401


async def test_streams_end_when_their_account_is_deleted(rechecking: ServedApi) -> None:
    async with rechecking.client() as http, rechecking.client() as browser:
        key = await _new_account(http)
        site_id = await _site(http, _bearer(key))
        token = (await _token(http, site_id, key))["token"]
        path = f"/sites/{site_id}/events"
        async with _streams(
            (http, path, {"headers": _bearer(key)}), (browser, path, {"params": {"access_token": token}})
        ) as streams:
            assert (await http.delete("/account", headers=_bearer(key))).status_code == 202
            deleted_at = time.time()
            for stream in streams:
                followed = await asyncio.wait_for(stream, GIVE_UP_SECONDS)
                assert _ending(followed) == ("credentials-ended", {"reason": "account_deleted"})
                assert followed.ended_at < deleted_at + ENDS_WITHIN_SECONDS
        assert (await browser.get(path, params={"access_token": token})).status_code == 401
