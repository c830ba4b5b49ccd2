"""The search index's own store: entries in a SQLite file, and each bot's snapshot files in a folder beside it.

Nothing here knows about Temporal or the gateway; the worker (__main__.py) turns the contract's calls into these.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS entries (id INTEGER PRIMARY KEY AUTOINCREMENT, bot_id TEXT NOT NULL, term TEXT)",
    "CREATE INDEX IF NOT EXISTS entries_bot ON entries (bot_id, id)",
    # The ledger: each slice of a deletion that removed entries, from the cursor it was given (`after`) to the one
    # it answered, with what it removed; written in the transaction that removes them.
    "CREATE TABLE IF NOT EXISTS slices (deletion_id TEXT NOT NULL, after INTEGER NOT NULL, cursor INTEGER NOT NULL,"
    " rows INTEGER NOT NULL, files INTEGER NOT NULL, PRIMARY KEY (deletion_id, after))",
)


@dataclass(frozen=True)
class Deleted:
    # What the call answers: the entries and files gone since the cursor it was given, its own and those of any
    # earlier slice of the deletion from there whose answer never arrived (a crash, a reset of the caller's run).
    rows: int
    files: int
    # The highest entry id deleted, or the cursor given when nothing was.
    cursor: int
    # The entries this call removed itself.
    removed: int


class SearchIndex:
    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        with self._db() as db:
            for statement in _SCHEMA:
                db.execute(statement)

    @contextlib.contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        db = sqlite3.connect(self.root / "index.sqlite3")
        try:
            with db:  # one transaction, committed on success
                yield db
        finally:
            db.close()

    def _snapshots(self, bot_id: str) -> Path:
        return self.root / "snapshots" / bot_id

    def add(self, bot_id: str, entries: int, files: int) -> None:
        with self._db() as db:
            db.executemany(
                "INSERT INTO entries (bot_id, term) VALUES (?, ?)", [(bot_id, f"t{n}") for n in range(entries)]
            )
        folder = self._snapshots(bot_id)
        folder.mkdir(parents=True, exist_ok=True)
        for n in range(files):
            (folder / f"{n}.json").write_text(f'{{"snapshot": {n}}}')

    def delete(self, deletion_id: str, bot_id: str, after: int, limit: int) -> Deleted:
        """Up to `limit` entries past the id `after`, or past the last slice the ledger has of the deletion from
        there; with the last entry, the bot's snapshot files too. Counted once however often a slice is asked."""
        with self._db() as db:
            earlier = db.execute(
                "SELECT cursor, rows, files FROM slices WHERE deletion_id = ? AND after >= ? ORDER BY after",
                (deletion_id, after),
            ).fetchall()
            start = earlier[-1][0] if earlier else after
            ids = [
                row[0]
                for row in db.execute(
                    "SELECT id FROM entries WHERE bot_id = ? AND id > ? ORDER BY id LIMIT ?", (bot_id, start, limit)
                )
            ]
            if ids:
                db.execute("DELETE FROM entries WHERE bot_id = ? AND id > ? AND id <= ?", (bot_id, start, ids[-1]))
            files = 0
            if not db.execute("SELECT 1 FROM entries WHERE bot_id = ? LIMIT 1", (bot_id,)).fetchone():
                # Inside the transaction: a crash before its commit loses these files' count, never an entry's.
                files = self._remove_snapshots(bot_id)
            if ids:
                db.execute(
                    "INSERT INTO slices (deletion_id, after, cursor, rows, files) VALUES (?, ?, ?, ?, ?)",
                    (deletion_id, start, ids[-1], len(ids), files),
                )
        return Deleted(
            rows=sum(row[1] for row in earlier) + len(ids),
            files=sum(row[2] for row in earlier) + files,
            cursor=ids[-1] if ids else start,
            removed=len(ids),
        )

    def _remove_snapshots(self, bot_id: str) -> int:
        removed = 0
        for file in sorted(self._snapshots(bot_id).glob("*")):
            with contextlib.suppress(FileNotFoundError):  # a retried call: already gone
                file.unlink()
                removed += 1
        return removed

    def export(self, bot_ids: list[str]) -> tuple[bytes, int, int]:
        """The bots' entries and snapshot files as JSON lines, with how many of each it holds."""
        lines: list[str] = []
        files = 0
        with self._db() as db:
            for bot_id in bot_ids:
                found = db.execute("SELECT id, term FROM entries WHERE bot_id = ? ORDER BY id", (bot_id,))
                lines.extend(json.dumps({"bot_id": bot_id, "entry_id": row[0], "term": row[1]}) for row in found)
        for bot_id in bot_ids:
            for file in sorted(self._snapshots(bot_id).glob("*")):
                lines.append(json.dumps({"bot_id": bot_id, "snapshot": file.name, "content": file.read_text()}))
                files += 1
        return "".join(line + "\n" for line in lines).encode(), len(lines) - files, files

    def count(self, bot_id: str) -> tuple[int, int]:
        """The bot's entries and snapshot files."""
        with self._db() as db:
            (rows,) = db.execute("SELECT count(*) FROM entries WHERE bot_id = ?", (bot_id,)).fetchone()
        folder = self._snapshots(bot_id)
        return int(rows), sum(1 for _ in folder.glob("*")) if folder.exists() else 0
