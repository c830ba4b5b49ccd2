"""Restart the Temporal dev server (state in a file) with a deletion open: the worker reconnects, the run ends."""

from __future__ import annotations

import asyncio
import time

from devstack.seed import rows_per_service, seed
from tests.conftest import FEW_DOCUMENTS
from tests.drills import figures
from tests.drills.conftest import DrillStack
from tests.drills.probes import rows_left
from tests.eventually import seconds_until
from tests.operators.starts import start_bot_deletion

# The run is held open with a pause (below), so the restart lands mid-run whatever its size.
ROWS = 30_000


async def test_runs_resume_after_temporal_restarts(drill_stack: DrillStack) -> None:
    settings = drill_stack.settings
    seeded = await seed(settings, bots=1, rows=ROWS, documents=FEW_DOCUMENTS)
    bot_id = seeded.bot_ids[0]
    total = sum(rows_per_service(ROWS, FEW_DOCUMENTS).values())
    worker = drill_stack.worker("survivor")
    try:
        # Deleting runs at hundreds of thousands of rows a second, so the run is held open with a pause:
        # the restart then always lands mid-run, and only the restarted server's state can resume it.
        handle = await start_bot_deletion(
            drill_stack.client, settings.task_queue, bot_id=bot_id, account_id=seeded.account_id, paused=True
        )

        async def paused() -> bool:
            progress = await handle.query("progress")
            return bool(progress["status"] == "paused")

        await seconds_until(paused, "the worker picked the run up, paused")

        started = time.monotonic()
        await asyncio.to_thread(drill_stack.restart_temporal)
        downtime = time.monotonic() - started
        assert await rows_left(settings.database_url, [bot_id]) == total

        back = time.monotonic()
        await handle.signal("resume")

        async def advancing() -> bool:
            return await rows_left(settings.database_url, [bot_id]) < total

        resumed = await seconds_until(advancing, "deletion advanced after the restart")
        result = await asyncio.wait_for(handle.result(), timeout=120)
        completed = time.monotonic() - back
        # The same worker process, never restarted by the test, finished the run.
        assert worker.process is not None and worker.process.poll() is None, worker.log()[-2000:]
    finally:
        assert worker.terminate() == 0, worker.log()[-2000:]

    figures.record("temporal dev server restart (stop+start, state file)", downtime)
    figures.record("temporal restart -> deletion advancing again", resumed, f"{total:,} rows")
    figures.record("temporal restart -> deletion completed", completed)
    assert sum(service.deleted for service in result.services.values()) == total
    assert await rows_left(settings.database_url, [bot_id]) == 0
