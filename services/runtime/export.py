"""ExportSubjectData's object: every row of the given bots in a service's tables, as JSON lines, with the content of
each file a row names (the knowledge service's documents), written to a file as it is read.

One line per row, `{"table": <table>, "row": <the row, as PostgreSQL's to_jsonb renders it>}`, bot by bot in the
request's order, table by table in the service's order, rows by id; a row with a file also carries
`"file": {"name", "size_bytes", "content_base64"}`, or `{"name", "missing": true}` when the store no longer holds
it, or `{"refused": <rule>}` when its reference names nothing the service may read. The same data gives the same
bytes, so a retried call writes the same object with the same SHA-256.

Memory holds one batch of rows and one piece of a file: rows are read in keyset batches inside one snapshot per
bot (its tables consistent with each other), files streamed from the store.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import BinaryIO

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from lifecycle.object_keys import ObjectKeyRefused
from lifecycle.object_store import ObjectStore
from services.runtime.tables import INDEX_WALK_ONLY, TableDeleter

CONTENT_TYPE = "application/x-ndjson"
# A file is read and encoded in pieces of this many bytes: a multiple of 3, so each piece's base64 has no padding.
FILE_PIECE = 3 * 256 * 1024
# Refused files the answer names at most (ExportResponse.files_refused), so that it stays far below Temporal's
# payload limit; the object marks every one.
MAX_REFUSED_LISTED = 1_000


@dataclass
class ExportCounts:
    rows: int = 0
    files: int = 0
    files_missing: int = 0
    # `<table> <row id>: <rule>` for each file left out, up to MAX_REFUSED_LISTED: ExportResponse.files_refused.
    files_refused: list[str] = field(default_factory=list)


class PartFile:
    """The object as it is written, with its running SHA-256 and size."""

    def __init__(self, handle: BinaryIO) -> None:
        self._handle = handle
        self._digest = hashlib.sha256()
        self.size = 0

    async def write(self, data: bytes) -> None:
        self._digest.update(data)
        self.size += len(data)
        await asyncio.to_thread(self._handle.write, data)

    @property
    def sha256(self) -> str:
        return self._digest.hexdigest()


class ExportWriter:
    """Writes the bots' rows of `tables` in `engine`'s database (and their files, from `objects`) to `out`."""

    def __init__(
        self, engine: AsyncEngine, tables: Sequence[TableDeleter], objects: ObjectStore, batch_rows: int
    ) -> None:
        self._engine = engine
        self._tables = tables
        self._objects = objects
        self._batch_rows = batch_rows

    async def write(self, bot_ids: Sequence[str], out: PartFile) -> ExportCounts:
        counts = ExportCounts()
        for bot_id in bot_ids:
            async with self._engine.connect() as connection:
                conn = await connection.execution_options(isolation_level="REPEATABLE READ")
                async with conn.begin():
                    await conn.execute(text(INDEX_WALK_ONLY))
                    for table in self._tables:
                        await self._write_table(conn, table, bot_id, out, counts)
        return counts

    async def _write_table(
        self, conn: AsyncConnection, table: TableDeleter, bot_id: str, out: PartFile, counts: ExportCounts
    ) -> None:
        query = text(
            f"SELECT id, to_jsonb(t)::text FROM {table.table} t WHERE bot_id = :bot AND id > :cursor"
            " ORDER BY id LIMIT :limit"
        )
        head = '{"table": ' + json.dumps(table.table) + ', "row": '
        cursor = 0
        while True:
            batch = (await conn.execute(query, {"bot": bot_id, "cursor": cursor, "limit": self._batch_rows})).all()
            if not table.files_per_row:
                await out.write("".join(f"{head}{row}}}\n" for _, row in batch).encode())
            else:
                for row_id, row in batch:
                    await out.write(f"{head}{row}, ".encode())
                    await self._write_file(table, bot_id, row_id, json.loads(row), out, counts)
            counts.rows += len(batch)
            if len(batch) < self._batch_rows:
                return
            cursor = batch[-1][0]

    async def _write_file(
        self, table: TableDeleter, bot_id: str, row_id: int, row: dict[str, object], out: PartFile, counts: ExportCounts
    ) -> None:
        """The rest of the row's line: its file, streamed from the store and base64-encoded piece by piece."""
        try:
            key = table.file_key(bot_id, row)
        except ObjectKeyRefused as refused:
            # Never read: the reference may name another bot's object. The rule is named, never the reference.
            if len(counts.files_refused) < MAX_REFUSED_LISTED:
                counts.files_refused.append(f"{table.table} {row_id}: {refused}")
            await out.write(b'"file": {"refused": ' + json.dumps(str(refused)).encode() + b"}}\n")
            return
        name = json.dumps(PurePosixPath(key).name)
        async with self._objects.reading(key) as answer:
            if answer is None:
                counts.files_missing += 1
                await out.write(f'"file": {{"name": {name}, "missing": true}}}}\n'.encode())
                return
            await out.write(f'"file": {{"name": {name}, "size_bytes": {answer["ContentLength"]}, '.encode())
            await out.write(b'"content_base64": "')
            carry = b""
            while piece := await answer["Body"].read(FILE_PIECE):
                data = carry + piece
                whole = len(data) - len(data) % 3
                await out.write(base64.b64encode(data[:whole]))
                carry = data[whole:]
            await out.write(base64.b64encode(carry) + b'"}}\n')
        counts.files += 1
