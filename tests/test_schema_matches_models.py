"""The ORM models match the schema the migrations build: Alembic's autogenerate, run against a freshly migrated
database, finds nothing to change (lifecycle/db/schema.py lists the tables left to SQL of their own)."""

from __future__ import annotations

import uuid
from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine

from devstack.postgres import PostgresServer
from lifecycle.db.schema import METADATA, TABLES_WITHOUT_MODELS, include_object
from lifecycle.migrate import upgrade_async


def _differences(connection: Connection) -> list[Any]:
    context = MigrationContext.configure(
        connection, opts={"compare_type": True, "compare_server_default": True, "include_object": include_object}
    )
    return list(compare_metadata(context, METADATA))


async def test_the_models_match_a_freshly_migrated_database(postgres_server: PostgresServer) -> None:
    name = f"schema_{uuid.uuid4().hex[:8]}"
    postgres_server.create_database(name)
    url = postgres_server.url(name)
    await upgrade_async(url)
    engine = create_async_engine(url)
    try:
        async with engine.connect() as connection:
            differences = await connection.run_sync(_differences)
            tables = set(await connection.run_sync(lambda sync: sync.dialect.get_table_names(sync)))
    finally:
        await engine.dispose()
    assert differences == []
    # Every table left out is one the migrations made: the list names no table that is gone.
    assert set(TABLES_WITHOUT_MODELS) <= tables
