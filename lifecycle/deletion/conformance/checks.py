"""The deletion checks, each on subjects of its own: a subject never held, requests with a field the contract does
not have, a deletion in slices of `max_rows`, and a slice asked twice (paced_checks.py has those under a budget).
Rows removed are read with VerifySubjectErased, so a count a service reports is compared with what it counts as
gone, never with itself."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Sequence

from lifecycle.deletion.conformance.report import Result, failed, judged, passed
from lifecycle.deletion.conformance.seeding import SeedFailed
from lifecycle.deletion.conformance.subjects import MOST_SLICES, KitRun, NeverDone, account, bot
from lifecycle.deletion.conformance.transport import CallFailed
from lifecycle.deletion.conformance.wire import AnswerUnreadable
from lifecycle.deletion.v1.service_pb2 import DeleteRequest, DeleteResponse, ExportRequest, VerifyResponse

# The deletion in slices: a few slices of SLICE_ROWS, the last one short.
SLICED_ROWS = 100
SLICE_ROWS = 40
# The slice asked twice: the second slice of a deletion of RETRIED_ROWS.
RETRIED_ROWS = 100
# What a check fails with: a call the service failed or answered unreadably, a seed that failed, no `done`.
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
    rows = sum(answer.rows_deleted for answer in answers)
    files = sum(answer.files_deleted for answer in answers)
    return [
        judged(
            "never-held",
            (held.remaining_rows, held.remaining_files, rows, files) == (0, 0, 0, 0),
            f"a bot it never held: VerifySubjectErased {held.remaining_rows} rows, {held.remaining_files} files;"
            f" DeleteSubjectData done in {len(answers)} slice(s), counting {rows} rows, {files} files",
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
