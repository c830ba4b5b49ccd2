"""The bounded size estimate against real PostgreSQL: exact below the limit, and it stops at the limit."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest_asyncio
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from api.deletion.size import account_deletion_size, bot_deletion_size
from devstack.seed import rows_per_service, seed
from lifecycle.db.engine import make_engine
from lifecycle.settings import Settings

ROWS = 100


def _work(rows: int) -> int:
    """Rows of one seeded bot, its document files (one per document) and the bot row."""
    counts = rows_per_service(rows)
    return sum(counts.values()) + counts["knowledge_documents"] + 1


@pytest_asyncio.fixture
async def conn(settings: Settings) -> AsyncIterator[AsyncConnection]:
    engine = make_engine(settings.database_url)
    try:
        async with engine.connect() as connection:
            yield connection
    finally:
        await engine.dispose()


async def test_a_bot_is_counted_exactly_below_the_limit_and_stops_at_it(
    settings: Settings, conn: AsyncConnection
) -> None:
    seeded = await seed(settings, bots=1, rows=ROWS)
    bot_id = uuid.UUID(seeded.bot_ids[0])
    assert await bot_deletion_size(conn, bot_id, limit=10_000) == _work(ROWS)
    assert await bot_deletion_size(conn, bot_id, limit=20) == 20
    assert await bot_deletion_size(conn, uuid.uuid4(), limit=10_000) == 0


async def test_an_account_counts_its_bots_and_live_sites(settings: Settings, conn: AsyncConnection) -> None:
    seeded = await seed(settings, bots=2, rows=ROWS)
    account_id = uuid.UUID(seeded.account_id)
    for status in ("active", "deleted"):
        await conn.execute(
            text(
                "INSERT INTO sites (id, account_id, name, tagline, domain, status, steps)"
                " VALUES (:id, :account, 'Size', '', :domain, :status, '{}'::jsonb)"
            ),
            {
                "id": uuid.uuid4(),
                "account": account_id,
                "domain": f"{uuid.uuid4().hex[:12]}.example.com",
                "status": status,
            },
        )
    await conn.commit()
    # A deleted site is nothing to tear down; the active one is one unit.
    assert await account_deletion_size(conn, account_id, limit=10_000) == 2 * _work(ROWS) + 1
    assert await account_deletion_size(conn, account_id, limit=150) == 150
