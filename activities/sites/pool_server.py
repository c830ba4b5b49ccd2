"""The warm pool's work on a site-database server: the template, a pool database made from it, its claim by a
site, and what the pool's reconciler looks for (lifecycle/sites/pool.py).

A pool database and the role that owns it share one name, pool_<32 hex digits>. The role cannot log in and
CONNECT is revoked from PUBLIC, so until a claim nobody but the provisioner (a member of the role, as of every
site role) reaches it. The claim itself is SiteDatabaseServer.create's (activities/sites/database.py).
"""

from __future__ import annotations

import asyncpg

from activities.sites import wordpress_schema
from activities.sites.database import SiteDatabaseServer, checked_droppable_identifier, checked_pool_identifier
from activities.sites.reachability import FIRST_ANSWER_TIMEOUT_SECONDS
from lifecycle.sites.pool import TEMPLATE_DATABASE

_POOL_PATTERN = r"^pool_[0-9a-f]{32}$"


async def _ensure_template(admin: asyncpg.Connection, server: SiteDatabaseServer) -> None:
    """The template every pool database is cloned from: WordPress's core tables, no rows, reachable by no site."""
    # The first statement on a pooled connection, hence bounded (activities/sites/reachability.py).
    if not await admin.fetchval(
        "SELECT 1 FROM pg_database WHERE datname = $1", TEMPLATE_DATABASE, timeout=FIRST_ANSWER_TIMEOUT_SECONDS
    ):
        await admin.execute(f"CREATE DATABASE {TEMPLATE_DATABASE}")
    await admin.execute(f"REVOKE CONNECT ON DATABASE {TEMPLATE_DATABASE} FROM PUBLIC")
    # Every time, in one transaction: a pass that died between CREATE DATABASE and the tables left it empty.
    async with server.connect(TEMPLATE_DATABASE) as template:
        await wordpress_schema.create_schema(template)


async def create_pool_databases(server: SiteDatabaseServer, names: list[str]) -> None:
    """Make each named pool database (whose row says `creating`) from the template, one after another."""
    async with server.connect() as admin:
        await _ensure_template(admin, server)
        for name in names:
            await _create_pool_database(admin, server, checked_pool_identifier(name))


async def _create_pool_database(admin: asyncpg.Connection, server: SiteDatabaseServer, name: str) -> None:
    role, database = await admin.fetchrow(
        "SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1),"
        " EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)",
        name,
    )
    if not role:
        await admin.execute(f"CREATE ROLE {name} NOLOGIN")
    await admin.execute(f"GRANT {name} TO CURRENT_USER WITH INHERIT TRUE, SET TRUE")
    if not database:
        await admin.execute(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE_DATABASE} OWNER {name}")
    await admin.execute(f"REVOKE CONNECT ON DATABASE {name} FROM PUBLIC")
    # The clone's tables belong to the template's owner (the provisioner): hand them to the pool's role, so that
    # renaming the role at the claim makes them the site's.
    async with server.connect(name) as database_connection:
        await wordpress_schema.give_tables_to(database_connection, name)


async def pool_objects(server: SiteDatabaseServer) -> set[str]:
    """Every pool name the server holds a database or a role under: what the reconciler compares with the rows."""
    async with server.connect() as admin:
        rows = await admin.fetch(
            "SELECT datname AS name FROM pg_database WHERE datname ~ $1"
            " UNION SELECT rolname FROM pg_roles WHERE rolname ~ $1",
            _POOL_PATTERN,
            timeout=FIRST_ANSWER_TIMEOUT_SECONDS,
        )
    return {checked_droppable_identifier(row["name"]) for row in rows}


async def whole_pool_databases(server: SiteDatabaseServer) -> set[str]:
    """The pool names under which the server holds both the database and its role."""
    async with server.connect() as admin:
        rows = await admin.fetch(
            "SELECT datname FROM pg_database d JOIN pg_roles r ON r.rolname = d.datname WHERE datname ~ $1",
            _POOL_PATTERN,
            timeout=FIRST_ANSWER_TIMEOUT_SECONDS,
        )
    return {row["datname"] for row in rows}
