"""Services for the conformance kit's tests, each run in the test's process as a worker on a queue of its own, with
the seeder the kit's `--seed` command stands for: the project's own services over their own databases, and two
deliberately broken services over rows in memory.

- `RunningTotal` answers each slice with every row of the deletion so far (a running total, where the contract
  asks for the rows no earlier answer counted): it counts rows twice.
- `IgnoresMaxRows` deletes everything a bot has in the first slice, whatever `max_rows` says.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from temporalio import activity

from devstack.seed import storage_keys, upload_documents
from lifecycle.deletion.v1.service_pb2 import (
    DeleteRequest,
    DeleteResponse,
    ExportRequest,
    ExportResponse,
    Subject,
    VerifyRequest,
    VerifyResponse,
)
from lifecycle.object_store import ObjectStore
from services.runtime.definition import ServiceDefinition
from services.runtime.seeding import seed_rows

# A slice's duration when the request leaves it to the service.
SLICE_MS = 5_000


class ServiceSeeder:
    """A bot's rows in one of the project's services, spread over its tables, with a document object for each
    row of a service that keeps documents."""

    def __init__(self, definition: ServiceDefinition, url: str, objects: ObjectStore) -> None:
        self._definition = definition
        self._url = url
        self._objects = objects

    async def seed(self, subject: Subject, account_id: str, rows: int) -> None:
        tables = list(self._definition.seeds)
        counts = {table: rows // len(tables) for table in tables}
        counts[tables[0]] += rows % len(tables)
        await seed_rows(self._definition, self._url, [subject.id], counts)
        if self._definition.uses_objects:
            await upload_documents(self._objects, subject.id, storage_keys(subject.id, rows))


class MemoryService:
    """A bot's rows as ids in memory, deleted upwards from the cursor (the highest id deleted); an answer counts
    what its call deleted. Its export writes the bots' ids as JSON lines."""

    def __init__(self, objects: ObjectStore) -> None:
        self._objects = objects
        self._rows: dict[str, list[int]] = defaultdict(list)

    async def seed(self, subject: Subject, account_id: str, rows: int) -> None:
        self._rows[subject.id] = list(range(1, rows + 1))

    @property
    def activities(self) -> list[Callable[..., Any]]:
        return [self.delete_subject_data, self.verify_subject_erased, self.export_subject_data]

    def slice_size(self, request: DeleteRequest) -> int:
        return request.max_rows or len(self._rows[request.subject.id])

    def answered_rows(self, request: DeleteRequest, deleted: int) -> int:
        return deleted

    @activity.defn(name="DeleteSubjectData")
    async def delete_subject_data(self, request: DeleteRequest) -> DeleteResponse:
        rows = self._rows[request.subject.id]
        after = int(request.cursor or 0)
        size = self.slice_size(request)
        if request.rows_per_second:
            # What the budget allows within the slice's duration, taken at the budget's pace.
            size = min(size, request.rows_per_second * (request.max_duration_ms or SLICE_MS) // 1000)
        taken = [row for row in rows if row > after][:size]
        self._rows[request.subject.id] = [row for row in rows if row not in taken]
        if request.rows_per_second:
            await asyncio.sleep(len(taken) / request.rows_per_second)
        return DeleteResponse(
            rows_deleted=self.answered_rows(request, len(taken)),
            cursor=str(taken[-1] if taken else after),
            done=not self._rows[request.subject.id],
        )

    @activity.defn(name="VerifySubjectErased")
    async def verify_subject_erased(self, request: VerifyRequest) -> VerifyResponse:
        return VerifyResponse(remaining_rows=len(self._rows[request.subject.id]))

    @activity.defn(name="ExportSubjectData")
    async def export_subject_data(self, request: ExportRequest) -> ExportResponse:
        ids = [(bot_id, row) for bot_id in request.bot_ids for row in self._rows[bot_id]]
        if not ids:
            return ExportResponse()
        body = "".join(f'{{"bot_id": "{bot_id}", "id": {row}}}\n' for bot_id, row in ids).encode()
        key = f"{request.object_key_prefix}memory.ndjson"
        await self._objects.put_stream(key, io.BytesIO(body), "application/x-ndjson", bucket=request.bucket or None)
        return ExportResponse(
            object_key=key,
            rows=len(ids),
            sha256=hashlib.sha256(body).hexdigest(),
            size_bytes=len(body),
            content_type="application/x-ndjson",
        )


class RunningTotal(MemoryService):
    def __init__(self, objects: ObjectStore) -> None:
        super().__init__(objects)
        self._deleted: dict[str, int] = defaultdict(int)

    def answered_rows(self, request: DeleteRequest, deleted: int) -> int:
        self._deleted[request.deletion_id] += deleted
        return self._deleted[request.deletion_id]


class IgnoresMaxRows(MemoryService):
    def slice_size(self, request: DeleteRequest) -> int:
        return len(self._rows[request.subject.id])
