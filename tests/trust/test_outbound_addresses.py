"""Where the service may send a request (lifecycle/outbound.py): https to public addresses only, unless a setting
names the exception; checked when an admin registers the address and again at each use; redirects not followed."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime

import httpx
import pytest
from aiohttp import web
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.alerts import record_alert
from activities.deletion.processors import ProcessorErasures
from activities.resources import ActivityResources
from devstack.ports import free_port
from lifecycle.deletion.contracts import ErasureDelivery
from lifecycle.outbound import OutboundRefused, OutboundRule
from lifecycle.sealing import KeyRing
from lifecycle.settings import Settings
from lifecycle.shared_contracts import AlertInput
from lifecycle.statuses import AlertDelivery
from tests.conftest import ADMIN_HEADERS
from tests.db import connection
from tests.deletion.processor_servers import new_secret

REFUSED = [
    ("http://93.184.216.34/erasure", "plain http"),
    ("https://169.254.169.254/latest/meta-data", "link-local"),
    ("https://10.1.2.3/erasure", "private"),
    ("https://[fd00::1]/erasure", "private"),
    ("https://224.0.0.1/erasure", "multicast"),
    ("https://0.0.0.0/erasure", "unspecified"),
    ("https://127.0.0.1/erasure", "loopback"),
    ("https://[::1]/erasure", "loopback"),
    # A name, resolved as a delivery would resolve it.
    ("https://localhost/erasure", "loopback"),
]


@pytest.mark.parametrize(("url", "why"), REFUSED)
async def test_an_address_that_is_not_public_https_is_refused(url: str, why: str) -> None:
    with pytest.raises(OutboundRefused, match=why):
        await OutboundRule().check_url(url)


async def test_public_https_passes_and_the_settings_name_the_exceptions() -> None:
    await OutboundRule().check_url("https://93.184.216.34/erasure")
    # Development: loopback, and plain http to it.
    loopback = OutboundRule(allow_loopback=True)
    await loopback.check_url("http://127.0.0.1:8080/erasure")
    await loopback.check_url("https://localhost/erasure")
    with pytest.raises(OutboundRefused, match="plain http"):
        await loopback.check_url("http://10.1.2.3/erasure")
    with pytest.raises(OutboundRefused, match="link-local"):
        await loopback.check_url("https://169.254.169.254/")
    # An allow-list entry, by name or by network.
    await OutboundRule.of("localhost", allow_loopback=False).check_url("https://localhost/erasure")
    await OutboundRule.of("10.0.0.0/8, vendor.internal", allow_loopback=False).check_url("https://10.1.2.3/x")
    with pytest.raises(OutboundRefused, match="private"):
        await OutboundRule.of("10.0.0.0/8", allow_loopback=False).check_url("https://192.168.1.1/x")


async def test_registration_refuses_a_processor_or_server_that_is_not_public(api: httpx.AsyncClient) -> None:
    name = f"probe-{uuid.uuid4().hex[:6]}"
    for url, _ in REFUSED[:5]:
        answer = await api.put(f"/processors/{name}", json={"url": url, "secret": new_secret()}, headers=ADMIN_HEADERS)
        assert answer.status_code == 422, answer.text
        assert answer.headers["content-type"] == "application/problem+json"
        assert "may not be called" in answer.json()["detail"]
    listed = (await api.get("/processors", headers=ADMIN_HEADERS)).json()["processors"]
    assert name not in {processor["name"] for processor in listed}
    server = await api.put(
        f"/site-db-servers/{name}",
        json={"url": "postgresql://admin:s3cret-password@169.254.169.254:5432/postgres", "capacity": 10},
        headers=ADMIN_HEADERS,
    )
    assert server.status_code == 422, server.text
    assert "link-local" in server.json()["detail"] and "s3cret-password" not in server.text
    servers = (await api.get("/site-db-servers", headers=ADMIN_HEADERS)).json()["servers"]
    assert name not in {entry["name"] for entry in servers}


@asynccontextmanager
async def _http(handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> AsyncIterator[str]:
    """A real HTTP server on loopback answering every request with `handler`; its base URL."""
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def _pending_erasure(settings: Settings, url: str) -> ErasureDelivery:
    """A processor at `url` (its secret sealed, as the API stores it) and one pending erasure request to it, as
    begin_processor_erasure records them."""
    name, erasure = f"out-{uuid.uuid4().hex[:6]}", uuid.uuid4()
    secret = KeyRing(settings).newest.published.seal(new_secret())
    async with connection(settings.database_url) as conn:
        await conn.execute("INSERT INTO processors (name, url, secret) VALUES ($1, $2, $3)", name, url, secret)
        await conn.execute(
            "INSERT INTO processor_erasures (erasure_id, processor, deletion_workflow_id, account_id, webhook_id,"
            " requested_at) VALUES ($1, $2, $3, $4, $5, $6)",
            erasure,
            name,
            f"account-deletion-{uuid.uuid4()}",
            uuid.uuid4(),
            f"msg_{uuid.uuid4().hex}",
            datetime.now(UTC),
        )
    return ErasureDelivery(erasure_id=str(erasure), processor=name)


async def _last_error(settings: Settings, delivery: ErasureDelivery) -> str:
    async with connection(settings.database_url) as conn:
        return str(
            await conn.fetchval(
                "SELECT last_error FROM processor_erasures WHERE erasure_id = $1 AND processor = $2",
                uuid.UUID(delivery.erasure_id),
                delivery.processor,
            )
        )


async def test_each_delivery_checks_again_and_never_follows_a_redirect(
    settings: Settings, temporal_client: Client
) -> None:
    hits: list[str] = []

    async def acknowledge(request: web.Request) -> web.Response:
        hits.append(request.path)
        return web.json_response({"reference": "ok"})

    async with _http(acknowledge) as target:

        async def redirect(request: web.Request) -> web.Response:
            hits.append(request.path)
            raise web.HTTPTemporaryRedirect(f"{target}/after-redirect")

        async with _http(redirect) as redirecting:
            # Registered while loopback was allowed; the worker now runs without that setting, as when a name's
            # answer changed to a loopback address since its registration.
            refused = await _pending_erasure(settings, f"{target}/erasure")
            redirected = await _pending_erasure(settings, f"{redirecting}/erasure")
            strict = ActivityResources.create(
                settings.model_copy(update={"outbound_allow_loopback": False}), temporal_client
            )
            loose = ActivityResources.create(settings, temporal_client)
            try:
                with pytest.raises(ApplicationError, match="did not acknowledge: refused"):
                    await ActivityEnvironment().run(ProcessorErasures(strict).deliver_erasure_request, refused)
                assert hits == []
                assert "loopback" in await _last_error(settings, refused)
                # Allowed, it answers 307 to an address of its choosing: not followed, not acknowledged.
                with pytest.raises(ApplicationError, match="HTTP 307"):
                    await ActivityEnvironment().run(ProcessorErasures(loose).deliver_erasure_request, redirected)
                assert hits == ["/erasure"]
                # The same target, allowed, acknowledges: the refusal above was the rule, not the server.
                await ActivityEnvironment().run(ProcessorErasures(loose).deliver_erasure_request, refused)
                assert hits == ["/erasure", "/erasure"]
            finally:
                await strict.close()
                await loose.close()


async def test_an_alert_webhook_the_rule_refuses_is_not_called(settings: Settings, temporal_client: Client) -> None:
    hits: list[str] = []

    async def webhook(request: web.Request) -> web.Response:
        hits.append(request.path)
        return web.Response(status=204)

    async with _http(webhook) as base:
        strict = settings.model_copy(update={"alert_webhook_url": f"{base}/hook", "outbound_allow_loopback": False})
        resources = ActivityResources.create(strict, temporal_client)
        workflow_id = f"outbound-{uuid.uuid4().hex[:8]}"
        try:
            await ActivityEnvironment().run(
                record_alert, resources, AlertInput(workflow_id=workflow_id, subject="probe", reason="test")
            )
        finally:
            await resources.close()
    assert hits == []
    async with connection(settings.database_url) as conn:
        row = await conn.fetchrow("SELECT delivery, delivery_error FROM alerts WHERE workflow_id = $1", workflow_id)
    assert row is not None and row["delivery"] == AlertDelivery.FAILED and "loopback" in row["delivery_error"]
