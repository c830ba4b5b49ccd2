"""The per-service deleters of a bot's data, and the one activity that runs them.

Adding a service means adding one entry to DELETERS: the workflow, the API's size estimate and the tests take
the list of services (DELETION_SERVICES) from here.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from sqlalchemy import Row, TextClause, text
from sqlalchemy.ext.asyncio import AsyncConnection
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.deletion.pace import Pacer
from activities.errors import as_transient, is_transient
from activities.resources import ActivityResources
from lifecycle.deletion.contracts import DELETER_SLICE, DeleteServiceInput, ServiceProgress
from lifecycle.object_keys import ObjectKeyRefused, document_key
from lifecycle.object_store import ObjectStore

DELETE_SERVICE_ACTIVITY = "delete_bot_service"

# Before autovacuum has analyzed freshly written rows, the planner estimates a bot's rows as a handful and
# answers the bound probe below with a bitmap scan of ALL the bot's remaining rows plus a sort, in every
# batch (quadratic; EXPLAIN showed 1.2 s per probe on 600k messages). The (bot_id, id) index walk is the
# only sensible plan for a key-range batch, so each batch's transaction rules bitmap scans out.
_INDEX_WALK_ONLY = "SET LOCAL enable_bitmapscan = off"

# Rows read to estimate a service's total (TableDeleter.estimate_remaining); below it the total is exact.
ESTIMATE_SAMPLE = 10_000


# Above every id: the bound of a batch that takes all the rows left above its cursor.
_NO_BOUND = 9_223_372_036_854_775_807


@dataclass(frozen=True)
class KeyRange:
    """The next batch's rows: ids above `cursor` up to `bound` inclusive, `limit` of them unless `last`."""

    cursor: int
    bound: int
    last: bool


@dataclass(frozen=True)
class Batch:
    """What one batch did: rows deleted, the cursor after it, and whether it took every row left above it."""

    deleted: int
    cursor: int
    last: bool
    # Objects deleted with the rows: those the store confirmed gone, which S3 answers for a key already gone too.
    files: int = 0


@dataclass(frozen=True)
class TableDeleter:
    """Deletes a service's rows of one bot in batches, walking the (bot_id, id) index upwards."""

    table: str
    # Units of work per row, for the API's estimate of a deletion's size (api/deletion/size.py).
    work_per_row: int = 1

    async def estimate_remaining(self, conn: AsyncConnection, bot_id: str, cursor: int) -> int:
        """The bot's rows above `cursor`: exact up to ESTIMATE_SAMPLE rows, estimated above that.

        An exact `count(*)` walks every row (120 ms of a 600k-row service, on the deletion's longest lane:
        bench.deletion); this walks at most ESTIMATE_SAMPLE index entries and probes one more. Above the sample,
        the bot's share of the ids in the sample is taken to hold for the rest of its id range: exact for a bot
        whose rows were written in bulk, close for one whose rows arrived steadily among other bots'.
        """
        await conn.execute(text(_INDEX_WALK_ONLY))
        result = await conn.execute(
            text(
                f"WITH sample AS (SELECT id FROM {self.table} WHERE bot_id = :bot AND id > :cursor"
                " ORDER BY id LIMIT :sample)"
                " SELECT count(*) AS sampled, min(id) AS first, max(id) AS last,"
                f" (SELECT max(id) FROM {self.table} WHERE bot_id = :bot) AS top FROM sample"
            ),
            {"bot": bot_id, "cursor": cursor, "sample": ESTIMATE_SAMPLE},
        )
        sampled, first, last, top = result.one()
        if sampled < ESTIMATE_SAMPLE:
            return int(sampled)
        return max(int(sampled), round(sampled * (top - first + 1) / (last - first + 1)))

    async def next_range(self, conn: AsyncConnection, bot_id: str, cursor: int, limit: int) -> KeyRange:
        """The key range of the next `limit` rows above `cursor`, from an index-only probe.

        The DELETE then walks a key range instead of joining against a list of ids (2-2.5x faster than
        `id IN (SELECT ... LIMIT n)`), and as a statement of its own rather than a subquery of the DELETE with
        RETURNING: 453-570 ms against 586-725 ms for 600k messages in 50,000-row batches (docs/benchmarks.md).
        """
        await conn.execute(text(_INDEX_WALK_ONLY))
        bound = (
            await conn.execute(
                text(
                    f"SELECT id FROM {self.table} WHERE bot_id = :bot AND id > :cursor"
                    " ORDER BY id OFFSET :limit - 1 LIMIT 1"
                ),
                {"bot": bot_id, "cursor": cursor, "limit": limit},
            )
        ).scalar_one_or_none()
        return KeyRange(cursor, _NO_BOUND if bound is None else bound, last=bound is None)

    def _range_delete(self, returning: str = "") -> TextClause:
        tail = f" RETURNING {returning}" if returning else ""
        return text(f"DELETE FROM {self.table} WHERE bot_id = :bot AND id > :cursor AND id <= :bound{tail}")

    async def delete_batch(
        self,
        conn: AsyncConnection,
        objects: ObjectStore,
        bot_id: str,
        cursor: int,
        limit: int,
        heartbeat: Callable[[], None] = lambda: None,
    ) -> Batch:
        """Delete up to `limit` rows above `cursor`."""
        batch = await self.next_range(conn, bot_id, cursor, limit)
        params = {"bot": bot_id, "cursor": batch.cursor, "bound": batch.bound}
        if batch.last:
            # Fewer than `limit` rows: the new cursor is the highest id deleted, so they are returned.
            result = await conn.execute(
                text(f"WITH gone AS ({self._range_delete('id')}) SELECT count(*), max(id) FROM gone"), params
            )
            deleted, highest = result.one()
            return Batch(int(deleted), int(highest if highest is not None else cursor), last=True)
        # A full batch: its bound is the new cursor, and the statement's own row count is the count.
        result = await conn.execute(self._range_delete(), params)
        return Batch(int(result.rowcount), batch.bound, last=False)


@dataclass(frozen=True)
class DocumentDeleter(TableDeleter):
    """Knowledge documents: the row and its object in the object store; an object already gone is fine."""

    work_per_row: int = 2  # a row and an object to delete

    async def delete_batch(
        self,
        conn: AsyncConnection,
        objects: ObjectStore,
        bot_id: str,
        cursor: int,
        limit: int,
        heartbeat: Callable[[], None] = lambda: None,
    ) -> Batch:
        batch = await self.next_range(conn, bot_id, cursor, limit)
        result = await conn.execute(
            self._range_delete("id, storage_key"), {"bot": bot_id, "cursor": batch.cursor, "bound": batch.bound}
        )
        rows = result.all()
        # Objects go before the transaction commits, keyed by this batch's rows: a crash in between leaves rows
        # whose objects are gone, which the next attempt deletes again harmlessly (S3 answers a key already gone
        # as deleted); the other order could leave objects no row points at, which no retry would find. A refused
        # key raises before any object of the batch is touched, and the batch's rows stay with the rollback.
        # The store takes the keys in DeleteObjects requests of at most 1,000 (lifecycle/object_store.py).
        # A 50,000-row batch is 50 requests, seconds of work: a heartbeat after each keeps the attempt alive.
        files = await objects.delete(_object_keys(bot_id, rows), after_each_request=heartbeat)
        highest = max((row_id for row_id, _ in rows), default=cursor)
        return Batch(len(rows), highest if batch.last else batch.bound, last=batch.last, files=files)


class StorageKeyRefused(ApplicationError):
    """A document whose storage key names nothing the deleter may delete: data to look at, so never retried.

    The workflow takes it as a poison pill (an alert, then an operator's retry or skip); the message names the
    document's id and the rule, never the key, which may hold a file name.
    """

    def __init__(self, document_id: int, reason: str) -> None:
        super().__init__(f"document {document_id}: {reason}", type="StorageKeyRefused", non_retryable=True)


def _object_keys(bot_id: str, rows: Sequence[Row[int, str]]) -> list[str]:
    """Every document's object key, each under the bot's own prefix (lifecycle/object_keys.py); one that is not
    refuses the whole batch before anything is deleted."""
    keys = []
    for document_id, storage_key in rows:
        try:
            keys.append(document_key(bot_id, storage_key))
        except ObjectKeyRefused as refused:
            raise StorageKeyRefused(document_id, f"its storage key is refused: {refused}") from None
    return keys


DELETERS: dict[str, TableDeleter] = {
    "conversations": TableDeleter("conversations"),
    "messages": TableDeleter("messages"),
    "analytics_events": TableDeleter("analytics_events"),
    "knowledge_documents": DocumentDeleter("knowledge_documents"),
    "integrations": TableDeleter("integrations"),
}
# The services a bot owns data in, by name: the workflow deletes each with one call of delete_bot_service.
DELETION_SERVICES: tuple[str, ...] = tuple(DELETERS)


# Durable progress, written in the same transaction as each batch's DELETE: the status API reads it without a
# worker, and a new run of the same workflow id (after a cancel or terminate) counts on from it.
# `deleted` adds up each batch's own count, so it stays exact whatever calls overlapped (a terminated run's call
# may still commit a batch or two beside the new run's). `total` is an estimate while the service runs, never
# below what was deleted, and becomes the exact count once the service is done.
# `rows_per_second` is measured over windows of at least RATE_WINDOW, across deleter calls: when a batch ends a
# window, the rate is the rows deleted since the window began over its length, and a new window begins.
RATE_WINDOW = "1 second"
_WINDOW_ENDED = f"clock_timestamp() - deletion_progress.rate_since >= interval '{RATE_WINDOW}'"
_RECORD_BATCH = text(
    "INSERT INTO deletion_progress (workflow_id, service, deleted, total, done, skipped, files_deleted,"
    " throttled, rate_since_deleted)"
    " VALUES (:workflow_id, :service, :deleted, greatest(CAST(:total AS bigint), CAST(:deleted AS bigint)),"
    " :done, false, :files, :throttled, :deleted)"
    " ON CONFLICT (workflow_id, service) DO UPDATE SET deleted = deletion_progress.deleted + EXCLUDED.deleted,"
    " total = CASE WHEN EXCLUDED.done THEN deletion_progress.deleted + EXCLUDED.deleted"
    " ELSE greatest(deletion_progress.total, EXCLUDED.total, deletion_progress.deleted + EXCLUDED.deleted) END,"
    " done = EXCLUDED.done, skipped = false, updated_at = now(),"
    " files_deleted = deletion_progress.files_deleted + EXCLUDED.files_deleted,"
    " throttled = CASE WHEN EXCLUDED.done THEN NULL ELSE EXCLUDED.throttled END,"
    f" rows_per_second = CASE WHEN {_WINDOW_ENDED} THEN CAST(round((deletion_progress.deleted + EXCLUDED.deleted"
    " - deletion_progress.rate_since_deleted)"
    " / extract(epoch FROM clock_timestamp() - deletion_progress.rate_since)) AS bigint)"
    " ELSE deletion_progress.rows_per_second END,"
    f" rate_since_deleted = CASE WHEN {_WINDOW_ENDED} THEN deletion_progress.deleted + EXCLUDED.deleted"
    " ELSE deletion_progress.rate_since_deleted END,"
    f" rate_since = CASE WHEN {_WINDOW_ENDED} THEN clock_timestamp() ELSE deletion_progress.rate_since END"
    " RETURNING deleted, total, files_deleted, rows_per_second"
)
_RECORDED_PROGRESS = text(
    "SELECT deleted, total, files_deleted FROM deletion_progress"
    " WHERE workflow_id = :workflow_id AND service = :service"
)


class BotDataDeleters:
    def __init__(self, resources: ActivityResources) -> None:
        self._resources = resources

    @activity.defn(name=DELETE_SERVICE_ACTIVITY)
    async def delete_bot_service(self, request: DeleteServiceInput) -> ServiceProgress:
        """Delete batches for up to DELETER_SLICE, recording each batch's progress in its own transaction.

        The progress moves on only once its batch has committed, so a failed commit repeats the batch rather
        than skipping its rows; heartbeats carry a copy of the committed progress.
        """
        deleter = DELETERS[request.service]
        progress = _resume_point(request.progress)
        deadline = time.monotonic() + DELETER_SLICE.total_seconds()

        def heartbeat() -> None:
            # The last committed progress, whatever batch is under way.
            activity.heartbeat(replace(progress))

        pace = Pacer(deleter.table, heartbeat=heartbeat)
        try:
            async with self._resources.engine.connect() as conn:
                progress = await _starting_point(conn, deleter, request, progress)
                await conn.commit()
                while time.monotonic() < deadline:
                    rows = await pace.next_batch(conn, request.batch_size)
                    batch = await deleter.delete_batch(
                        conn,
                        self._resources.objects,
                        request.bot_id,
                        progress.cursor,
                        rows,
                        heartbeat=heartbeat,
                    )
                    recorded = await conn.execute(
                        _RECORD_BATCH,
                        {
                            "workflow_id": request.workflow_id,
                            "service": request.service,
                            "deleted": batch.deleted,
                            "total": progress.total,
                            # Nothing of the service was left above the cursor.
                            "done": batch.last,
                            "files": batch.files,
                            "throttled": pace.throttled,
                        },
                    )
                    deleted_so_far, total, files_deleted, rate = recorded.one()
                    await conn.commit()
                    progress = replace(
                        progress,
                        deleted=deleted_so_far,
                        total=total,
                        cursor=batch.cursor,
                        done=batch.last,
                        files_deleted=files_deleted,
                        rows_per_second=0 if batch.last else rate,
                        throttled=None if batch.last else pace.throttled,
                    )
                    # Raises CancelledError here if the workflow cancelled us: the check between batches.
                    activity.heartbeat(replace(progress))
                    await asyncio.sleep(0)
                    if progress.done:
                        break
        except Exception as exc:
            if is_transient(exc):
                raise as_transient(exc, progress) from exc
            raise
        return progress


async def _starting_point(
    conn: AsyncConnection, deleter: TableDeleter, request: DeleteServiceInput, given: ServiceProgress
) -> ServiceProgress:
    """Where this call starts counting: what this workflow id recorded, never below what the caller knew.

    A failed or killed call may have committed batches after its last heartbeat, and a new run after a cancel
    or terminate starts with no progress at all: the recorded row settles both, since every batch adds its
    count in its own transaction. The total is estimated once per workflow id and service, then kept there.
    """
    progress = replace(given)
    recorded = (
        await conn.execute(_RECORDED_PROGRESS, {"workflow_id": request.workflow_id, "service": request.service})
    ).first()
    if recorded is not None:
        progress.deleted = max(progress.deleted, int(recorded.deleted))
        progress.total = max(progress.total, int(recorded.total))
        progress.files_deleted = max(progress.files_deleted, int(recorded.files_deleted))
    if progress.total == 0:
        # Nothing estimated yet (or nothing was there): what is left above the cursor, plus what is deleted.
        progress.total = progress.deleted + await deleter.estimate_remaining(conn, request.bot_id, progress.cursor)
    return progress


def _resume_point(given: ServiceProgress) -> ServiceProgress:
    """The last heartbeat of a previous attempt of this call, if any, else what the workflow knew."""
    details = activity.info().heartbeat_details
    if details:
        # Heartbeat details arrive without type hints, as the dict form of the dataclass.
        return ServiceProgress(**details[0])
    return replace(given)
