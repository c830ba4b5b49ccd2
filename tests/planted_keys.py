"""Documents whose storage key names no object under their bot's prefix, planted beside a canary object of another
bot: shared by the deletion's and the export's tests of the rule (lifecycle/object_keys.py)."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import asyncpg

from lifecycle.object_keys import DOCUMENTS_PREFIX
from lifecycle.object_store import ObjectStore
from lifecycle.settings import Settings
from services.knowledge import KNOWLEDGE
from services.runtime.database import service_database_url
from tests.db import connection

CANARY = b"another bot's document: never deleted, never exported\n"

# Each kind's storage key, from the bot's id and the canary's (`<other bot>/canary.txt`).
PLANTED: dict[str, Callable[[str, str], str]] = {
    "another bot's": lambda bot_id, canary: canary,
    "dot-dot": lambda bot_id, canary: f"{bot_id}/../{canary}",
    "absolute": lambda bot_id, canary: f"/{DOCUMENTS_PREFIX}{canary}",
    "empty segment": lambda bot_id, canary: f"{bot_id}//{canary}",
    "the bot's prefix itself": lambda bot_id, canary: bot_id,
    "control character": lambda bot_id, canary: f"{bot_id}/line\nbreak.txt",
}


async def plant_document(settings: Settings, bot_id: str, kind: str) -> tuple[int, str]:
    """A document row of `bot_id` whose key is of `kind`, and the object key of the canary (written here)."""
    canary = f"{uuid.uuid4()}/canary.txt"
    store = ObjectStore(settings)
    try:
        await store.put_bytes(DOCUMENTS_PREFIX + canary, CANARY)
    finally:
        await store.close()
    # The knowledge service's own database, beside the product's.
    async with connection(service_database_url(KNOWLEDGE.name, beside=settings.database_url)) as conn:
        document_id = await conn.fetchval(
            "INSERT INTO knowledge_documents (bot_id, title, storage_key, size_bytes)"
            " VALUES ($1::uuid, 'planted', $2, 1) RETURNING id",
            bot_id,
            PLANTED[kind](bot_id, canary),
        )
    return int(document_id), DOCUMENTS_PREFIX + canary


async def canary_of(settings: Settings, canary_key: str) -> bytes | None:
    store = ObjectStore(settings)
    try:
        return await store.read(canary_key)
    finally:
        await store.close()


async def alerts(settings: Settings, workflow_id: str) -> list[asyncpg.Record]:
    async with connection(settings.database_url) as conn:
        return list(await conn.fetch("SELECT subject, reason FROM alerts WHERE workflow_id = $1", workflow_id))
