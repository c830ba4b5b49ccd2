"""Stop PostgreSQL for 20 s mid-deletion: the API answers 503 problems; activities retry, then complete."""

from __future__ import annotations

import asyncio
import time

import httpx

from tests.drills import figures
from tests.drills.conftest import DrillStack
from tests.drills.deletion_run import start_bot_deletion
from tests.drills.probes import rows_left

ROWS = 200_000
OUTAGE_SECONDS = 20.0


async def test_deletion_rides_out_a_postgres_outage(drill_stack: DrillStack) -> None:
    worker = drill_stack.worker("outage")
    api = drill_stack.api()
    try:
        run = await start_bot_deletion(drill_stack, api.url, ROWS)
        await run.wait_past(run.total // 10, "deletion got under way")

        stopped = time.monotonic()
        await asyncio.to_thread(drill_stack.postgres.stop)
        try:
            async with httpx.AsyncClient(base_url=api.url) as http:
                during = await http.get(f"/bots/{run.bot_id}/deletion", headers=run.headers)
            await asyncio.sleep(max(0.0, OUTAGE_SECONDS - (time.monotonic() - stopped)))
        finally:
            await asyncio.to_thread(drill_stack.postgres.start)
        assert during.status_code == 503, during.text
        assert during.headers["content-type"] == "application/problem+json"
        assert during.headers["retry-after"]

        back = time.monotonic()
        before = await run.deleted()
        resumed = await run.wait_past(before, "deletion advanced after PostgreSQL came back")
        await asyncio.wait_for(run.handle.result(), timeout=120)
        completed = time.monotonic() - back
        async with httpx.AsyncClient(base_url=api.url) as http:
            status = await http.get(f"/bots/{run.bot_id}/deletion", headers=run.headers)
        assert status.status_code == 200 and status.json()["status"] == "completed", status.text
    finally:
        assert worker.terminate() == 0, worker.log()[-2000:]
        api.terminate()

    figures.record("postgres back after 20 s outage -> deletion advancing", resumed, f"{run.total:,} rows")
    figures.record("postgres back after 20 s outage -> deletion completed", completed)
    assert await rows_left(drill_stack.settings.database_url, [run.bot_id]) == 0
    # Retried as transient throughout: no poison pill, no operator alert.
    assert await run.alerts_raised() == 0
