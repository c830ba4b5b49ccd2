"""`python -m devstack seed`: a new account with bots full of rows, in the product's database (the account, its key
and its bots) and in every service's own database (services/catalog.py), and their documents in the object store.

Rows are generated inside PostgreSQL with INSERT ... SELECT generate_series: one statement per table and bot,
nothing streamed through Python, so a million rows take seconds. Document objects are uploaded DOCUMENT_UPLOADS
at a time.
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
from services.catalog import SERVICES
from services.runtime.database import service_database_url
from services.runtime.seeding import seed_rows

# Uploads in flight at once. The client's signing and SeaweedFS share the CPU: 8, 32 and 64 in flight all gave about
# 540 PUTs/s on the 2-core machine, so the fewest that reach it.
DOCUMENT_UPLOADS = 8
DOCUMENT_BODY = b"knowledge document body, 32 B.\n"
# The table whose rows each have a document object.
DOCUMENTS_TABLE = "knowledge_documents"


@dataclass(frozen=True)
class Seeded:
    account_id: str
    api_key: str
    bot_ids: list[str]


def rows_per_table(rows: int, documents: int | None = None) -> dict[str, int]:
    """Each table's rows of a bot of `rows`, by the tables' shares; every table gets at least one row.
    `documents`, when given, replaces the documents' share."""
    counts = {table: max(1, round(rows * seed.share)) for service in SERVICES for table, seed in service.seeds.items()}
    if documents is not None:
        counts[DOCUMENTS_TABLE] = documents
    return counts


def rows_per_service(rows: int, documents: int | None = None) -> dict[str, int]:
    """Each service's rows of a bot of `rows`, by its registered name: what a deletion's status and receipt count."""
    tables = rows_per_table(rows, documents)
    return {service.name: sum(tables[table] for table in service.seeds) for service in SERVICES}


def asyncpg_dsn(database_url: str) -> str:
    return database_url.replace("postgresql+asyncpg://", "postgresql://", 1)


def storage_keys(bot_id: str, count: int) -> list[str]:
    """The storage keys the seed gives a bot's documents (the same expression as its INSERT, services/knowledge)."""
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
    counts = rows_per_table(rows, documents)
    suffix = uuid.uuid4().hex[:8]
    api_key = generate_api_key()
    account_id = uuid.uuid4()
    bot_ids = [str(uuid.uuid4()) for _ in range(bots)]
    conn = await asyncpg.connect(asyncpg_dsn(settings.database_url))
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
                    uuid.UUID(bot_id),
                    account_id,
                    f"bot {n}",
                )
    finally:
        await conn.close()
    for service in SERVICES:
        await seed_rows(service, service_database_url(service.name, beside=settings.database_url), bot_ids, counts)
    store = ObjectStore(settings)
    try:
        for bot_id in bot_ids:
            await upload_documents(store, bot_id, storage_keys(bot_id, counts[DOCUMENTS_TABLE]))
    finally:
        await store.close()
    return Seeded(account_id=str(account_id), api_key=api_key, bot_ids=bot_ids)
