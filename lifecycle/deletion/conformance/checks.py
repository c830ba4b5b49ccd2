"""The deletion checks, each on subjects of its own: a subject never held, requests with a field the contract does
not have, a deletion in slices of `max_rows`, a slice asked twice, a slice abandoned and asked again, and a slice
under `rows_per_second` and `max_duration_ms`. Rows removed are read with VerifySubjectErased, so a count a
service reports is compared with what it counts as gone, never with itself."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence

from lifecycle.deletion.conformance.report import Result, failed, judged, passed
from lifecycle.deletion.conformance.seeding import SeedFailed
from lifecycle.deletion.conformance.subjects import MOST_SLICES, KitRun, NeverDone, account, bot
from lifecycle.deletion.conformance.transport import CallFailed
from lifecycle.deletion.conformance.wire import AnswerUnreadable
from lifecycle.deletion.v1.service_pb2 import DeleteRequest, DeleteResponse, ExportRequest, Subject, VerifyResponse

# The deletion in slices: a few slices of SLICE_ROWS, the last one short.
SLICED_ROWS = 100
SLICE_ROWS = 40
# The slice asked twice: the second slice of a deletion of RETRIED_ROWS.
RETRIED_ROWS = 100
# The interrupted slice: paced as the paced one, and abandoned once some of its rows went (looked at every
# PROGRESS_POLL seconds, for PROGRESS_WITHIN at most); the service may go on with it for INTERRUPTED_DURATION_MS.
INTERRUPTED_ROWS = 300
INTERRUPTED_DURATION_MS = 3_000
PROGRESS_POLL = 0.1
PROGRESS_WITHIN = 10.0
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

CheckFailure = (CallFailed, AnswerUnreadable, SeedFailed, NeverDone)


async def guarded(checks: Sequence[str], run: Callable[[], Awaitable[list[Result]]]) -> list[Result]:
    """The checks' results, or each of them failed with the reason a call or the seed failed."""
    try:
        return await run()
    except CheckFailure as err:
        return [failed(check, str(err)) for check in checks]


def removed(before: VerifyResponse, after: VerifyResponse) -> tuple[int, int]:
    """Rows and files gone between two counts."""
    return before.remaining_rows - after.remaining_rows, before.remaining_files - after.remaining_files


async def never_held(kit: KitRun) -> list[Result]:
    deletion_id, subject = kit.deletion_id("never-held"), bot()
    held = await kit.calls.verify(deletion_id, subject)
    answers = await kit.delete_until_done(deletion_id, subject, max_rows=SLICE_ROWS)
    counted = [(answer.rows_deleted, answer.files_deleted) for answer in answers]
    ok = (held.remaining_rows, held.remaining_files) == (0, 0) and not any(rows or files for rows, files in counted)
    return [
        judged(
            "never-held",
            ok,
            f"a bot it never held: VerifySubjectErased {held.remaining_rows} rows, {held.remaining_files} files;"
            f" DeleteSubjectData done in {len(answers)} slice(s), answering {counted}",
        )
    ]


async def unknown_fields(kit: KitRun) -> list[Result]:
    deletion_id, subject = kit.deletion_id("unknown-fields"), bot()
    await kit.calls.verify(deletion_id, subject, with_unknown_field=True)
    await kit.calls.delete(
        DeleteRequest(deletion_id=deletion_id, subject=subject, max_rows=SLICE_ROWS), with_unknown_field=True
    )
    export = ExportRequest(
        export_id=str(uuid.uuid4()),
        subject=account(),
        object_key_prefix=f"conformance/{kit.run_id}/unknown-fields/",
        bot_ids=[subject.id],
    )
    await kit.calls.export(export, with_unknown_field=True)
    return [
        passed(
            "unknown-fields",
            "VerifySubjectErased, DeleteSubjectData and ExportSubjectData each took a request carrying a field"
            " the contract does not have",
        )
    ]


async def sliced(kit: KitRun) -> list[Result]:
    """slices, max-rows, counts: a deletion in slices of SLICE_ROWS, each from the cursor before, counted after
    each slice."""
    deletion_id, (subject, _) = kit.deletion_id("sliced"), await kit.seeded(SLICED_ROWS)
    held = before = await kit.calls.verify(deletion_id, subject)
    largest, mismatches = 0, []
    answer, cursor, slices = DeleteResponse(), "", 0
    while not answer.done and slices < MOST_SLICES:
        request = DeleteRequest(deletion_id=deletion_id, subject=subject, cursor=cursor, max_rows=SLICE_ROWS)
        answer, slices = await kit.calls.delete(request), slices + 1
        after = await kit.calls.verify(deletion_id, subject)
        rows, files = removed(before, after)
        largest = max(largest, rows)
        if (answer.rows_deleted, answer.files_deleted) != (rows, files):
            mismatches.append(
                f"slice {slices} answered {answer.rows_deleted} rows, {answer.files_deleted} files"
                f" where {rows} rows, {files} files went"
            )
        before, cursor = after, answer.cursor
    erased = (before.remaining_rows, before.remaining_files) == (0, 0)
    counts = [] if held.remaining_rows == SLICED_ROWS else [f"{held.remaining_rows} rows counted of {SLICED_ROWS}"]
    counts += mismatches + ([] if erased else [f"{before.remaining_rows} rows, {before.remaining_files} files left"])
    return [
        judged(
            "slices",
            answer.done and erased,
            f"{SLICED_ROWS} rows, slices of max_rows {SLICE_ROWS} each from the cursor before:"
            f" {'done' if answer.done else 'not done'} after {slices}, with {before.remaining_rows} rows,"
            f" {before.remaining_files} files left",
        ),
        judged("max-rows", largest <= SLICE_ROWS, f"the largest slice removed {largest} rows, max_rows {SLICE_ROWS}"),
        judged(
            "counts",
            not counts,
            "; ".join(counts)
            or f"VerifySubjectErased counted the {SLICED_ROWS} seeded rows and {held.remaining_files} files;"
            " each slice answered what went, 0 left at done",
        ),
    ]


async def retried(kit: KitRun) -> list[Result]:
    """retry: the second slice asked twice, as after an answer lost to a crash; the caller keeps the second answer."""
    deletion_id, (subject, _) = kit.deletion_id("retried"), await kit.seeded(RETRIED_ROWS)
    held = await kit.calls.verify(deletion_id, subject)
    first = await kit.calls.delete(DeleteRequest(deletion_id=deletion_id, subject=subject, max_rows=SLICE_ROWS))
    second = DeleteRequest(deletion_id=deletion_id, subject=subject, cursor=first.cursor, max_rows=SLICE_ROWS)
    lost = await kit.calls.delete(second)
    kept = await kit.calls.delete(second)
    since_cursor, _ = removed(held, await kit.calls.verify(deletion_id, subject))
    since_cursor -= first.rows_deleted
    rest = [] if kept.done else await kit.delete_until_done(deletion_id, subject, kept.cursor, SLICE_ROWS)
    left = await kit.calls.verify(deletion_id, subject)
    counted = first.rows_deleted + kept.rows_deleted + sum(answer.rows_deleted for answer in rest)
    total = held.remaining_rows
    if kept.rows_deleted > since_cursor:
        figure = f"the slice asked again answered {kept.rows_deleted} rows, where {since_cursor} went since its cursor"
    elif counted > total:
        figure = f"the answers kept count {counted} rows of the {total} held: rows counted twice"
    elif counted not in (total, total - lost.rows_deleted):
        figure = f"the answers kept count {counted} rows of the {total} held, {total - counted} uncounted"
    elif left.remaining_rows or left.remaining_files:
        figure = f"{left.remaining_rows} rows, {left.remaining_files} files left after done"
    else:
        lost_rows = (
            "the lost answer's rows included"
            if counted == total
            else f"the lost answer's {lost.rows_deleted} rows uncounted, as a service without a ledger loses them"
        )
        return [passed("retry", f"a slice asked twice: the answers kept count {counted} of {total} rows, {lost_rows}")]
    return [failed("retry", figure)]


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
