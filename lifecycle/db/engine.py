"""Async SQLAlchemy engines and sessions."""

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine


def make_engine(database_url: str, *, pool_size: int = 10) -> AsyncEngine:
    # pre_ping lets the pool drop connections that died while PostgreSQL restarted.
    return create_async_engine(database_url, pool_size=pool_size, max_overflow=20, pool_pre_ping=True)


def make_sessionmaker(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    return async_sessionmaker(engine, expire_on_commit=False)
