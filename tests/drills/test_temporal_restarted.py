"""Restart the Temporal dev server (state in a file) mid-deletion: the worker reconnects, the run ends."""

from __future__ import annotations

import asyncio
import time

from tests.drills import figures
from tests.drills.conftest import DrillStack
from tests.drills.deletion_run import start_bot_deletion
from tests.drills.probes import rows_left

ROWS = 300_000


async def test_runs_resume_after_temporal_restarts(drill_stack: DrillStack) -> None:
    worker = drill_stack.worker("survivor")
    api = drill_stack.api()
    try:
        run = await start_bot_deletion(drill_stack, api.url, ROWS)
        await run.wait_past(run.total // 10, "deletion got under way")

        started = time.monotonic()
        await asyncio.to_thread(drill_stack.restart_temporal)
        downtime = time.monotonic() - started
        before = await run.deleted()
        assert before < run.total, "the deletion finished before the restart; seed more rows"

        back = time.monotonic()
        resumed = await run.wait_past(before, "deletion advanced after the restart")
        await asyncio.wait_for(run.handle.result(), timeout=120)
        completed = time.monotonic() - back
        # The same worker process, never restarted by the test, finished the run.
        assert worker.process is not None and worker.process.poll() is None, worker.log()[-2000:]
    finally:
        assert worker.terminate() == 0, worker.log()[-2000:]
        api.terminate()

    figures.record("temporal dev server restart (stop+start, state file)", downtime)
    figures.record("temporal restart -> deletion advancing again", resumed, f"{run.total:,} rows")
    figures.record("temporal restart -> deletion completed", completed)
    assert await rows_left(drill_stack.settings.database_url, [run.bot_id]) == 0
    assert await run.alerts_raised() == 0
