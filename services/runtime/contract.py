"""The deletion contract's calls (proto/lifecycle/deletion/v1/service.proto) over a service's own tables:
DeleteSubjectData in key-range batches recorded in the ledger, VerifySubjectErased by exact counts (estimated
above a size for a preview that allows it), and ExportSubjectData as one JSON-lines object of the account's bots'
rows (services/runtime/export.py)."""

from __future__ import annotations

import asyncio
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.errors import as_transient, is_transient
from activities.heartbeat import heartbeats
from activities.step_log import step_counts, step_skipped
from lifecycle.deletion.contracts import DEFAULT_BATCH_SIZE, DELETER_SLICE
from lifecycle.deletion.v1.service_pb2 import (
    THROTTLE_AUTOVACUUM,
    THROTTLE_BUDGET,
    THROTTLE_LOCK_WAITS,
    THROTTLE_REPLICA_LAG,
    THROTTLE_UNSPECIFIED,
    DeleteRequest,
    DeleteResponse,
    ExportRequest,
    ExportResponse,
    Subject,
    VerifyRequest,
    VerifyResponse,
)
from lifecycle.object_store import ObjectStore
from lifecycle.statuses import Throttle
from services.runtime import ledger
from services.runtime.export import CONTENT_TYPE, ExportWriter, PartFile
from services.runtime.ledger import CursorRefused, Position
from services.runtime.pace import Pacer
from services.runtime.tables import ESTIMATE_SAMPLE, TableDeleter

# No bound on a call's rows but its duration.
UNBOUNDED = 2**63

_THROTTLES = {
    None: THROTTLE_UNSPECIFIED,
    Throttle.BUDGET: THROTTLE_BUDGET,
    Throttle.LOCK_WAITS: THROTTLE_LOCK_WAITS,
    Throttle.AUTOVACUUM: THROTTLE_AUTOVACUUM,
    Throttle.REPLICA_LAG: THROTTLE_REPLICA_LAG,
}


def bot_of(subject: Subject) -> str:
    if subject.kind != Subject.KIND_BOT or not subject.id:
        # The contract: a subject this service cannot act on is a non-retryable error, for an operator to see.
        raise ApplicationError(f"unsupported subject {Subject.Kind.Name(subject.kind)}", non_retryable=True)
    return subject.id


def account_bots(request: ExportRequest) -> list[str]:
    """The bots an export names, checked to be ids: anything else is a caller's error, never retried."""
    if request.subject.kind != Subject.KIND_ACCOUNT or not request.subject.id:
        raise ApplicationError(f"unsupported subject {Subject.Kind.Name(request.subject.kind)}", non_retryable=True)
    try:
        return [str(uuid.UUID(bot_id)) for bot_id in request.bot_ids]
    except ValueError:
        raise ApplicationError("a bot id is not a UUID", non_retryable=True) from None


class ContractService:
    """One service's implementation of the contract, over `tables` (deleted and exported in that order) in
    `engine`'s database; `name` is its registered name, which names its export objects."""

    def __init__(
        self,
        engine: AsyncEngine,
        tables: Sequence[TableDeleter],
        *,
        name: str,
        objects: ObjectStore,
        export_batch_rows: int,
    ) -> None:
        self._engine = engine
        self._tables = tuple(tables)
        self._name = name
        self._objects = objects
        self._export = ExportWriter(engine, self._tables, objects, export_batch_rows)

    @property
    def activities(self) -> list[Callable[..., Any]]:
        """The contract's three calls, for a worker on the service's queue."""
        return [self.delete_subject_data, self.verify_subject_erased, self.export_subject_data]

    @activity.defn(name="DeleteSubjectData")
    async def delete_subject_data(self, request: DeleteRequest) -> DeleteResponse:
        """Batches until `max_rows`, `max_duration_ms` (5 s by default) or the end; each batch's DELETE and its
        ledger row commit together, and the answer is read back from the ledger."""
        bot_id = bot_of(request.subject)
        try:
            answered = ledger.answered_slice(request.cursor)
        except CursorRefused as refused:
            raise ApplicationError(str(refused), type="CursorRefused", non_retryable=True) from None
        started = time.monotonic()
        duration = request.max_duration_ms / 1000 if request.max_duration_ms else DELETER_SLICE.total_seconds()
        deadline = started + duration
        # Rows this call may delete (0: as many as the duration allows), and rows per batch.
        allowance = request.max_rows or UNBOUNDED
        batch_rows = request.batch_rows or DEFAULT_BATCH_SIZE
        pacer = Pacer(request.rows_per_second, heartbeat=activity.heartbeat)
        try:
            async with self._engine.connect() as conn:
                current = await ledger.open_slice(conn, request.deletion_id, bot_id, answered)
                await conn.commit()
                if current.done:
                    # The slice an earlier attempt finished, whose answer was lost: answered again from the ledger.
                    step_skipped("already deleted")
                deleted_here = 0
                done = current.done
                while not done and deleted_here < allowance and time.monotonic() < deadline:
                    rows, done = await self._next_batch(
                        conn,
                        request.deletion_id,
                        current.number,
                        bot_id,
                        pacer,
                        min(batch_rows, allowance - deleted_here),
                    )
                    deleted_here += rows
                    # Raises CancelledError here if the caller cancelled us: the check between batches.
                    activity.heartbeat()
                rows, files = await ledger.unanswered(conn, request.deletion_id, answered)
                remaining, files_left = (
                    (0, 0)
                    if done
                    else await self._estimate_remaining(conn, request.deletion_id, current.number, bot_id)
                )
        except Exception as exc:
            if is_transient(exc):
                raise as_transient(exc) from exc
            raise
        elapsed = time.monotonic() - started
        step_counts(rows_deleted=deleted_here, rows_answered=rows, files_answered=files, done=done)
        return DeleteResponse(
            rows_deleted=rows,
            files_deleted=files,
            cursor=str(current.number),
            done=done,
            remaining_rows_estimate=remaining,
            remaining_files_estimate=files_left,
            measured_rows_per_second=deleted_here / elapsed if deleted_here and elapsed > 0 else 0.0,
            throttled=THROTTLE_UNSPECIFIED if done else _THROTTLES[pacer.throttled],
        )

    async def _next_batch(
        self, conn: AsyncConnection, deletion_id: str, slice_number: int, bot_id: str, pacer: Pacer, most: int
    ) -> tuple[int, bool]:
        """One batch of the slice's current table, committed with its ledger row: (rows deleted, done)."""
        position = await ledger.read_position(conn, deletion_id, slice_number)
        await conn.commit()
        if position.table_index >= len(self._tables):
            return 0, True
        limit = await pacer.next_batch(conn, self._tables[position.table_index].table, most)
        # Read again, locked with the batch: another call of the same slice (an overlapping retry) waits its turn
        # and goes on from where this one left it.
        position = await ledger.lock_position(conn, deletion_id, slice_number)
        if position.table_index >= len(self._tables):
            await conn.commit()
            return 0, True
        table = self._tables[position.table_index]
        batch = await table.delete_batch(conn, bot_id, position.after_id, limit, heartbeat=activity.heartbeat)
        after = Position(position.table_index + 1, 0) if batch.last else Position(position.table_index, batch.cursor)
        done = after.table_index >= len(self._tables)
        await ledger.record_batch(
            conn, deletion_id, slice_number, rows=batch.deleted, files=batch.files, position=after, done=done
        )
        await conn.commit()
        return batch.deleted, done

    async def _estimate_remaining(
        self, conn: AsyncConnection, deletion_id: str, slice_number: int, bot_id: str
    ) -> tuple[int, int]:
        """The bot's rows and files left from the slice's position on, estimated (TableDeleter.estimate_remaining)."""
        position = await ledger.lock_position(conn, deletion_id, slice_number)
        rows = files = 0
        for index in range(position.table_index, len(self._tables)):
            table = self._tables[index]
            left = await table.estimate_remaining(
                conn, bot_id, position.after_id if index == position.table_index else 0
            )
            rows += left
            files += left * table.files_per_row
        await conn.commit()
        return rows, files

    @activity.defn(name="VerifySubjectErased")
    async def verify_subject_erased(self, request: VerifyRequest) -> VerifyResponse:
        """Exact counts of the bot's rows in every table, and of its files. A preview (`estimate_allowed`) gets a
        table's rows estimated above ESTIMATE_SAMPLE (TableDeleter.estimate_remaining, exact below it), and
        `estimated` set when any table was; files are always counted exactly."""
        bot_id = bot_of(request.subject)
        rows = 0
        estimated = False
        try:
            async with self._engine.connect() as conn:
                for table in self._tables:
                    if request.estimate_allowed:
                        counted = await table.estimate_remaining(conn, bot_id, 0)
                        estimated = estimated or counted >= ESTIMATE_SAMPLE
                    else:
                        counted = await table.count(conn, bot_id)
                    rows += counted
            files = sum([await table.count_files(bot_id) for table in self._tables])
        except Exception as exc:
            if is_transient(exc):
                raise as_transient(exc) from exc
            raise
        step_counts(remaining_rows=rows, remaining_files=files, estimated=estimated)
        return VerifyResponse(remaining_rows=rows, remaining_files=files, estimated=estimated)

    @activity.defn(name="ExportSubjectData")
    @heartbeats
    async def export_subject_data(self, request: ExportRequest) -> ExportResponse:
        """The bots' rows (and files) as one object, `<prefix><name>.ndjson`, written whole to an anonymous
        temporary file first (gone with the process, however it ends) and then put in one PUT: the key holds a
        complete object or none, and a retried call puts the same bytes again."""
        bot_ids = account_bots(request)
        key = f"{request.object_key_prefix}{self._name}.ndjson"
        try:
            with tempfile.TemporaryFile() as handle:
                out = PartFile(handle)
                counts = await self._export.write(bot_ids, out)
                step_counts(rows=counts.rows, files=counts.files)
                if not counts.rows:
                    return ExportResponse()  # nothing of the account here: no object
                await asyncio.to_thread(handle.flush)
                await asyncio.to_thread(handle.seek, 0)
                await self._objects.put_stream(key, handle, CONTENT_TYPE, bucket=request.bucket or None)
        except Exception as exc:
            if is_transient(exc):
                raise as_transient(exc) from exc
            raise
        return ExportResponse(
            object_key=key,
            rows=counts.rows,
            files=counts.files,
            sha256=out.sha256,
            size_bytes=out.size,
            content_type=CONTENT_TYPE,
            files_missing=counts.files_missing,
            files_refused=counts.files_refused,
        )
