"""Site database roles are isolated, and their secrets are never exposed.

Each site's role reaches its own database and nothing else of ours; its password reaches the server only as a
SCRAM verifier; the files holding it are private from the moment they exist.
"""

from __future__ import annotations

import asyncio
import os
import stat
import subprocess
import sys
import uuid

import asyncpg
import pytest
from sqlalchemy.engine import make_url

from activities.sites import files as site_files
from activities.sites.database import SiteDatabaseServer, site_database_name
from activities.sites.scram import ScramVerifier
from devstack.local_env import SITE_PROVISIONER, StackPorts, stack_environment
from devstack.postgres import PostgresServer
from lifecycle.settings import Settings

# Tries of a drop a superuser's backend refuses (_drop_as_the_step_retries).
DROP_ATTEMPTS = 5


def _dsn(settings: Settings, *, user: str, database: str, password: str | None = None) -> str:
    url = make_url(settings.site_admin_database_url).set(
        drivername="postgresql", username=user, database=database, password=password
    )
    return url.render_as_string(hide_password=False)


async def _make_site(settings: Settings) -> tuple[str, str, str]:
    site_id = str(uuid.uuid4())
    name = site_database_name(site_id)
    password = site_files.site_password(settings.sites_path, site_id, writer="test")
    await SiteDatabaseServer(settings.site_admin_database_url).create(
        name, password, settings.site_role_connection_limit
    )
    return site_id, name, password


async def _drop(settings: Settings, *names: str) -> None:
    server = SiteDatabaseServer(settings.site_admin_database_url)
    for name in names:
        await server.drop(name)


async def test_a_site_role_reaches_its_own_database_only(settings: Settings) -> None:
    _, own, own_password = await _make_site(settings)
    _, other, _ = await _make_site(settings)
    app_database = make_url(settings.database_url).database
    assert app_database is not None
    try:
        connection = await asyncpg.connect(_dsn(settings, user=own, database=own, password=own_password))
        assert await connection.fetchval("SELECT current_user") == own
        await connection.close()
        for refused in (other, app_database):
            with pytest.raises(asyncpg.InsufficientPrivilegeError, match="permission denied for database"):
                await asyncpg.connect(_dsn(settings, user=own, database=refused, password=own_password))
        # Running the step again (a retry, a reset) keeps it locked down.
        site_id, name, password = await _make_site(settings)
        await SiteDatabaseServer(settings.site_admin_database_url).create(
            name, password, settings.site_role_connection_limit
        )
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await asyncpg.connect(_dsn(settings, user=own, database=name, password=own_password))
        await _drop(settings, name)
        site_files.forget_site_password(settings.sites_path, site_id)
    finally:
        await _drop(settings, own, other)


async def test_a_site_role_cannot_reach_the_maintenance_databases(settings: Settings) -> None:
    _, name, password = await _make_site(settings)
    try:
        for maintenance in ("postgres", "template1"):
            with pytest.raises(asyncpg.InsufficientPrivilegeError, match="permission denied for database"):
                await asyncpg.connect(_dsn(settings, user=name, database=maintenance, password=password))
    finally:
        await _drop(settings, name)


async def test_a_site_role_holds_at_most_its_connection_limit(settings: Settings) -> None:
    _, name, password = await _make_site(settings)
    limit = settings.site_role_connection_limit
    dsn = _dsn(settings, user=name, database=name, password=password)
    sessions: list[asyncpg.Connection] = []
    try:
        for _ in range(limit):
            sessions.append(await asyncpg.connect(dsn))
        with pytest.raises(asyncpg.TooManyConnectionsError, match=f'too many connections for role "{name}"'):
            sessions.append(await asyncpg.connect(dsn))
        # One session ends: its place is free again.
        await sessions.pop().close()
        sessions.append(await asyncpg.connect(dsn))
        # A retried step (a role an attempt already made) keeps the limit.
        await SiteDatabaseServer(settings.site_admin_database_url).create(name, password, limit)
        with pytest.raises(asyncpg.TooManyConnectionsError):
            sessions.append(await asyncpg.connect(dsn))
    finally:
        for session in sessions:
            await session.close()
        await _drop(settings, name)


async def test_a_site_role_signs_in_with_its_password_and_only_with_it(settings: Settings) -> None:
    # The server checks site roles by SCRAM (devstack/postgres.py), so this exercises the verifier we sent.
    _, name, password = await _make_site(settings)
    try:
        connection = await asyncpg.connect(_dsn(settings, user=name, database=name, password=password))
        assert await connection.fetchval("SELECT current_user") == name
        await connection.close()
        for wrong in (password + "x", None):
            with pytest.raises(asyncpg.InvalidPasswordError):
                await asyncpg.connect(_dsn(settings, user=name, database=name, password=wrong))
    finally:
        await _drop(settings, name)


async def test_the_server_only_ever_sees_a_scram_verifier(settings: Settings) -> None:
    _, name, password = await _make_site(settings)
    try:
        admin = await asyncpg.connect(_dsn(settings, user="postgres", database="postgres"))
        try:
            stored = await admin.fetchval("SELECT rolpassword FROM pg_authid WHERE rolname = $1", name)
        finally:
            await admin.close()
        assert stored.startswith("SCRAM-SHA-256$4096:")
        assert password not in stored
        # The verifier is the one for this password, so password authentication would accept it.
        assert ScramVerifier.parse(stored).matches(password)
        assert not ScramVerifier.parse(stored).matches(password + "x")
    finally:
        await _drop(settings, name)


def test_a_writer_killed_mid_secret_leaves_nothing_once_its_step_runs_again(settings: Settings) -> None:
    """A kill -9 between writing a candidate and removing it (the chaos drill found one) leaves a copy of a secret;
    the step's next attempt removes it, and so does the site's undo."""
    site_id = str(uuid.uuid4())
    credentials = settings.sites_path / site_files.CREDENTIALS_DIR
    key = site_files.site_key(site_id)
    credentials.mkdir(parents=True, exist_ok=True, mode=0o700)
    root = site_files.site_directory(settings.sites_path, site_id)
    root.mkdir(parents=True)
    # What a killed database step and a killed filesystem step left behind.
    (credentials / f"{key}.database.tmp").write_text("a secret never linked")
    (root / "wp-config.tmp").write_text("<?php half a config")
    try:
        site_files.create_site_tree(settings.sites_path, site_id, site_database_name(site_id), "127.0.0.1", 5432)
        assert not (root / "wp-config.tmp").exists()
        assert (credentials / f"{key}.database.tmp").exists()  # another step's: only it knows it is stale
        password = site_files.site_password(settings.sites_path, site_id, writer="database")
        assert not list(credentials.glob(f"{key}*.tmp"))
        assert password in (root / "wp-config.php").read_text()
        # An undo after a kill of the filesystem step removes that step's candidate too.
        (credentials / f"{key}.filesystem.tmp").write_text("another")
        site_files.forget_site_password(settings.sites_path, site_id)
        assert not list(credentials.glob(f"{key}*"))
    finally:
        site_files.remove_site_tree(settings.sites_path, site_id)
        site_files.forget_site_password(settings.sites_path, site_id)


def test_secret_files_are_private_from_the_start(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    # Under a umask that leaves new files world-readable, and with no way to restrict a file after writing it,
    # the secrets can only end up 0600 if they were created so.
    def no_chmod(*args: object, **kwargs: object) -> None:
        raise AssertionError("a secret file was restricted after it was created")

    monkeypatch.setattr(os, "chmod", no_chmod)
    monkeypatch.setattr(os, "fchmod", no_chmod)
    previous_umask = os.umask(0o022)
    try:
        site_id = str(uuid.uuid4())
        password = site_files.site_password(settings.sites_path, site_id, writer="test")
        root = site_files.create_site_tree(settings.sites_path, site_id, site_database_name(site_id), "127.0.0.1", 5432)
    finally:
        os.umask(previous_umask)
    try:
        for secret in (
            settings.sites_path / site_files.CREDENTIALS_DIR / site_files.site_key(site_id),
            root / "wp-config.php",
        ):
            assert stat.S_IMODE(secret.stat().st_mode) == 0o600, secret
        assert password in (root / "wp-config.php").read_text()
        # Nothing was left half-written beside them.
        assert not list(settings.sites_path.glob(f"**/{site_files.site_key(site_id)}*.tmp"))
        assert not list(root.glob("*.tmp"))
    finally:
        site_files.remove_site_tree(settings.sites_path, site_id)
        site_files.forget_site_password(settings.sites_path, site_id)


def test_a_malformed_identifier_is_refused_even_without_asserts() -> None:
    # Under `python -O`, where an assert would have let it through into the DDL.
    program = (
        "from activities.sites.database import checked_site_identifier\n"
        "try:\n    checked_site_identifier('site_0; DROP DATABASE lifecycle')\n"
        "except ValueError:\n    print('refused')\n"
    )
    result = subprocess.run([sys.executable, "-O", "-c", program], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "refused", result.stderr


async def test_the_local_stacks_provisioner_makes_and_drops_site_databases(
    settings: Settings, postgres_server: PostgresServer
) -> None:
    """The role `make run` provisions sites with (devstack), reached by the SITE_DATABASE_URL the stack hands the
    worker: CREATEROLE and CREATEDB only, no superuser. docker-compose makes the same role (deploy/postgres-roles.sh).

    Every statement the provisioner sends is logged, so the log shows what the server was told about passwords.
    """
    postgres_server.ensure_provisioner(SITE_PROVISIONER)
    postgres_server.ensure_provisioner(SITE_PROVISIONER)  # a restarted stack finds it made
    environment = stack_environment(settings, StackPorts(postgres=postgres_server.port))
    admin = await asyncpg.connect(_dsn(settings, user="postgres", database="postgres"))
    try:
        await admin.execute(f"ALTER ROLE {SITE_PROVISIONER} SET log_statement = 'all'")
        flags = await admin.fetchrow(
            "SELECT rolsuper, rolcreaterole, rolcreatedb FROM pg_roles WHERE rolname = $1", SITE_PROVISIONER
        )
        assert tuple(flags) == (False, True, True)
        server = SiteDatabaseServer(environment["SITE_DATABASE_URL"])
        async with server.connect() as provisioner:
            assert await provisioner.fetchval("SELECT current_user") == SITE_PROVISIONER
        site_id = str(uuid.uuid4())
        name = site_database_name(site_id)
        password = site_files.site_password(settings.sites_path, site_id, writer="test")
        limit = settings.site_role_connection_limit
        await server.create(name, password, limit)
        await server.create(name, password, limit)  # a retried step changes nothing
        assert not await admin.fetchval("SELECT has_database_privilege('public', $1, 'CONNECT')", name), (
            "PUBLIC may still connect"
        )
        # A role left without a limit (made by an earlier release) gets it from the next attempt, which the
        # provisioner, no superuser, may give.
        await admin.execute(f"ALTER ROLE {name} CONNECTION LIMIT -1")
        await server.create(name, password, limit)
        assert await admin.fetchval("SELECT rolconnlimit FROM pg_roles WHERE rolname = $1", name) == limit
        async with server.connect(name) as site_db:
            await site_db.execute(f"SET ROLE {name}; CREATE TABLE wp_probe (id int)")
        # The site's own role, signed in with its password, is still connected when the teardown comes: the
        # provisioner's DROP ... WITH (FORCE) must be allowed to end that session.
        site_session = await asyncpg.connect(_dsn(settings, user=name, database=name, password=password))
        try:
            assert await server.exists(name)
            await _drop_as_the_step_retries(server, name)
            assert not await server.exists(name)
            assert not await admin.fetchval("SELECT 1 FROM pg_roles WHERE rolname = $1", name)
            assert site_session.is_closed() or not await _still_serves(site_session)
        finally:
            site_session.terminate()
        site_files.forget_site_password(settings.sites_path, site_id)

        log = postgres_server.log_path.read_text(errors="replace")
        assert password not in log
        assert f"CREATE ROLE {name} LOGIN CONNECTION LIMIT {limit} PASSWORD 'SCRAM-SHA-256$" in log, (
            "statement logging was not on"
        )
    finally:
        # The role stays, as a stack keeps it: a worker of the session provisioning as it (SITE_DATABASE_URL) may own
        # the warm pool's template and databases on this server by now.
        await admin.execute(f"ALTER ROLE {SITE_PROVISIONER} RESET log_statement")
        await admin.close()


async def _drop_as_the_step_retries(server: SiteDatabaseServer, name: str) -> None:
    """The drop, tried again on the one refusal that is not the provisioner's to prevent, as the teardown step's
    retry policy tries it again: a superuser's backend in the database is one only a superuser may end, so FORCE
    refuses while it is there."""
    for _ in range(DROP_ATTEMPTS - 1):
        try:
            await server.drop(name)
            return
        except asyncpg.InsufficientPrivilegeError as refused:
            assert "terminate" in str(refused), refused
            await asyncio.sleep(1.0)  # the step's retry interval
    await server.drop(name)


async def _still_serves(connection: asyncpg.Connection) -> bool:
    try:
        await connection.fetchval("SELECT 1")
    except (asyncpg.PostgresError, asyncpg.InterfaceError, ConnectionError):
        return False
    return True
