"""A site's own PostgreSQL database and role, on the site-database server, and WordPress's core schema.

CREATE DATABASE cannot run inside a transaction, so these use raw asyncpg connections in autocommit mode.
Every operation checks the catalogue first, so a retried or reset step changes nothing the second time.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import asyncpg
from sqlalchemy.engine import make_url

from activities.sites.files import site_key
from activities.sites.reachability import CONNECT_TIMEOUT_SECONDS, SiteDatabaseServerUnreachable, is_unreachable
from activities.sites.scram import scram_verifier

_IDENTIFIER = re.compile(r"^site_[0-9a-f]{32}$")


def checked_site_identifier(name: str) -> str:
    """`name`, if it is exactly a site database name; names are interpolated into DDL. An explicit check,
    since `python -O` strips asserts."""
    if not _IDENTIFIER.match(name):
        raise ValueError(f"not a site database name: {name!r}")
    return name


def site_database_name(site_id: str) -> str:
    return checked_site_identifier(f"site_{site_key(site_id)}")


@dataclass(frozen=True)
class SiteDatabaseServer:
    """The server that hosts site databases, from an SQLAlchemy URL with an administrative user."""

    admin_url: str

    def _dsn(self, database: str | None = None) -> str:
        url = make_url(self.admin_url).set(drivername="postgresql")
        if database is not None:
            url = url.set(database=database)
        return url.render_as_string(hide_password=False)

    @property
    def host(self) -> str:
        return make_url(self.admin_url).host or "127.0.0.1"

    @property
    def port(self) -> int:
        return make_url(self.admin_url).port or 5432

    @asynccontextmanager
    async def connect(self, database: str | None = None) -> AsyncIterator[asyncpg.Connection]:
        """A connection to the server; a server that does not answer, or goes away while it is used, raises
        SiteDatabaseServerUnreachable (activities/sites/reachability.py)."""
        try:
            connection = await asyncpg.connect(self._dsn(database), timeout=CONNECT_TIMEOUT_SECONDS)
            try:
                yield connection
            finally:
                await connection.close(timeout=CONNECT_TIMEOUT_SECONDS)
        except Exception as err:
            if is_unreachable(err):
                raise SiteDatabaseServerUnreachable(f"{type(err).__name__}: {err}") from err
            raise

    async def create(self, name: str, password: str, connection_limit: int) -> None:
        """The site's role, allowed `connection_limit` sessions at once, and its database, reachable by it alone."""
        checked_site_identifier(name)
        limit = int(connection_limit)  # interpolated into DDL: an integer and nothing else
        async with self.connect() as admin:
            role_limit, database = await admin.fetchrow(
                "SELECT (SELECT rolconnlimit FROM pg_roles WHERE rolname = $1),"
                " EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)",
                name,
            )
            if role_limit is None:
                # DDL takes no bind parameters. The server gets a SCRAM verifier computed here, never the password
                # (which could reach its logs); the verifier is base64 and `$:`, so it needs no escaping.
                await admin.execute(
                    f"CREATE ROLE {name} LOGIN CONNECTION LIMIT {limit} PASSWORD '{scram_verifier(password)}'"
                )
            elif role_limit != limit:
                # A role an earlier attempt (or an earlier release, without a limit) made.
                await admin.execute(f"ALTER ROLE {name} CONNECTION LIMIT {limit}")
            # A provisioner with only CREATEROLE and CREATEDB (not a superuser) may make a database owned by the
            # site role, reach it and drop it only as a member of that role (PostgreSQL 16 and later).
            await admin.execute(f"GRANT {name} TO CURRENT_USER WITH INHERIT TRUE, SET TRUE")
            if not database:
                await admin.execute(f"CREATE DATABASE {name} OWNER {name}")
            # Only the site's own role may connect: PUBLIC's default CONNECT would let every site role in.
            # Repeated on every attempt: a step retried after a crash between the two still ends locked down.
            await admin.execute(f"REVOKE CONNECT ON DATABASE {name} FROM PUBLIC")
            await admin.execute(f"GRANT CONNECT ON DATABASE {name} TO {name}")

    async def drop(self, name: str) -> None:
        checked_site_identifier(name)
        async with self.connect() as admin:
            if await admin.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name):
                await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            await admin.execute(f"DROP ROLE IF EXISTS {name}")

    async def exists(self, name: str) -> bool:
        async with self.connect() as admin:
            return bool(await admin.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name))
