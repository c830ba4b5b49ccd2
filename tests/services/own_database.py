"""A service's database of a test's own, on the session's PostgreSQL server, with the service's schema applied."""

from __future__ import annotations

import uuid

from devstack.postgres import PostgresServer
from services.catalog import ServiceDefinition
from services.runtime.seeding import prepare


async def own_service_database(postgres_server: PostgresServer, definition: ServiceDefinition, prefix: str) -> str:
    """The URL of a new database named `prefix` and a random suffix, holding `definition`'s tables."""
    url = postgres_server.url(f"{prefix}_{uuid.uuid4().hex[:8]}")
    await prepare(definition, url)
    return url
