"""A stuck run's alert, shown on a real stuck run (lifecycle/stuck.py, activities/watch.py).

The reconciler's sweep (watch_work) runs against the real database and alert table, with the clock passed in: at
the run's last progress plus its STUCK_AFTER (short here) it alerts once, a moment before it does not, a second
sweep in the same period adds nothing, and the next period alerts again. The run is read again afterwards: what
kept it busy meanwhile (retries, waits) did not count as progress.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta

from sqlalchemy import text
from temporalio.client import Client

from activities.resources import ActivityResources
from activities.watch import watch_work
from lifecycle.settings import Settings
from lifecycle.stuck import OpenRun, RunKind, open_runs
from tests.eventually import eventually

# STUCK_AFTER_<KIND> for these checks.
SHORT = timedelta(seconds=2)
# How long a run's progress stands before it counts as stopped (its other services finishing, say).
SETTLE = timedelta(seconds=1)
_ALERTS = text("SELECT reason FROM alerts WHERE raised_by LIKE :prefix ORDER BY id")


async def _open_run(resources: ActivityResources, kind: RunKind, subject: str) -> OpenRun | None:
    async with resources.engine.connect() as conn:
        return next((run for run in await open_runs(conn) if run.kind == kind and run.subject == subject), None)


async def _alerts(resources: ActivityResources, kind: RunKind, subject: str) -> list[str]:
    async with resources.engine.connect() as conn:
        rows = await conn.execute(_ALERTS, {"prefix": f"stuck/{kind}/{subject}/%"})
        return [reason for (reason,) in rows]


async def assert_alerts_once_stuck(
    settings: Settings,
    client: Client,
    kind: RunKind,
    subject: str,
    meanwhile: Callable[[], Awaitable[object]] | None = None,
) -> None:
    """`meanwhile` waits for what keeps the run busy without moving it (retried attempts, say)."""
    short = settings.model_copy(update={f"stuck_after_{kind}": SHORT})
    resources = ActivityResources.create(short, client)
    try:

        async def settled() -> OpenRun | None:
            """The open run once its other parts have moved all they could: its progress stands for a second."""
            before = await _open_run(resources, kind, subject)
            await asyncio.sleep(SETTLE.total_seconds())
            return before if before is not None and await _open_run(resources, kind, subject) == before else None

        run = await eventually(settled, f"{kind} {subject} is open and has stopped moving")
        assert await _alerts(resources, kind, subject) == []
        await watch_work(resources, at=run.progressed_at + SHORT - timedelta(milliseconds=1))
        assert await _alerts(resources, kind, subject) == [], "alerted before STUCK_AFTER"
        await watch_work(resources, at=run.progressed_at + SHORT)
        await watch_work(resources, at=run.progressed_at + SHORT + SHORT / 2)
        alerts = await _alerts(resources, kind, subject)
        assert len(alerts) == 1, alerts
        assert f"{kind} {subject} has made no progress since {run.progressed_at.isoformat()}" in alerts[0]
        if meanwhile is not None:
            await meanwhile()
        await watch_work(resources, at=run.progressed_at + 2 * SHORT)
        assert len(await _alerts(resources, kind, subject)) == 2, "a run still stuck alerts again a period later"
        assert await _open_run(resources, kind, subject) == run, "the run moved, or its retries counted as progress"
    finally:
        await resources.close()
