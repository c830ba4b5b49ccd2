"""What activities share inside one worker process: settings, the database pool, the Temporal client, the object
store, an HTTP client."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker
from temporalio.client import Client

from activities.sites.database import AdminConnections
from lifecycle.db.engine import make_engine, make_sessionmaker
from lifecycle.object_store import ObjectStore
from lifecycle.sealing import KeyRing
from lifecycle.settings import Settings


@dataclass(frozen=True)
class ActivityResources:
    settings: Settings
    engine: AsyncEngine
    sessionmaker: async_sessionmaker[AsyncSession]
    client: Client
    objects: ObjectStore

    @classmethod
    def create(cls, settings: Settings, client: Client) -> ActivityResources:
        engine = make_engine(settings.database_url)
        return cls(
            settings=settings,
            engine=engine,
            sessionmaker=make_sessionmaker(engine),
            client=client,
            objects=ObjectStore(settings),
        )

    @cached_property
    def http(self) -> httpx.AsyncClient:
        """One pool of connections for the processors' erasure requests and the alerts' webhook: a client per
        request built an SSL context each time (about 20 ms of CPU) and kept no connection for the next attempt.
        Made at its first use, as most workers (every test's) never send one. Timeouts are set per request."""
        return httpx.AsyncClient()

    @cached_property
    def keys(self) -> KeyRing:
        """The keys that open the stored secrets (lifecycle/sealing.py); the worker reads them as it starts."""
        return KeyRing(self.settings)

    @cached_property
    def site_admin_connections(self) -> AdminConnections:
        """The administrative connections the site steps keep to each site-database server."""
        return AdminConnections()

    async def close(self) -> None:
        if "http" in self.__dict__:
            await self.http.aclose()
        if "site_admin_connections" in self.__dict__:
            await self.site_admin_connections.close()
        await self.objects.close()
        await self.engine.dispose()
