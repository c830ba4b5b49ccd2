"""Documents whose storage key names something that is not a file inside the storage directory, planted beside
a canary file outside it: shared by the deletion's and the export's tests of the rule (lifecycle/stored_paths.py)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path

import asyncpg

from devstack.seed import asyncpg_dsn
from lifecycle.settings import Settings

CANARY = b"outside the storage directory: never deleted\n"


def _absolute(storage: Path, bot_id: str, canary: Path) -> str:
    return str(canary)


def _dot_dot(storage: Path, bot_id: str, canary: Path) -> str:
    return f"{bot_id}/../../{canary.parent.name}/{canary.name}"


def _through_a_symlinked_directory(storage: Path, bot_id: str, canary: Path) -> str:
    (storage / bot_id / "linked").symlink_to(canary.parent, target_is_directory=True)
    return f"{bot_id}/linked/{canary.name}"


def _a_symlink_to_a_file_outside(storage: Path, bot_id: str, canary: Path) -> str:
    (storage / bot_id / "link.txt").symlink_to(canary)
    return f"{bot_id}/link.txt"


def _a_directory(storage: Path, bot_id: str, canary: Path) -> str:
    (storage / bot_id / "folder").mkdir()
    return f"{bot_id}/folder"


def _a_fifo(storage: Path, bot_id: str, canary: Path) -> str:
    os.mkfifo(storage / bot_id / "pipe")
    return f"{bot_id}/pipe"


def _a_symlink_loop(storage: Path, bot_id: str, canary: Path) -> str:
    (storage / bot_id / "loop").symlink_to("loop")
    return f"{bot_id}/loop/{canary.name}"


PLANTED: dict[str, Callable[[Path, str, Path], str]] = {
    "absolute": _absolute,
    "dot-dot": _dot_dot,
    "symlinked directory": _through_a_symlinked_directory,
    "symlink to a file outside": _a_symlink_to_a_file_outside,
    "directory": _a_directory,
    "fifo": _a_fifo,
    "symlink loop": _a_symlink_loop,
}


def _plant(storage: Path, bot_id: str, kind: str, outside: Path) -> tuple[str, Path]:
    outside.mkdir()
    canary = outside / "canary.txt"
    canary.write_bytes(CANARY)
    return PLANTED[kind](storage, bot_id, canary), canary


async def plant_document(settings: Settings, bot_id: str, kind: str, outside: Path) -> tuple[int, Path]:
    """A document row of `bot_id` whose key is of `kind`, and the canary file in `outside` (made here)."""
    key, canary = await asyncio.to_thread(_plant, settings.storage_path, bot_id, kind, outside)
    conn = await asyncpg.connect(asyncpg_dsn(settings.database_url))
    try:
        document_id = await conn.fetchval(
            "INSERT INTO knowledge_documents (bot_id, title, storage_key, size_bytes)"
            " VALUES ($1::uuid, 'planted', $2, 1) RETURNING id",
            bot_id,
            key,
        )
    finally:
        await conn.close()
    return int(document_id), canary


async def alerts(settings: Settings, workflow_id: str) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(asyncpg_dsn(settings.database_url))
    try:
        return list(await conn.fetch("SELECT subject, reason FROM alerts WHERE workflow_id = $1", workflow_id))
    finally:
        await conn.close()
