"""`python -m devstack seed`: a new account with bots full of rows and their documents in the object store.

Rows are generated inside PostgreSQL with INSERT ... SELECT generate_series: one statement per table and bot,
nothing streamed through Python, so a million rows take seconds. Document objects are uploaded
DOCUMENT_UPLOADS at a time.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass

import asyncpg

from api.security import generate_api_key, hash_api_key, shown_prefix
from lifecycle.object_keys import document_key
from lifecycle.object_store import ObjectStore
from lifecycle.settings import Settings

# Uploads in flight at once. The client's signing and SeaweedFS share the CPU: 8, 32 and 64 in flight all gave about
# 540 PUTs/s on the 2-core machine, so the fewest that reach it.
DOCUMENT_UPLOADS = 8
DOCUMENT_BODY = b"knowledge document body, 32 B.\n"

# Share of each bot's rows per service; every service gets at least one row.
SHARES = {
    "conversations": 0.10,
    "messages": 0.60,
    "analytics_events": 0.265,
    "knowledge_documents": 0.03,
    "integrations": 0.005,
}

_INSERTS = {
    "conversations": (
        "INSERT INTO conversations (bot_id, title) SELECT $1, 'conversation ' || g FROM generate_series(1, $2) g"
    ),
    "messages": (
        "INSERT INTO messages (bot_id, conversation_ref, body) "
        "SELECT $1, g % 1000, repeat('lorem ipsum ', 8) || g FROM generate_series(1, $2) g"
    ),
    "analytics_events": (
        "INSERT INTO analytics_events (bot_id, kind, payload) "
        "SELECT $1, 'event', jsonb_build_object('n', g) FROM generate_series(1, $2) g"
    ),
    "knowledge_documents": (
        "INSERT INTO knowledge_documents (bot_id, title, storage_key, size_bytes) "
        "SELECT $1::uuid, 'document ' || g, $1::uuid::text || '/' || g || '.txt', 32 "
        "FROM generate_series(1, $2) g"
    ),
    "integrations": (
        "INSERT INTO integrations (bot_id, provider) SELECT $1, 'provider-' || g FROM generate_series(1, $2) g"
    ),
}


@dataclass(frozen=True)
class Seeded:
    account_id: str
    api_key: str
    bot_ids: list[str]


def rows_per_service(rows: int, documents: int | None = None) -> dict[str, int]:
    """Each service's rows of a bot of `rows`; `documents`, when given, replaces the documents' share."""
    counts = {service: max(1, round(rows * share)) for service, share in SHARES.items()}
    if documents is not None:
        counts["knowledge_documents"] = documents
    return counts


def asyncpg_dsn(database_url: str) -> str:
    return database_url.replace("postgresql+asyncpg://", "postgresql://", 1)


def storage_keys(bot_id: str, count: int) -> list[str]:
    """The storage keys the seed gives a bot's documents (the same expression as its INSERT above)."""
    return [f"{bot_id}/{n}.txt" for n in range(1, count + 1)]


async def upload_documents(store: ObjectStore, bot_id: str, keys: list[str], body: bytes = DOCUMENT_BODY) -> None:
    """One object per storage key, DOCUMENT_UPLOADS at a time."""
    pending = iter(keys)

    async def uploader() -> None:
        for key in pending:
            await store.put_bytes(document_key(bot_id, key), body)

    await asyncio.gather(*(uploader() for _ in range(DOCUMENT_UPLOADS)))


async def seed(settings: Settings, *, bots: int, rows: int, documents: int | None = None) -> Seeded:
    """`documents`: each bot's documents, instead of their share of `rows`. A document is an upload, which costs
    the client and the store about as much CPU as a thousand rows cost PostgreSQL, so a test that deletes many
    rows to exercise something else keeps its documents few."""
    database_url = settings.database_url
    counts = rows_per_service(rows, documents)
    suffix = uuid.uuid4().hex[:8]
    api_key = generate_api_key()
    account_id = uuid.uuid4()
    bot_ids = [uuid.uuid4() for _ in range(bots)]
    conn = await asyncpg.connect(asyncpg_dsn(database_url))
    try:
        async with conn.transaction():
            await conn.execute(
                "INSERT INTO accounts (id, name, email) VALUES ($1, $2, $3)",
                account_id,
                f"Seeded {suffix}",
                f"seed-{suffix}@example.com",
            )
            await conn.execute(
                "INSERT INTO api_keys (id, account_id, key_hash, prefix) VALUES ($1, $2, $3, $4)",
                uuid.uuid4(),
                account_id,
                hash_api_key(api_key),
                shown_prefix(api_key),
            )
            for n, bot_id in enumerate(bot_ids, start=1):
                await conn.execute(
                    "INSERT INTO bots (id, account_id, name) VALUES ($1, $2, $3)",
                    bot_id,
                    account_id,
                    f"bot {n}",
                )
                for service, count in counts.items():
                    await conn.execute(_INSERTS[service], bot_id, count)
    finally:
        await conn.close()
    store = ObjectStore(settings)
    try:
        for bot_id in bot_ids:
            keys = storage_keys(str(bot_id), counts["knowledge_documents"])
            await upload_documents(store, str(bot_id), keys)
    finally:
        await store.close()
    return Seeded(account_id=str(account_id), api_key=api_key, bot_ids=[str(b) for b in bot_ids])
