"""Async SQLAlchemy engines and sessions."""

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine

# Connections kept open, and extra ones opened under load; a process never holds more than their sum.
POOL_SIZE = 10
MAX_OVERFLOW = 20
POOL_CAPACITY = POOL_SIZE + MAX_OVERFLOW


def make_engine(database_url: str, *, pool_size: int = POOL_SIZE, max_overflow: int = MAX_OVERFLOW) -> AsyncEngine:
    # pre_ping lets the pool drop connections that died while PostgreSQL restarted.
    return create_async_engine(database_url, pool_size=pool_size, max_overflow=max_overflow, pool_pre_ping=True)


def make_sessionmaker(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    return async_sessionmaker(engine, expire_on_commit=False)
