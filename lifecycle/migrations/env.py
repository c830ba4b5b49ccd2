"""Alembic environment: runs migrations over the async engine."""

import asyncio

from alembic import context
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine

from lifecycle.db.schema import METADATA, include_object


def _run(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=METADATA, compare_type=True, include_object=include_object)
    with context.begin_transaction():
        context.run_migrations()


async def _run_online() -> None:
    url = context.config.get_main_option("sqlalchemy.url")
    assert url, "sqlalchemy.url must be set"
    engine = create_async_engine(url)
    async with engine.connect() as connection:
        await connection.run_sync(_run)
    await engine.dispose()


asyncio.run(_run_online())
