"""Knowledge documents: each row and its object in the object store, deleted together."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from sqlalchemy import Row
from sqlalchemy.ext.asyncio import AsyncConnection
from temporalio.exceptions import ApplicationError

from lifecycle.object_keys import ObjectKeyRefused, bot_documents_prefix, document_key
from lifecycle.object_store import ObjectStore
from services.runtime.tables import Batch, TableDeleter


@dataclass(frozen=True)
class DocumentDeleter(TableDeleter):
    """The rows and their objects; an object already gone is fine."""

    files_per_row: int = 1
    objects: ObjectStore | None = field(default=None, compare=False)

    @property
    def store(self) -> ObjectStore:
        assert self.objects is not None, "a document deleter needs the object store"
        return self.objects

    async def delete_batch(
        self,
        conn: AsyncConnection,
        bot_id: str,
        cursor: int,
        limit: int,
        heartbeat: Callable[[], None] = lambda: None,
    ) -> Batch:
        batch = await self.next_range(conn, bot_id, cursor, limit)
        result = await conn.execute(
            self.range_delete("id, storage_key"), {"bot": bot_id, "cursor": batch.cursor, "bound": batch.bound}
        )
        rows = result.all()
        # Objects go before the transaction commits, keyed by this batch's rows: a crash in between leaves rows
        # whose objects are gone, which the next attempt deletes again harmlessly (S3 answers a key already gone
        # as deleted); the other order could leave objects no row points at, which no retry would find. A refused
        # key raises before any object of the batch is touched, and the batch's rows stay with the rollback.
        # The store takes the keys in DeleteObjects requests of at most 1,000 (lifecycle/object_store.py).
        # A 50,000-row batch is 50 requests, seconds of work: a heartbeat after each keeps the attempt alive.
        files = await self.store.delete(_object_keys(bot_id, rows), after_each_request=heartbeat)
        highest = max((row_id for row_id, _ in rows), default=cursor)
        return Batch(len(rows), highest if batch.last else batch.bound, last=batch.last, files=files)

    def file_key(self, bot_id: str, row: Mapping[str, object]) -> str:
        """The document's object, under the bot's own prefix (lifecycle/object_keys.py)."""
        return document_key(bot_id, str(row["storage_key"]))

    async def count_files(self, bot_id: str) -> int:
        """Objects left under the bot's documents prefix, listed in the store itself."""
        return await self.store.count(bot_documents_prefix(bot_id))


class StorageKeyRefused(ApplicationError):
    """A document whose storage key names nothing the service may delete: data to look at, so never retried.

    The gateway takes it as a poison pill (an alert, then an operator's retry or skip); the message names the
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
