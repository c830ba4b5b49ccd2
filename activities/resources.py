"""What activities share inside one worker process: settings, the database pool, the Temporal client, the object
store."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker
from temporalio.client import Client

from lifecycle.db.engine import make_engine, make_sessionmaker
from lifecycle.object_store import ObjectStore
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

    async def close(self) -> None:
        await self.objects.close()
        await self.engine.dispose()
