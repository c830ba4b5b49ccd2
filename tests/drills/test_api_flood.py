"""200 concurrent identical requests against a real API process: one workflow, one site."""

from __future__ import annotations

import asyncio
import time
import uuid

import httpx

from lifecycle.deletion.workflow_types import bot_deletion_id
from lifecycle.sites.workflow_types import site_creation_id
from tests.conftest import ADMIN_TOKEN
from tests.db import fetchval
from tests.drills import figures
from tests.drills.conftest import DrillStack
from tests.drills.deletion_run import start_bot_deletion
from tests.temporal_cli import TemporalCli

FLOOD = 200
# The client's connection pool: many requests in flight at once without exhausting the machine's sockets.
CONNECTIONS = 50
SITE_ACCOUNTS = 10


def _runs(stack: DrillStack, workflow_id: str) -> int:
    cli = TemporalCli(stack.temporal.address)
    return len(cli.jsonl("workflow", "list", "--query", f'WorkflowId="{workflow_id}"'))


async def test_flood_of_identical_requests(drill_stack: DrillStack) -> None:
    worker = drill_stack.worker("flood")
    # Without the account's rate limit (tests/test_account_limits.py): the flood is meant to reach the handlers.
    api = drill_stack.api(ACCOUNT_REQUESTS_PER_SECOND="0")
    limits = httpx.Limits(max_connections=CONNECTIONS)
    try:
        # Generous: on two shared cores the last of 200 queued requests can wait a long time for a connection.
        async with httpx.AsyncClient(base_url=api.url, limits=limits, timeout=180) as http:
            run = await start_bot_deletion(drill_stack, api.url, rows=1_000)
            started = time.monotonic()
            deletes = await asyncio.gather(
                *(http.delete(f"/bots/{run.bot_id}", headers=run.headers) for _ in range(FLOOD))
            )
            delete_seconds = time.monotonic() - started
            assert {r.status_code for r in deletes} == {202}, {r.text for r in deletes}

            domain = f"flood-{uuid.uuid4().hex[:10]}.example.com"
            keys = [await _account_key(http, n) for n in range(SITE_ACCOUNTS)]
            started = time.monotonic()
            creates = await asyncio.gather(
                *(
                    http.post(
                        "/sites",
                        json={"name": "Flood", "domain": domain},
                        headers={"Authorization": f"Bearer {keys[n % SITE_ACCOUNTS]}"},
                    )
                    for n in range(FLOOD)
                )
            )
            create_seconds = time.monotonic() - started
            accepted = [r for r in creates if r.status_code == 202]
            assert {r.status_code for r in creates} <= {202, 409}, [r.text for r in creates]
            # Only the winning account gets its site (repeats of its own request included); others get 409.
            assert len({r.json()["id"] for r in accepted}) == 1
            site_id = accepted[0].json()["id"]
            await asyncio.wait_for(run.handle.result(), timeout=120)
            await asyncio.wait_for(
                drill_stack.client.get_workflow_handle(site_creation_id(site_id)).result(), timeout=120
            )
    finally:
        # Stopped, not asserted on, here: an assertion in `finally` would replace the body's own failure.
        worker_exit = worker.terminate()
        api.terminate()
    assert worker_exit == 0, worker.log()[-2000:]

    figures.record(f"{FLOOD} concurrent DELETE /bots/{{id}} answered", delete_seconds)
    figures.record(f"{FLOOD} concurrent POST /sites for one domain answered", create_seconds)
    # The seeding request plus the flood: all one execution.
    assert _runs(drill_stack, bot_deletion_id(run.bot_id)) == 1
    assert _runs(drill_stack, site_creation_id(site_id)) == 1
    sites = await fetchval(drill_stack.settings.database_url, "SELECT count(*) FROM sites WHERE domain = $1", domain)
    assert sites == 1


async def _account_key(http: httpx.AsyncClient, n: int) -> str:
    created = await http.post(
        "/accounts",
        json={"name": f"Flooder {n}", "email": f"flooder-{n}-{uuid.uuid4().hex[:6]}@example.com"},
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
    )
    assert created.status_code == 201, created.text
    key: str = created.json()["api_key"]
    return key
