"""A service's own PostgreSQL database: where it is, made if missing, and its schema applied by the service itself.

`<NAME>_DATABASE_URL` (e.g. `CHAT_DATABASE_URL`) names it; unset, it is a database of the service's name on the
server of DATABASE_URL (the embedded server of the local stack), so one server can hold every service's database
while each service still owns its own, and a deployment points any of them at a server of its own.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping, Sequence

import asyncpg
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from lifecycle.settings import get_settings

# Serialises schema changes of replicas starting at once (pg_advisory_xact_lock's key: "svc" "schema").
_SCHEMA_LOCK = text("SELECT pg_advisory_xact_lock(7_365_830_021)")


def database_url_variable(name: str) -> str:
    return f"{name.upper().replace('-', '_')}_DATABASE_URL"


def service_database_url(name: str, beside: str | None = None, environ: Mapping[str, str] = os.environ) -> str:
    """The service's database URL: its own variable, else a database of its name on the server of `beside`
    (DATABASE_URL by default)."""
    if url := environ.get(database_url_variable(name)):
        return url
    server = beside or get_settings().database_url
    return make_url(server).set(database=name).render_as_string(hide_password=False)


def asyncpg_dsn(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


async def ensure_database(url: str) -> None:
    """Create the database if it does not exist yet, from the server's `postgres` database.

    One that exists is only connected to: a deployment that makes each service's database beforehand, owned by the
    service's role (docker-compose's roles job), gives that role no CREATEDB and no access to `postgres`."""
    target = make_url(url)
    try:
        await (await asyncpg.connect(asyncpg_dsn(url))).close()
        return
    except asyncpg.InvalidCatalogNameError:
        pass
    maintenance = await asyncpg.connect(asyncpg_dsn(target.set(database="postgres").render_as_string(False)))
    try:
        if await maintenance.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", target.database):
            return
        # Another replica, or the seed, may make it meanwhile. PostgreSQL reports a creation that lost the race
        # after the check above either way: as a duplicate database, or, when both reached the catalog at once,
        # as a unique violation on pg_database's name index.
        with contextlib.suppress(asyncpg.DuplicateDatabaseError, asyncpg.UniqueViolationError):
            await maintenance.execute(f'CREATE DATABASE "{target.database}"')
    finally:
        await maintenance.close()


async def apply_schema(engine: AsyncEngine, statements: Sequence[str]) -> None:
    """Every statement is idempotent (IF NOT EXISTS, ON CONFLICT DO NOTHING): applied at every start."""
    async with engine.begin() as conn:
        await conn.execute(_SCHEMA_LOCK)
        for statement in statements:
            await conn.execute(text(statement))
