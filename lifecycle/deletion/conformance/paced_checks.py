"""The checks under a budget, each on a subject of its own: a slice under `rows_per_second` and `max_duration_ms`,
timed from the kit (which only adds to the time it takes), and a slow slice abandoned once rows went and asked
again from its cursor while the service may still be working on it."""

from __future__ import annotations

import asyncio
import contextlib
import time

from lifecycle.deletion.conformance.checks import removed
from lifecycle.deletion.conformance.report import Result, judged
from lifecycle.deletion.conformance.subjects import KitRun
from lifecycle.deletion.v1.service_pb2 import DeleteRequest, DeleteResponse, Subject, VerifyResponse

# The paced slice: far more rows than a conforming service deletes within PACED_DURATION_MS at PACED_RATE (it may
# start with a batch of a second's worth), so that one that paces but runs on until max_rows or the end takes
# twice the bound. PACED_RATE is at least the smallest batch of the project's services (MIN_BATCH_SIZE, 100 rows).
PACED_ROWS = 500
PACED_RATE = 100
PACED_MAX_ROWS = 1_000
PACED_DURATION_MS = 1_000
# A second of the budget at once is a burst, not a breach: a batch of a second's worth may go before the first wait.
BURST_SECONDS = 1.0
# "About" max_duration_ms: the last batch, and a wait for budget before it, may run over.
DURATION_SLACK_SECONDS = 1.5

# The interrupted slice: paced as the paced one, and abandoned once some of its rows went (looked at every
# PROGRESS_POLL seconds, for PROGRESS_WITHIN at most); the service may go on with it for INTERRUPTED_DURATION_MS.
INTERRUPTED_ROWS = 300
INTERRUPTED_DURATION_MS = 3_000
PROGRESS_POLL = 0.1
PROGRESS_WITHIN = 10.0


async def paced(kit: KitRun) -> list[Result]:
    """rows-per-second, max-duration: one slice under a small budget, timed from the kit (which only adds to it)."""
    deletion_id, (subject, _) = kit.deletion_id("paced"), await kit.seeded(PACED_ROWS)
    held = await kit.calls.verify(deletion_id, subject)
    request = DeleteRequest(
        deletion_id=deletion_id,
        subject=subject,
        max_rows=PACED_MAX_ROWS,
        rows_per_second=PACED_RATE,
        max_duration_ms=PACED_DURATION_MS,
    )
    started = time.monotonic()
    answer = await kit.calls.delete(request)
    elapsed = time.monotonic() - started
    rows, _ = removed(held, await kit.calls.verify(deletion_id, subject))
    allowed = PACED_RATE * (elapsed + BURST_SECONDS)
    bound = PACED_DURATION_MS / 1000 + DURATION_SLACK_SECONDS
    if not answer.done:
        await kit.delete_until_done(deletion_id, subject, answer.cursor)
    return [
        judged(
            "rows-per-second",
            rows <= allowed,
            f"{rows} rows went in {elapsed:.1f} s at rows_per_second {PACED_RATE}"
            f" ({allowed:.0f} at most, a second's burst included)",
        ),
        judged(
            "max-duration",
            elapsed <= bound,
            f"a slice of max_duration_ms {PACED_DURATION_MS} (max_rows {PACED_MAX_ROWS}) answered in {elapsed:.1f} s"
            f" ({bound:.1f} s at most)",
        ),
    ]


async def interrupted(kit: KitRun) -> list[Result]:
    """interrupted: a slow slice abandoned once rows went, and asked again from the same cursor while the service
    may still be working on it, as after a call that timed out; then on to `done`."""
    deletion_id, (subject, _) = kit.deletion_id("interrupted"), await kit.seeded(INTERRUPTED_ROWS)
    held = await kit.calls.verify(deletion_id, subject)
    slow = DeleteRequest(
        deletion_id=deletion_id,
        subject=subject,
        max_rows=PACED_MAX_ROWS,
        rows_per_second=PACED_RATE,
        max_duration_ms=INTERRUPTED_DURATION_MS,
    )
    call = asyncio.create_task(kit.calls.delete(slow))
    gone = await _rows_gone(kit, deletion_id, subject, held, call)
    call.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await call
    answers = await kit.delete_until_done(deletion_id, subject)
    left = await kit.calls.verify(deletion_id, subject)
    counted = sum(answer.rows_deleted for answer in answers)
    return [
        judged(
            "interrupted",
            counted <= held.remaining_rows and (left.remaining_rows, left.remaining_files) == (0, 0),
            f"a slice abandoned after {gone} of {held.remaining_rows} rows went, asked again from its cursor:"
            f" {counted} rows counted after it, {left.remaining_rows} rows, {left.remaining_files} files left",
        )
    ]


async def _rows_gone(
    kit: KitRun, deletion_id: str, subject: Subject, held: VerifyResponse, call: asyncio.Task[DeleteResponse]
) -> int:
    """Rows gone, once some went, the call ended, or PROGRESS_WITHIN passed."""
    deadline = time.monotonic() + PROGRESS_WITHIN
    while True:
        rows, _ = removed(held, await kit.calls.verify(deletion_id, subject))
        if rows or call.done() or time.monotonic() > deadline:
            return rows
        await asyncio.sleep(PROGRESS_POLL)
