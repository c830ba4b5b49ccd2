"""The demo page in Debian's Chromium: a site created from the form is drawn live from its event stream, a
connection cut mid-build costs no step and repeats none, the page says the site is live the moment it is (bar,
heading and title) or that it could not be built, a second site is built from the same page, and without its
script the form never puts the key in a URL."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import pytest_asyncio
from playwright.async_api import Page, async_playwright
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio.client import Client

from api.app import create_app
from lifecycle.db.events import site_events
from lifecycle.db.models import Site
from lifecycle.settings import Settings
from tests.browser.cuttable_proxy import CuttableProxy
from tests.conftest import ADMIN_TOKEN
from tests.eventually import eventually
from tests.in_process_api import served_in_process
from tests.operators.test_temporal_ui import CHROMIUM, CHROMIUM_ARGS
from tests.workers import own_queue, own_worker

SCREENSHOT = Path(__file__).resolve().parents[2] / "test-artifacts" / "demo-page.png"
PAGE_TIMEOUT_MS = 60_000
# The bootstrap's first attempt works this much longer, so the cut lands while the site is still being built.
SLOW_BOOTSTRAP = "bootstrap_site=delay:4:1"


@dataclass(frozen=True)
class DemoApi:
    settings: Settings
    port: int
    sessions: async_sessionmaker[AsyncSession]


@pytest_asyncio.fixture
async def demo_api(settings: Settings, temporal_client: Client) -> AsyncIterator[DemoApi]:
    own = own_queue(settings).model_copy(update={"demo_page": True})
    app = create_app(own, temporal_client=temporal_client)
    async with served_in_process(app) as port:
        yield DemoApi(own, port, app.state.sessionmaker)


async def _api_key(base_url: str) -> str:
    async with httpx.AsyncClient(base_url=base_url) as http:
        created = await http.post(
            "/accounts",
            json={"name": "Demo", "email": "demo@example.com"},
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
        )
    assert created.status_code == 201, created.text
    key: str = created.json()["api_key"]
    return key


async def _step_status(page: Page, step: str) -> str:
    return await page.locator(f'#steps li[data-step="{step}"]').get_attribute("data-status") or ""


async def _site_status(demo_api: DemoApi, domain: str, status: str) -> bool:
    async with demo_api.sessions() as session:
        return (await session.execute(select(Site.status).where(Site.domain == domain))).scalar_one() == status


async def _bar_when_live(page: Page, domain: str) -> float:
    """How full the bar is drawn in the first frame where the page says this site is live: the fill's rendered
    width over the track's, as the reader sees it (a transition still running would show less)."""
    ratio = await page.wait_for_function(
        """(domain) => {
            const final = document.querySelector("#final");
            return final.dataset.status === "active" && final.textContent.includes(domain)
                && document.querySelector("#bar-fill").getBoundingClientRect().width
                    / document.querySelector("#progress .bar").getBoundingClientRect().width;
        }""",
        arg=domain,
        polling="raf",
    )
    value: float = await ratio.json_value()
    return value


async def _build(page: Page, name: str, domain: str) -> None:
    await page.fill('input[name="name"]', name)
    await page.fill('input[name="domain"]', domain)
    await page.click('button[type="submit"]')


async def _site_event_ids(demo_api: DemoApi, domain: str) -> list[int]:
    async with demo_api.sessions() as session:
        site_id = (await session.execute(select(Site.id).where(Site.domain == domain))).scalar_one()
        return [event_id for event_id, _ in await site_events(session, site_id, after=0)]


async def _received_event_ids(page: Page) -> list[int]:
    return [
        int(value)
        for value in await page.locator("#events li").evaluate_all("items => items.map(i => i.dataset.eventId)")
    ]


@pytest.mark.long
async def test_the_page_draws_every_step_across_a_dropped_connection(
    demo_api: DemoApi, temporal_client: Client
) -> None:
    own = demo_api.settings
    proxy = CuttableProxy(demo_api.port)
    await proxy.start()
    base_url = f"http://127.0.0.1:{proxy.port}"
    key = await _api_key(base_url)
    domain = f"demo-{uuid.uuid4().hex[:8]}.example.com"
    try:
        async with own_worker(own, temporal_client, faults=SLOW_BOOTSTRAP), async_playwright() as playwright:
            browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                page = await browser.new_page(viewport={"width": 900, "height": 900})
                page.set_default_timeout(PAGE_TIMEOUT_MS)
                await page.goto(f"{base_url}/demo/")
                await page.fill('input[name="api_key"]', key)
                await page.fill('input[name="tagline"]', "Built while you wait")
                await _build(page, "Watched live", domain)

                # Mid-build: the database is done and the bootstrap's slowed first attempt has begun.
                await page.wait_for_selector('#steps li[data-step="database"][data-status="done"]')
                assert await _step_status(page, "bootstrap") in {"pending", "running"}
                assert proxy.cut() >= 1, "the stream's connection went through the proxy"
                await page.wait_for_selector('body[data-connection="reconnecting"]')
                # The rest of the build happens while the page cannot reach the API, then the network is back.
                await eventually(lambda: _site_status(demo_api, domain, "active"), "the site is built meanwhile")
                proxy.restore()

                assert await _bar_when_live(page, domain) == pytest.approx(1), "the bar is full once the site is live"
                assert await page.get_attribute("#progress .bar", "aria-valuenow") == "100"
                assert await page.title() == "Your site is live"
                assert await page.get_attribute("body", "data-opens") == "2", "one stream opened again after the cut"
                assert [
                    await _step_status(page, step) for step in ("metadata", "filesystem", "database", "bootstrap")
                ] == ["done"] * 4
                assert domain in await page.inner_text("#final")
                SCREENSHOT.parent.mkdir(exist_ok=True)
                await page.click("#progress summary")
                await page.screenshot(path=str(SCREENSHOT), full_page=True)
                received = await _received_event_ids(page)

                # A second site from the same page, without reloading it: the form is usable again and the
                # progress starts over, drawing only the new site's events.
                assert await page.is_enabled('button[type="submit"]'), "the form is usable once the site is live"
                second = f"demo-{uuid.uuid4().hex[:8]}.example.com"
                await _build(page, "Built second", second)
                assert await _bar_when_live(page, second) == pytest.approx(1)
                assert await page.title() == "Your site is live"
                second_received = await _received_event_ids(page)
                second_recorded = await _site_event_ids(demo_api, second)
                assert second_received and second_received == [i for i in second_recorded if i >= second_received[0]]
            finally:
                await browser.close()
    finally:
        await proxy.stop()

    # A fresh stream starts at the site's state when it opens; from there, every change the database recorded
    # reached the page exactly once and in order, the ones made while the connection was cut included.
    recorded = await _site_event_ids(demo_api, domain)
    assert received and received == [event_id for event_id in recorded if event_id >= received[0]]


@pytest.mark.long
async def test_a_site_that_cannot_be_built_says_so_in_the_title(demo_api: DemoApi, temporal_client: Client) -> None:
    base_url = f"http://127.0.0.1:{demo_api.port}"
    key = await _api_key(base_url)
    faults = "bootstrap_site=permanent"
    async with own_worker(demo_api.settings, temporal_client, faults=faults), async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = await browser.new_page()
            page.set_default_timeout(PAGE_TIMEOUT_MS)
            await page.goto(f"{base_url}/demo/")
            await page.fill('input[name="api_key"]', key)
            await _build(page, "Never built", f"demo-{uuid.uuid4().hex[:8]}.example.com")
            await page.wait_for_selector('#final[data-status="rolled_back"]')
            assert await page.title() == "Your site could not be built"
            assert await page.is_enabled('button[type="submit"]'), "the form is usable to try again"
        finally:
            await browser.close()


async def test_without_its_script_the_form_never_puts_the_key_in_a_url(demo_api: DemoApi) -> None:
    key = "lk_never-in-a-url"
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = await browser.new_page(java_script_enabled=False)
            page.set_default_timeout(PAGE_TIMEOUT_MS)
            await page.goto(f"http://127.0.0.1:{demo_api.port}/demo/")
            await page.fill('input[name="api_key"]', key)
            await page.fill('input[name="name"]', "No script")
            await page.fill('input[name="domain"]', "no-script.example.com")
            async with page.expect_request(lambda request: request.is_navigation_request()) as submitted:
                await page.click('button[type="submit"]')
            request = await submitted.value
        finally:
            await browser.close()
    assert request.method == "POST"
    assert key not in request.url
    assert f"api_key={key}" in (request.post_data or "")
