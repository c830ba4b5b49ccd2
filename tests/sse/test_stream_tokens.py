"""A stream token opens its one stream, from the cookie or the query string, and nothing else."""

from __future__ import annotations

import uuid

import httpx

from api.streams.tokens import StreamKind, encode, mint, verify
from tests.sse.conftest import ServedApi
from tests.sse.test_site_events import _account, _site


async def _first_event_line(http: httpx.AsyncClient, path: str, **kwargs: object) -> tuple[int, str, str]:
    async with http.stream("GET", path, **kwargs) as response:  # type: ignore[arg-type]
        if response.status_code != 200:
            await response.aread()
            return response.status_code, response.headers.get("cache-control", ""), response.text
        async for line in response.aiter_lines():
            # A keepalive comment (and its blank line) may come first on a busy machine; clients skip it.
            if line and not line.startswith(":"):
                return response.status_code, response.headers["cache-control"], line
    raise AssertionError("the stream ended without a line")


def _forged(token: str) -> str:
    """The token with its signature's last character changed: always a different signature (a fixed suffix was
    the same one in 1 of 256 runs)."""
    return token[:-1] + ("1" if token[-1] == "0" else "0")


async def test_a_token_opens_its_own_stream_by_cookie_or_query_and_no_other(served: ServedApi) -> None:
    async with served.client() as http:
        owner = await _account(http)
        site_id = await _site(http, owner)
        other_site = await _site(http, owner)
        minted = await http.post(f"/sites/{site_id}/events/token", headers=owner)
        assert minted.status_code == 201, minted.text
        assert minted.headers["cache-control"] == "no-store"
        cookie = minted.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie and f"Path=/sites/{site_id}/events" in cookie
        token = minted.json()["token"]
        stranger = await _account(http)
        assert (await http.post(f"/sites/{site_id}/events/token", headers=stranger)).status_code == 404

    async with served.client() as browser:  # a fresh client: no key, no cookie jar
        status, cache, line = await _first_event_line(
            browser, f"/sites/{site_id}/events", params={"access_token": token}
        )
        assert (status, cache) == (200, "no-store") and line.startswith("id: ")
        status, _, line = await _first_event_line(
            browser, f"/sites/{site_id}/events", headers={"Cookie": f"stream_token={token}"}
        )
        assert status == 200 and line.startswith("id: ")
        # Another stream of the same account, a forged token, and no token at all are refused.
        for path, params in (
            (f"/sites/{other_site}/events", {"access_token": token}),
            (f"/sites/{site_id}/events", {"access_token": _forged(token)}),
            (f"/sites/{site_id}/events", {}),
        ):
            status, _, body = await _first_event_line(browser, path, params=params)
            assert status == 401, (path, body)


def test_an_expired_token_or_one_for_another_kind_opens_nothing(served: ServedApi) -> None:
    settings = served.settings
    site_id, account_id, key_id = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    grant = mint(settings, StreamKind.SITE, site_id, account_id, key_id)
    token = encode(settings, grant)
    assert verify(settings, token, StreamKind.SITE, site_id) == grant
    assert verify(settings, token, StreamKind.BOT_DELETION, site_id) is None
    expired = encode(settings, type(grant)(grant.kind, site_id, account_id, key_id, expires=1))
    assert verify(settings, expired, StreamKind.SITE, site_id) is None
    # The key is signed too: a token of the admin token's kind (no key) cannot be made from a key's.
    account, _, expires, signature = token.split(".")
    assert verify(settings, f"{account}..{expires}.{signature}", StreamKind.SITE, site_id) is None


async def test_an_empty_last_event_id_is_a_fresh_stream_and_a_word_is_refused(served: ServedApi) -> None:
    async with served.client() as http:
        owner = await _account(http)
        site_id = await _site(http, owner)
        status, _, line = await _first_event_line(
            http, f"/sites/{site_id}/events", headers={**owner, "Last-Event-ID": ""}
        )
        assert status == 200 and line.startswith("id: ")
        status, _, body = await _first_event_line(
            http, f"/sites/{site_id}/events", headers={**owner, "Last-Event-ID": "yesterday"}
        )
        assert status == 422, body
