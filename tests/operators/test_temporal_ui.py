"""The Temporal web UI, in Debian's Chromium driven by Playwright: an operator finds a deletion by its BotId
search attribute and reads its summary and current details on the User Metadata tab."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import quote

import pytest_asyncio
from playwright.async_api import Page, async_playwright
from temporalio.client import Client

from devstack.ports import free_port
from devstack.seed import seed
from devstack.temporal_server import TemporalDevServer
from lifecycle.data_converter import DATA_CONVERTER
from lifecycle.deletion.contracts import DeletionStatus
from lifecycle.settings import Settings
from services.catalog import SERVICES
from tests.eventually import eventually
from tests.operators.starts import start_bot_deletion
from tests.workers import own_queue, own_worker

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SCREENSHOT = Path(__file__).resolve().parents[2] / "test-artifacts" / "temporal-ui-deletion.png"
UI_TIMEOUT_MS = 60_000


@pytest_asyncio.fixture
async def ui_server(tmp_path: Path) -> AsyncIterator[TemporalDevServer]:
    """A dev server of its own with the UI on (the session's is headless)."""
    log = tmp_path / "temporal.log"
    server = TemporalDevServer(None, port=free_port(), ui_port=free_port(), log_path=log)
    await asyncio.to_thread(server.start)
    try:
        yield server
    finally:
        await asyncio.to_thread(server.stop)


async def _shows(page: Page, text: str) -> bool:
    """Whether `text` is visible in the page or any of its frames (the UI renders payloads in iframes)."""
    for frame in page.frames:
        if await frame.get_by_text(text, exact=False).count():
            return True
    return False


async def test_ui_shows_summary_and_current_details(ui_server: TemporalDevServer, settings: Settings) -> None:
    client = await Client.connect(ui_server.address, data_converter=DATA_CONVERTER)
    own = own_queue(settings)
    seeded = await seed(settings, bots=1, rows=100)
    bot_id = seeded.bot_ids[0]
    async with own_worker(own, client):
        handle = await start_bot_deletion(
            client, own.task_queue, bot_id=bot_id, account_id=seeded.account_id, paused=True
        )

        async def paused() -> bool:
            status = await handle.query("progress", result_type=DeletionStatus)
            # Paused, and past its first step: it has read the registry, and its details name the services.
            return status.status == "paused" and bool(status.services)

        await eventually(paused, "the deletion is paused, its services read")
        # The first registered service, by name, that has not finished: the project's first, as the run is paused.
        details = f"{min(service.name for service in SERVICES)}: 0 of 0 deleted; paused"
        query = quote(f'BotId="{bot_id}"')
        url = f"http://127.0.0.1:{ui_server.ui_port}/namespaces/default/workflows?query={query}"
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                page = await browser.new_page(viewport={"width": 1400, "height": 1000})
                page.set_default_timeout(UI_TIMEOUT_MS)
                await page.goto(url)
                await page.get_by_role("link", name=handle.id).click()
                await page.get_by_text("User Metadata").first.click()

                async def shown() -> bool:
                    return await _shows(page, f"Delete bot {bot_id}") and await _shows(page, details)

                await eventually(shown, "the UI shows the summary and the current details")
                SCREENSHOT.parent.mkdir(exist_ok=True)
                await page.screenshot(path=str(SCREENSHOT), full_page=True)
            finally:
                await browser.close()
        # The services poll the session's Temporal, not this UI's server: the run could not finish here.
        await handle.terminate("the UI was seen")
