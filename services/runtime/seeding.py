"""Filling a service's own tables with a bot's rows, for `python -m devstack seed`, the benches and the tests.

Rows are generated inside PostgreSQL with INSERT ... SELECT generate_series: one statement per table and bot,
nothing streamed through Python, so a million rows take seconds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import asyncpg
from sqlalchemy.ext.asyncio import create_async_engine

from services.runtime.database import apply_schema, asyncpg_dsn, ensure_database
from services.runtime.definition import ServiceDefinition


async def prepare(definition: ServiceDefinition, url: str) -> None:
    """The service's database and schema, as its worker makes them at start-up."""
    await ensure_database(url)
    engine = create_async_engine(url)
    try:
        await apply_schema(engine, definition.full_schema)
    finally:
        await engine.dispose()


async def seed_rows(definition: ServiceDefinition, url: str, bot_ids: Sequence[str], counts: Mapping[str, int]) -> None:
    """`counts[table]` rows of each of the service's tables for every bot, in one transaction. The database and
    its schema are made first only when they are missing: the service's worker makes them as it starts, and the
    seed may come first (make run's order). Making them every time cost three connections and the whole schema's
    statements per service and seed."""
    try:
        await _insert_rows(definition, url, bot_ids, counts)
    except (asyncpg.InvalidCatalogNameError, asyncpg.UndefinedTableError):
        await prepare(definition, url)
        await _insert_rows(definition, url, bot_ids, counts)


async def _insert_rows(
    definition: ServiceDefinition, url: str, bot_ids: Sequence[str], counts: Mapping[str, int]
) -> None:
    conn = await asyncpg.connect(asyncpg_dsn(url))
    try:
        async with conn.transaction():
            for bot_id in bot_ids:
                for table, seed in definition.seeds.items():
                    await conn.execute(seed.insert, bot_id, counts[table])
    finally:
        await conn.close()
