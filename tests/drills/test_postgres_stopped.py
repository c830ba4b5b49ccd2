"""Stop PostgreSQL for 20 s mid-deletion: the API answers 503 problems; activities retry, then complete."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHandle

from devstack.seed import rows_per_service, seed
from lifecycle.deletion.contracts import MIN_BATCH_SIZE
from tests.conftest import FEW_DOCUMENTS
from tests.drills import figures
from tests.drills.conftest import DrillStack
from tests.drills.probes import rows_left
from tests.eventually import seconds_until
from tests.operators.starts import start_bot_deletion

ROWS = 200_000
OUTAGE_SECONDS = 20.0
# How a failure reads once the worker has shortened it (activities/errors.short_message): the error's type, then
# its first line, e.g. "ConnectionRefusedError: [Errno 111] Connect call failed".
ONE_LINE_ERROR = re.compile(r"^[A-Za-z_][\w.]*: .+$")


async def test_deletion_rides_out_a_postgres_outage(drill_stack: DrillStack) -> None:
    settings = drill_stack.settings
    seeded = await seed(settings, bots=1, rows=ROWS, documents=FEW_DOCUMENTS)
    bot_id = seeded.bot_ids[0]
    total = sum(rows_per_service(ROWS, FEW_DOCUMENTS).values())
    headers = {"Authorization": f"Bearer {seeded.api_key}"}
    worker = drill_stack.worker("outage")
    api = drill_stack.api()
    try:
        # The smallest batches (one durable commit per 100 rows) keep the run going long enough that the
        # outage lands mid-deletion on a fast machine too.
        handle = await start_bot_deletion(
            drill_stack.client,
            settings.task_queue,
            bot_id=bot_id,
            account_id=seeded.account_id,
            batch_size=MIN_BATCH_SIZE,
        )

        async def deleted() -> int:
            return total - await rows_left(settings.database_url, [bot_id])

        await seconds_until(_past(deleted, total // 10), "deletion got under way")

        stopped = time.monotonic()
        await asyncio.to_thread(drill_stack.postgres.stop)
        try:
            async with httpx.AsyncClient(base_url=api.url) as http:
                during = await http.get("/bots", headers=headers)
            down_for = OUTAGE_SECONDS - (time.monotonic() - stopped)
            await asyncio.sleep(max(0.0, down_for))  # the fault itself: PostgreSQL stays down for the whole outage
            seen_by_operators = await _last_failures(handle)
        finally:
            await asyncio.to_thread(drill_stack.postgres.start)
        assert during.status_code == 503, during.text
        assert during.headers["content-type"] == "application/problem+json"
        assert during.headers["retry-after"]

        back = time.monotonic()
        before = await deleted()
        assert before < total, "the deletion finished before the outage; seed more rows"
        resumed = await seconds_until(_past(deleted, before), "deletion advanced after PostgreSQL came back")
        result = await asyncio.wait_for(handle.result(), timeout=180)
        completed = time.monotonic() - back
    finally:
        assert worker.terminate() == 0, worker.log()[-2000:]
        api.terminate()

    figures.record("postgres back after 20 s outage -> deletion advancing", resumed, f"{total:,} rows")
    figures.record("postgres back after 20 s outage -> deletion completed", completed)
    assert sum(service.deleted for service in result.services.values()) == total
    assert await rows_left(settings.database_url, [bot_id]) == 0
    # Retried as transient throughout: no poison pill, no operator alert.
    assert await _alerts(handle) == 0
    # What the UI and `temporal workflow describe` showed of the failing calls during the outage: the error in
    # a line, not the server's stand-in for a failure too large to keep with a pending activity.
    assert seen_by_operators, "no call had failed yet when the outage ended"
    assert all(ONE_LINE_ERROR.match(message) for message in seen_by_operators), seen_by_operators


async def _last_failures(handle: WorkflowHandle[Any, Any]) -> list[str]:
    """The last failure of each pending activity that has one, as describe shows it."""
    pending = (await handle.describe()).raw_description.pending_activities
    return [activity.last_failure.message for activity in pending if activity.HasField("last_failure")]


def _past(deleted: Callable[[], Awaitable[int]], rows: int) -> Callable[[], Awaitable[bool]]:
    async def probe() -> bool:
        return await deleted() > rows

    return probe


async def _alerts(handle: WorkflowHandle[Any, Any]) -> int:
    """Operator alerts in the history: a transient outage must never reach one."""
    return len(
        [
            event
            async for event in handle.fetch_history_events()
            if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
            and event.activity_task_scheduled_event_attributes.activity_type.name == "raise_alert"
        ]
    )
