"""Secrets only the workers read (lifecycle/sealing.py), on real servers: what an admin registers through the API,
run as a role that lifecycle/migrate.py grants as it grants docker-compose's API, is in no dump of the product's
database (the real `pg_dump`), and that role cannot read it back nor publish a key; the workers seal rows stored in
the clear as they start; a rotation (`python -m lifecycle.sealing rotate`, as operators run it) re-seals every row,
after which the old key opens nothing and can go."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import httpx
import pytest
import pytest_asyncio
from sqlalchemy.engine import make_url
from temporalio.client import Client

from api.app import create_app
from devstack.postgres import BIN_DIR, PostgresServer
from lifecycle.migrate import grant_dml, upgrade_async
from lifecycle.sealing import KeyRing, SealingKeyError, sealed_to
from lifecycle.settings import SEALING_KEYS_FILE, Settings
from tests.conftest import ADMIN_HEADERS
from tests.db import connection
from tests.deletion.processor_servers import new_secret
from tests.processes import run_command, settings_environment
from tests.workers import own_queue, own_worker, publish_sealing_key

PASSWORD = "server-password-" + secrets.token_hex(8)
_STORED = (
    "SELECT (SELECT secret FROM processors WHERE name = $1) AS secret,"
    " (SELECT admin_url FROM site_db_servers WHERE name = $2) AS url"
)


@pytest_asyncio.fixture
async def own(postgres_server: PostgresServer, settings: Settings, tmp_path: Path) -> Settings:
    """A database, data directory (so a key file) and queue of the test's own."""
    name = f"sealed_{uuid.uuid4().hex[:8]}"
    await asyncio.to_thread(postgres_server.create_database, name)
    url = postgres_server.url(name)
    await upgrade_async(url)
    data_dir = tmp_path / "data"
    return own_queue(settings).model_copy(
        update={
            "database_url": url,
            "data_dir": data_dir,
            "exports_dir": data_dir / "exports",
            "sites_root": data_dir / "sites",
        }
    )


@contextlib.asynccontextmanager
async def _api(settings: Settings, client: Client) -> AsyncIterator[httpx.AsyncClient]:
    application = create_app(settings, temporal_client=client)
    async with application.router.lifespan_context(application):
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as api:
            yield api


def _server_url(postgres_server: PostgresServer) -> str:
    return f"postgresql+asyncpg://site_provisioner:{PASSWORD}@127.0.0.1:{postgres_server.port}/postgres"


async def _register(api: httpx.AsyncClient, processor: str, secret: str, server: str, url: str) -> list[int]:
    """PUT the processor and the server; their answers' statuses, which never carry the secrets."""
    answers = [
        await api.put(
            f"/processors/{processor}",
            json={"url": "http://127.0.0.1:9/erasure", "secret": secret},
            headers=ADMIN_HEADERS,
        ),
        await api.put(
            f"/site-db-servers/{server}", json={"url": url, "capacity": 1, "pool_target": 0}, headers=ADMIN_HEADERS
        ),
    ]
    for answer in answers:
        assert secret not in answer.text and PASSWORD not in answer.text
    return [answer.status_code for answer in answers]


def _names() -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:8]
    return f"crm-{suffix}", f"db-{suffix}"


async def test_no_secret_is_stored_until_a_worker_has_published_its_key(own: Settings, temporal_client: Client) -> None:
    processor, server = _names()
    async with _api(own, temporal_client) as api:
        answer = await api.put(
            f"/processors/{processor}",
            json={"url": "http://127.0.0.1:9/erasure", "secret": new_secret()},
            headers=ADMIN_HEADERS,
        )
        assert answer.status_code == 503, answer.text
        assert answer.headers["content-type"] == "application/problem+json"
        assert "No worker has published its sealing key" in answer.json()["detail"]
        await publish_sealing_key(own)
        assert await _register(api, processor, new_secret(), server, "postgresql+asyncpg://x@127.0.0.1/p") == [201, 201]


async def test_the_api_stores_secrets_no_dump_shows_and_its_role_cannot_read(
    own: Settings, postgres_server: PostgresServer, temporal_client: Client, tmp_path: Path
) -> None:
    role = f"api_{uuid.uuid4().hex[:8]}"
    database = make_url(own.database_url).database
    await asyncio.to_thread(
        postgres_server.psql, f"CREATE ROLE {role} LOGIN; GRANT CONNECT ON DATABASE {database} TO {role}"
    )
    await grant_dml(own.database_url, [], [role])
    await publish_sealing_key(own)
    as_api = own.model_copy(
        update={"database_url": make_url(own.database_url).set(username=role).render_as_string(hide_password=False)}
    )
    processor, server = _names()
    secret, url = new_secret(), _server_url(postgres_server)
    async with _api(as_api, temporal_client) as api:
        assert await _register(api, processor, secret, server, url) == [201, 201]
        assert await _register(api, processor, secret, server, url) == [200, 200]  # a change, as the role
        listed = [await api.get(path, headers=ADMIN_HEADERS) for path in ("/processors", "/site-db-servers")]
        assert [answer.status_code for answer in listed] == [200, 200]
        assert processor in listed[0].text and server in listed[1].text

    dump = await asyncio.to_thread(
        subprocess.run,
        [str(BIN_DIR / "pg_dump"), make_url(own.database_url).set(drivername="postgresql").render_as_string()],
        check=True,
        capture_output=True,
        text=True,
    )
    assert processor in dump.stdout and server in dump.stdout
    assert secret not in dump.stdout and secret.removeprefix("whsec_") not in dump.stdout
    assert PASSWORD not in dump.stdout and url not in dump.stdout

    # Stored sealed, to the published key: the workers open them.
    async with connection(own.database_url) as conn:
        stored = await conn.fetchrow(_STORED, processor, server)
    keys = KeyRing(own)
    assert sealed_to(stored["secret"]) == sealed_to(stored["url"]) == keys.newest.key_id
    assert (keys.open(stored["secret"]), keys.open(stored["url"])) == (secret, url)

    api_role = await asyncpg.connect(make_url(as_api.database_url).set(drivername="postgresql").render_as_string())
    try:
        for statement in (
            "SELECT secret FROM processors",
            "SELECT admin_url FROM site_db_servers",
            "INSERT INTO receipt_signing_keys (key_id, public_key) VALUES ('forged', 'forged')",
            "INSERT INTO sealing_keys (key_id, public_key) VALUES ('forged', 'forged')",
        ):
            with pytest.raises(asyncpg.InsufficientPrivilegeError, match="permission denied for table"):
                await api_role.execute(statement)
    finally:
        await api_role.close()


async def test_a_worker_seals_the_secrets_stored_in_the_clear_as_it_starts(
    own: Settings, temporal_client: Client
) -> None:
    """Rows from before sealing: the first worker of this release seals them before it takes any work."""
    processor, server = _names()
    secret, url = new_secret(), f"postgresql+asyncpg://site_provisioner:{PASSWORD}@127.0.0.1:5432/postgres"
    async with connection(own.database_url) as conn:
        await conn.execute(
            "INSERT INTO processors (name, url, secret) VALUES ($1, 'http://127.0.0.1:9/', $2)", processor, secret
        )
        await conn.execute(
            "INSERT INTO site_db_servers (name, admin_url, capacity, pool_target, state) VALUES ($1, $2, 1, 0, 'down')",
            server,
            url,
        )
    async with own_worker(own, temporal_client):
        pass
    async with connection(own.database_url) as conn:
        stored = await conn.fetchrow(_STORED, processor, server)
        published = await conn.fetchval("SELECT key_id FROM sealing_keys")
    assert sealed_to(stored["secret"]) == sealed_to(stored["url"]) == published
    assert (KeyRing(own).open(stored["secret"]), KeyRing(own).open(stored["url"])) == (secret, url)


async def _rotate(settings: Settings, **overrides: str) -> subprocess.CompletedProcess[str]:
    """`python -m lifecycle.sealing rotate`, as an operator runs it."""
    env = settings_environment(settings, **overrides)
    command = [sys.executable, "-m", "lifecycle.sealing", "rotate"]
    return await asyncio.to_thread(run_command, command, env, settings.data_dir / "commands", timeout=60)


async def _stored_keys(settings: Settings, processor: str, server: str) -> tuple[str | None, str | None, str]:
    async with connection(settings.database_url) as conn:
        stored = await conn.fetchrow(_STORED, processor, server)
        published = await conn.fetchval("SELECT key_id FROM sealing_keys")
    return sealed_to(stored["secret"]), sealed_to(stored["url"]), published


async def test_a_rotation_reseals_every_row_and_the_old_key_can_go(
    own: Settings, postgres_server: PostgresServer, temporal_client: Client
) -> None:
    processor, server = _names()
    secret, url = new_secret(), _server_url(postgres_server)
    await publish_sealing_key(own)
    key_file = own.data_dir / SEALING_KEYS_FILE
    first_secret = key_file.read_text().strip()
    first = KeyRing(own).newest.key_id
    async with _api(own, temporal_client) as api:
        assert await _register(api, processor, secret, server, url) == [201, 201]
        assert await _stored_keys(own, processor, server) == (first, first, first)

        # The key file, as `make run` keeps it: the command makes the key, re-seals, and drops the old one.
        rotated = await _rotate(own)
        assert rotated.returncode == 0, rotated.stderr
        second_secret = key_file.read_text().strip()
        assert "\n" not in second_secret and second_secret != first_secret
        second = KeyRing(own).newest.key_id
        assert await _stored_keys(own, processor, server) == (second, second, second)
        assert f"sealing key {second} is published; 2 stored secrets re-sealed to it; 1 older keys dropped" in (
            rotated.stdout
        )
        audit = (await api.get("/audit-events", headers=ADMIN_HEADERS)).json()["events"]
        rotations = [(event["action"], event["target"]) for event in audit if event["target"].startswith("sealing")]
        assert rotations == [("rotate the sealing key", f"sealing-keys/{second}")]

        # SEALING_KEYS, as docker-compose gives it: the new secret first, the one in use after it.
        third_secret = secrets.token_hex(32)
        both = f"{third_secret},{second_secret}"
        rotated = await _rotate(own, SEALING_KEYS=both)
        assert rotated.returncode == 0, rotated.stderr
        assert "remove the older secrets from the workers' SEALING_KEYS" in rotated.stdout
        third = KeyRing(own.model_copy(update={"sealing_keys": third_secret})).newest.key_id
        assert await _stored_keys(own, processor, server) == (third, third, third)
        # Sealed afresh by the API from now on too.
        assert await _register(api, processor, secret, server, url) == [200, 200]
        assert await _stored_keys(own, processor, server) == (third, third, third)

    # The new key alone opens every row; the old ones open none.
    async with connection(own.database_url) as conn:
        stored = await conn.fetchrow(_STORED, processor, server)
    only_new = KeyRing(own.model_copy(update={"sealing_keys": third_secret}))
    assert (only_new.open(stored["secret"]), only_new.open(stored["url"])) == (secret, url)
    for old in (first_secret, second_secret):
        with pytest.raises(SealingKeyError, match="which this worker does not hold"):
            KeyRing(own.model_copy(update={"sealing_keys": old})).open(stored["secret"])
    # A worker given the new key alone starts, and one given only an old key does not.
    async with own_worker(own.model_copy(update={"sealing_keys": third_secret}), temporal_client):
        pass
    with pytest.raises(SealingKeyError, match=f"the published sealing key is {third}"):
        async with own_worker(own.model_copy(update={"sealing_keys": second_secret}), temporal_client):
            pass
