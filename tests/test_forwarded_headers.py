"""Behind a TLS proxy: `python -m api` believes X-Forwarded-Proto and X-Forwarded-For from the addresses
FORWARDED_ALLOW_IPS names, and from no other, so the stream-token cookie is `Secure` when the browser's own
connection is HTTPS and the access log names the browser, not the proxy."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio

from lifecycle.db.engine import make_engine, make_sessionmaker
from lifecycle.db.models import Site
from lifecycle.settings import Settings
from lifecycle.statuses import SiteStatus
from tests.conftest import ADMIN_HEADERS
from tests.processes import ApiProcess

# Loopback is all of 127.0.0.0/8 on Linux: a client can connect from an address of its choice.
PROXY = "127.0.0.2"
NOT_THE_PROXY = "127.0.0.3"
BROWSER = "203.0.113.7"  # TEST-NET-3


@pytest.fixture
def api_behind_proxy(settings: Settings, tmp_path: Path) -> Iterator[ApiProcess]:
    api = ApiProcess(
        settings.model_copy(update={"forwarded_allow_ips": PROXY}), tmp_path / "api.log", LOG_FORMAT="json"
    )
    api.start()
    yield api
    api.terminate()


@pytest_asyncio.fixture
async def owned_site(api_behind_proxy: ApiProcess, settings: Settings) -> AsyncIterator[tuple[str, dict[str, str]]]:
    """An account's key and a site of it: a row, not a run, since only the token's cookie is looked at."""
    async with httpx.AsyncClient(base_url=api_behind_proxy.url) as http:
        created = await http.post(
            "/accounts", json={"name": "Proxied", "email": "p@example.com"}, headers=ADMIN_HEADERS
        )
    assert created.status_code == 201, created.text
    engine = make_engine(settings.database_url, pool_size=1)
    site = Site(
        account_id=uuid.UUID(created.json()["id"]),
        name="proxied",
        tagline="",
        domain=f"proxied-{uuid.uuid4().hex[:10]}.example.com",
        status=SiteStatus.DELETED,
        steps={},
    )
    try:
        async with make_sessionmaker(engine)() as session:
            session.add(site)
            await session.commit()
    finally:
        await engine.dispose()
    yield str(site.id), {"Authorization": f"Bearer {created.json()['api_key']}"}


async def _cookie_from(api: ApiProcess, source: str, site_id: str, headers: dict[str, str]) -> str:
    """The stream-token cookie as answered to a connection from `source` that says it forwards an HTTPS one."""
    transport = httpx.AsyncHTTPTransport(local_address=source)
    async with httpx.AsyncClient(base_url=api.url, transport=transport) as http:
        minted = await http.post(
            f"/sites/{site_id}/events/token",
            headers={**headers, "X-Forwarded-Proto": "https", "X-Forwarded-For": BROWSER},
        )
    assert minted.status_code == 201, minted.text
    return minted.headers["set-cookie"]


def _access_clients(api: ApiProcess, site_id: str) -> list[str]:
    lines = [json.loads(line) for line in api.log().splitlines() if line.startswith("{")]
    return [line["client"] for line in lines if line.get("path") == f"/sites/{site_id}/events/token"]


async def test_forwarded_headers_are_believed_from_the_configured_proxy_only(
    api_behind_proxy: ApiProcess, owned_site: tuple[str, dict[str, str]]
) -> None:
    site_id, headers = owned_site
    from_proxy = await _cookie_from(api_behind_proxy, PROXY, site_id, headers)
    from_elsewhere = await _cookie_from(api_behind_proxy, NOT_THE_PROXY, site_id, headers)
    assert "Secure" in from_proxy and "HttpOnly" in from_proxy
    assert "Secure" not in from_elsewhere
    api_behind_proxy.terminate()
    # The proxy's request is logged as the browser's; the other as the address it came from.
    clients = [client.rpartition(":")[0] for client in _access_clients(api_behind_proxy, site_id)]
    assert clients == [BROWSER, NOT_THE_PROXY]
