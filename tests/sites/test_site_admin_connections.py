"""The administrative connections a worker keeps open to a site-database server (activities/sites/database.py):
one backend serves creation after creation, and a server that went away and came back is reached again, while
one that is down reads as unreachable, as it did with a connection per call."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from activities.sites.database import AdminConnections, SiteDatabaseServer, site_database_name
from activities.sites.reachability import SiteDatabaseServerUnreachable
from devstack.ports import free_port
from devstack.postgres import PostgresServer

pytestmark = pytest.mark.slow  # it kills processes


async def _backend(server: SiteDatabaseServer) -> int:
    async with server.connect() as admin:
        return int(await admin.fetchval("SELECT pg_backend_pid()"))


async def test_one_backend_serves_each_creation_and_a_killed_server_is_reached_again_once_back(
    tmp_path: Path,
) -> None:
    postgres = PostgresServer(tmp_path / "sites", free_port(), durable=False)
    postgres.start()
    connections = AdminConnections()
    server = SiteDatabaseServer(postgres.url(), connections)
    try:
        first, second = (site_database_name(str(uuid.uuid4())) for _ in range(2))
        backend = await _backend(server)
        await server.create(first, "first-password", 5)
        assert await server.exists(first)
        assert await _backend(server) == backend, "each call opened a backend of its own"

        postgres.kill()
        with pytest.raises(SiteDatabaseServerUnreachable):
            await server.exists(first)
        postgres.start()
        # The kept connection died with the server: the next call opens another, and the steps go on.
        await server.create(second, "second-password", 5)
        assert await server.exists(first) and await server.exists(second)
        assert await _backend(server) != backend
    finally:
        await connections.close()
        postgres.stop()
