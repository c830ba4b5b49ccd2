"""The per-deletion ledger: one row per slice of a deletion, written in the same transaction as each batch that
slice deletes, so the service can answer a slice from what it committed rather than from what one call saw.

A slice is numbered; the cursor a response carries is its number. A request whose cursor names the latest slice
(or none, at first) begins a new one. A request whose cursor is older names a slice whose answer never reached the
caller (the worker died after a batch committed, or the answer was lost on the way): the call continues that
latest slice instead, and answers the rows of every slice after the request's cursor. So a retried slice counts
no row twice, and no committed row goes uncounted.

A slice also holds where the deletion stands in the service's tables (`table_index`, `after_id`), which the next
slice starts from; after a slice that finished every table, a new slice starts again from the bottom, since a
caller that asks again after `done` has found rows left (a writer raced the deletion).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

LEDGER_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS deletion_slices (deletion_id text NOT NULL, slice integer NOT NULL,"
    " bot_id uuid NOT NULL, rows_deleted bigint NOT NULL DEFAULT 0, files_deleted bigint NOT NULL DEFAULT 0,"
    " table_index integer NOT NULL DEFAULT 0, after_id bigint NOT NULL DEFAULT 0,"
    " done boolean NOT NULL DEFAULT false, updated_at timestamptz NOT NULL DEFAULT now(),"
    " PRIMARY KEY (deletion_id, slice))",
)

_LATEST = text(
    "SELECT slice, table_index, after_id, done FROM deletion_slices WHERE deletion_id = :deletion"
    " ORDER BY slice DESC LIMIT 1"
)
_BEGIN = text(
    "INSERT INTO deletion_slices (deletion_id, slice, bot_id, table_index, after_id)"
    " VALUES (:deletion, :slice, :bot, :table_index, :after_id)"
)
_POSITION = "SELECT table_index, after_id FROM deletion_slices WHERE deletion_id = :deletion AND slice = :slice"
_READ_POSITION = text(_POSITION)
_LOCK_POSITION = text(f"{_POSITION} FOR UPDATE")
_RECORD = text(
    "UPDATE deletion_slices SET rows_deleted = rows_deleted + :rows, files_deleted = files_deleted + :files,"
    " table_index = :table_index, after_id = :after_id, done = :done, updated_at = now()"
    " WHERE deletion_id = :deletion AND slice = :slice"
)
_UNANSWERED = text(
    "SELECT coalesce(sum(rows_deleted), 0), coalesce(sum(files_deleted), 0) FROM deletion_slices"
    " WHERE deletion_id = :deletion AND slice > :answered"
)


class CursorRefused(ValueError):
    """A cursor this service never returned."""


def answered_slice(cursor: str) -> int:
    """The last slice whose answer the caller holds: the number a response carried, 0 before the first."""
    if not cursor:
        return 0
    if not cursor.isdigit():
        raise CursorRefused("the cursor is not one this service returned")
    return int(cursor)


@dataclass(frozen=True)
class Position:
    """Where a slice stands: the table it is in (an index into the service's tables) and the highest id deleted
    there; `table_index` equal to the number of tables means every table is done."""

    table_index: int
    after_id: int


@dataclass(frozen=True)
class Slice:
    number: int
    done: bool


async def open_slice(conn: AsyncConnection, deletion_id: str, bot_id: str, answered: int) -> Slice:
    """The slice this call works in: the latest one if its answer was lost, else a new one. The caller commits."""
    latest = (await conn.execute(_LATEST, {"deletion": deletion_id})).first()
    if latest is not None and answered < latest.slice:
        return Slice(latest.slice, latest.done)
    number = 1 if latest is None else latest.slice + 1
    start = Position(0, 0) if latest is None or latest.done else Position(latest.table_index, latest.after_id)
    await conn.execute(
        _BEGIN,
        {
            "deletion": deletion_id,
            "slice": number,
            "bot": bot_id,
            "table_index": start.table_index,
            "after_id": start.after_id,
        },
    )
    return Slice(number, done=False)


async def lock_position(conn: AsyncConnection, deletion_id: str, slice_number: int) -> Position:
    """Where the slice stands, locked until the batch's transaction ends: two calls of one slice take turns."""
    row = (await conn.execute(_LOCK_POSITION, {"deletion": deletion_id, "slice": slice_number})).one()
    return Position(row.table_index, row.after_id)


async def read_position(conn: AsyncConnection, deletion_id: str, slice_number: int) -> Position:
    """Where the slice stands, unlocked: a row lock writes to the row, and its commit waits for the WAL flush
    like any write, which the neighbours of a deletion feel. Good for choosing what to pace, never for a batch."""
    row = (await conn.execute(_READ_POSITION, {"deletion": deletion_id, "slice": slice_number})).one()
    return Position(row.table_index, row.after_id)


async def record_batch(
    conn: AsyncConnection,
    deletion_id: str,
    slice_number: int,
    *,
    rows: int,
    files: int,
    position: Position,
    done: bool,
) -> None:
    """Add a batch to its slice, in the batch's own transaction (the caller commits both together)."""
    await conn.execute(
        _RECORD,
        {
            "deletion": deletion_id,
            "slice": slice_number,
            "rows": rows,
            "files": files,
            "table_index": position.table_index,
            "after_id": position.after_id,
            "done": done,
        },
    )


async def unanswered(conn: AsyncConnection, deletion_id: str, answered: int) -> tuple[int, int]:
    """Rows and files of every slice after `answered`: what this call's answer must count."""
    rows, files = (await conn.execute(_UNANSWERED, {"deletion": deletion_id, "answered": answered})).one()
    return int(rows), int(files)
