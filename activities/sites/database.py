"""A site's own PostgreSQL database and role, on the site-database server, and WordPress's core schema.

CREATE DATABASE cannot run inside a transaction, so these use raw asyncpg connections in autocommit mode.
Every operation checks the catalogue first, so a retried or reset step changes nothing the second time.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from functools import partial

import asyncpg
from sqlalchemy.engine import make_url

from activities.sites.files import site_key
from activities.sites.reachability import (
    CONNECT_TIMEOUT_SECONDS,
    FIRST_ANSWER_TIMEOUT_SECONDS,
    SiteDatabaseServerUnreachable,
    is_unreachable,
)
from activities.sites.scram import scram_verifier
from lifecycle.outbound import OutboundRule

_IDENTIFIER = re.compile(r"^site_[0-9a-f]{32}$")
# A site's database, or a warm pool's not yet claimed (lifecycle/sites/pool.py): what drop may remove.
_DROPPABLE = re.compile(r"^(site|pool)_[0-9a-f]{32}$")
_POOL = re.compile(r"^pool_[0-9a-f]{32}$")

# Given whether it may take a new one: the pool database the site claimed (its pool name), or None.
ClaimFromPool = Callable[[bool], Awaitable[str | None]]
# Records, durably, that the site's database may live on this server from now on (activities/sites/placement.py).
Touch = Callable[[], Awaitable[None]]


def checked_site_identifier(name: str) -> str:
    """`name`, if it is exactly a site database name; names are interpolated into DDL. An explicit check,
    since `python -O` strips asserts."""
    if not _IDENTIFIER.match(name):
        raise ValueError(f"not a site database name: {name!r}")
    return name


def checked_droppable_identifier(name: str) -> str:
    if not _DROPPABLE.match(name):
        raise ValueError(f"not a site or pool database name: {name!r}")
    return name


def checked_pool_identifier(name: str) -> str:
    if not _POOL.match(name):
        raise ValueError(f"not a pool database name: {name!r}")
    return name


def site_database_name(site_id: str) -> str:
    return checked_site_identifier(f"site_{site_key(site_id)}")


# Administrative connections a worker keeps open to each site-database server. A claim holds one for a few
# statements, so a handful serve a burst of creations; each saves a site creation a new backend on the server
# (its fork and sign-in) and the driver's handshake (bench.sites, docs/benchmarks.md).
ADMIN_CONNECTIONS_PER_SERVER = 4


class AdminConnections:
    """One worker's pools of administrative connections, one pool per site-database server (by its URL)."""

    def __init__(self) -> None:
        self._pools: dict[str, asyncpg.Pool] = {}
        self._lock = asyncio.Lock()

    async def pool(self, dsn: str) -> asyncpg.Pool:
        async with self._lock:
            pool = self._pools.get(dsn)
            if pool is None:
                # Opened as needed: a worker that never creates a site holds none.
                pool = await asyncpg.create_pool(
                    dsn,
                    min_size=0,
                    max_size=ADMIN_CONNECTIONS_PER_SERVER,
                    timeout=CONNECT_TIMEOUT_SECONDS,
                    reset=_rollback_if_in_transaction,
                )
                self._pools[dsn] = pool
            return pool

    def discard(self, dsn: str, pool: asyncpg.Pool) -> None:
        """Drop the pool of a server that stopped answering, and its connections with it, at once: each was opened
        to that server, and each would cost its next user the bounded wait again. The next use opens a new pool."""
        if self._pools.get(dsn) is pool:
            del self._pools[dsn]
        pool.terminate()

    def discarded(self, dsn: str, pool: asyncpg.Pool) -> bool:
        return self._pools.get(dsn) is not pool

    async def close(self) -> None:
        pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            # Closing waits for the server to see each connection go; one that does not answer is left at once
            # (asyncpg terminates a pool whose close is cut short).
            with suppress(TimeoutError):
                async with asyncio.timeout(CONNECT_TIMEOUT_SECONDS):
                    await pool.close()


async def _rollback_if_in_transaction(connection: asyncpg.Connection) -> None:
    """The reset between two users of an administrative connection. The work done on one sets no session state
    (no SET, LISTEN, cursor or advisory lock), so the driver's own reset, a round trip at every release, would
    undo nothing; a transaction an error interrupted is all that can be left."""
    if connection.is_in_transaction():
        await connection.execute("ROLLBACK")


@dataclass(frozen=True)
class SiteDatabaseServer:
    """The server that hosts site databases, from an SQLAlchemy URL with an administrative user; with
    `admin_connections`, its administrative connections are taken from the worker's pool of them."""

    admin_url: str
    admin_connections: AdminConnections | None = field(default=None, compare=False)
    # For a URL an admin registered in the catalog: its host is checked before each connection (lifecycle/
    # outbound.py). None for the operator's own SITE_DATABASE_URL.
    outbound: OutboundRule | None = field(default=None, compare=False)
    # Its name in the catalog, when it came from there.
    name: str | None = field(default=None, compare=False)

    def dsn(self, database: str | None = None) -> str:
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
        SiteDatabaseServerUnreachable (activities/sites/reachability.py); a registered host that resolves to an
        address the outbound rule refuses raises OutboundRefused."""
        if self.outbound is not None:
            await self.outbound.check_host(self.host, self.port)
        dsn, pool = self.dsn(database), None
        try:
            if database is None and self.admin_connections is not None:
                pool = await self.admin_connections.pool(dsn)
                pooled = await pool.acquire()
                async with _given_back(pooled, partial(pool.release, pooled, timeout=CONNECT_TIMEOUT_SECONDS)):
                    yield pooled
                return
            connection = await asyncpg.connect(dsn, timeout=CONNECT_TIMEOUT_SECONDS)
            async with _given_back(connection, partial(connection.close, timeout=CONNECT_TIMEOUT_SECONDS)):
                yield connection
        except Exception as err:
            if pool is not None and self.admin_connections is not None:
                if is_unreachable(err):
                    self.admin_connections.discard(dsn, pool)
                elif isinstance(err, asyncpg.InterfaceError) and self.admin_connections.discarded(dsn, pool):
                    # Its pool was dropped under it, by a step that found the server not answering.
                    raise SiteDatabaseServerUnreachable(f"{type(err).__name__}: {err}", self.name) from err
            if is_unreachable(err):
                raise SiteDatabaseServerUnreachable(f"{type(err).__name__}: {err}", self.name) from err
            raise

    async def create(
        self,
        name: str,
        password: str,
        connection_limit: int,
        claim: ClaimFromPool | None = None,
        touch: Touch | None = None,
    ) -> None:
        """The site's role, allowed `connection_limit` sessions at once, and its database, reachable by it alone.

        `touch` runs once the server has answered and before anything that could create something on it (the
        claim's renames, CREATE ROLE, CREATE DATABASE): a server that never answered holds nothing of the site.

        `claim` takes the site's database from the server's warm pool (lifecycle/sites/pool.py): it is asked
        whether the site holds a claim, and may take one only while nothing of the site exists here yet, so a
        site started the slow way (its role made by an attempt that found the pool empty) finishes that way.
        """
        checked_site_identifier(name)
        limit = int(connection_limit)  # interpolated into DDL: an integer and nothing else
        async with self.connect() as admin:
            role_limit, database = await admin.fetchrow(
                "SELECT (SELECT rolconnlimit FROM pg_roles WHERE rolname = $1),"
                " EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)",
                name,
                timeout=FIRST_ANSWER_TIMEOUT_SECONDS,
            )
            if touch is not None:
                await touch()
            pool_name = await claim(role_limit is None and not database) if claim is not None else None
            if pool_name is not None:
                await _adopt(admin, checked_pool_identifier(pool_name), name, password, limit)
                return
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
        """The database and the role named `name` (a site's, or a pool's), whichever exist."""
        checked_droppable_identifier(name)
        async with self.connect() as admin:
            if await admin.fetchval(
                "SELECT 1 FROM pg_database WHERE datname = $1", name, timeout=FIRST_ANSWER_TIMEOUT_SECONDS
            ):
                await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            await admin.execute(f"DROP ROLE IF EXISTS {name}")

    async def exists(self, name: str) -> bool:
        async with self.connect() as admin:
            return bool(
                await admin.fetchval(
                    "SELECT 1 FROM pg_database WHERE datname = $1", name, timeout=FIRST_ANSWER_TIMEOUT_SECONDS
                )
            )


@asynccontextmanager
async def _given_back(connection: asyncpg.Connection, give_back: Callable[[], Awaitable[None]]) -> AsyncIterator[None]:
    """Use `connection`, then `give_back` (a release to its pool, or a close), bounded by CONNECT_TIMEOUT_SECONDS.

    The bound is what lets a step cut short on a server that stopped (SIGSTOP, a frozen VM) end. A statement cut
    short (its step cancelled, as a first try is at its timeout, or past its own `timeout=`) has asyncpg send the
    server a cancel request, over a connection of its own, and wait for the server to close that connection; a
    release or a close waits for that first, a release shielded from cancellation, and with no timeout for ever,
    since a stopped server's kernel accepts the connection and nobody closes it. With the bound, the driver drops
    the connection instead; a live server acknowledges the cancel in milliseconds, and the connection is reused.

    A server that did not answer (the statement's bound, a connection lost) gets no cancel request at all: the
    connection is dropped at once. A failure while giving it back never hides the one that ended its use.
    """
    try:
        yield
    except BaseException as err:
        if is_unreachable(err):
            with suppress(asyncpg.InterfaceError):  # released already: the driver saw it close
                connection.terminate()
        with suppress(Exception):
            await give_back()
        raise
    await give_back()


async def _adopt(admin: asyncpg.Connection, pool_name: str, site_name: str, password: str, limit: int) -> None:
    """Make a claimed pool database the site's: the pool's role renamed to the site's (now able to log in, with its
    password and connection limit) and its database renamed too. The tables belong to the role, and so does the
    database, so both follow the rename: nothing is touched one by one. Idempotent: a retry or a reset run finds
    what an earlier attempt renamed and finishes the rest; a pool database found missing is made the slow way
    (bootstrap then creates the tables)."""
    site_role, pool_role, site_database, pool_database = await admin.fetchrow(
        "SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $2), EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1),"
        " EXISTS (SELECT 1 FROM pg_database WHERE datname = $2), EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)",
        pool_name,
        site_name,
    )
    # On the claim's path every statement is transactional, so they go as one message: one round trip, and one
    # transaction, in which the role and the database change together.
    statements = []
    if not site_role:
        if pool_role:
            statements.append(f"ALTER ROLE {pool_name} RENAME TO {site_name}")
        else:
            statements.append(f"CREATE ROLE {site_name}")
            statements.append(f"GRANT {site_name} TO CURRENT_USER WITH INHERIT TRUE, SET TRUE")
    # The verifier, never the password, reaches the server.
    statements.append(f"ALTER ROLE {site_name} LOGIN CONNECTION LIMIT {limit} PASSWORD '{scram_verifier(password)}'")
    if not site_database and pool_database:
        # The pool's REVOKE CONNECT FROM PUBLIC comes with it.
        statements.append(f"ALTER DATABASE {pool_name} RENAME TO {site_name}")
    grant_connect = f"GRANT CONNECT ON DATABASE {site_name} TO {site_name}"
    if site_database or pool_database:
        await admin.execute(";\n".join([*statements, grant_connect]))
        return
    # The pool database is missing: made the slow way. CREATE DATABASE runs in no transaction, so alone.
    await admin.execute(";\n".join(statements))
    await admin.execute(f"CREATE DATABASE {site_name} OWNER {site_name}")
    await admin.execute(f"REVOKE CONNECT ON DATABASE {site_name} FROM PUBLIC")
    await admin.execute(grant_connect)
