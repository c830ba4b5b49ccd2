"""Async SQLAlchemy engines and sessions."""

from typing import Any

from sqlalchemy import event
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine
from sqlalchemy.pool import ConnectionPoolEntry, PoolProxiedConnection

from lifecycle.tracing import trace_engine

# The most connections a process holds. They are opened as needed and kept once opened: SQLAlchemy closes an
# overflow connection as soon as it is returned, so a process busier than its pool would open and close one per
# checkout, each costing PostgreSQL a new backend and the client a handshake. A worker runs more activities at
# once than a pool of 10 holds.
POOL_CAPACITY = 30


def make_engine(database_url: str, *, pool_size: int = POOL_CAPACITY, max_overflow: int = 0) -> AsyncEngine:
    engine = create_async_engine(database_url, pool_size=pool_size, max_overflow=max_overflow)
    event.listen(engine.sync_engine, "checkout", _refuse_closed_connection)
    trace_engine(engine)
    return engine


def _refuse_closed_connection(dbapi_connection: Any, record: ConnectionPoolEntry, proxy: PoolProxiedConnection) -> None:
    """Drop a pooled connection that PostgreSQL closed (a restart, an admin's terminate) before handing it out.

    asyncpg reads the server's goodbye on the idle socket as soon as it arrives and marks the connection closed,
    so this check costs no round trip. SQLAlchemy's pool_pre_ping did the same job with BEGIN, `;` and ROLLBACK on
    every checkout: a third of the API's CPU per `DELETE /bots/{id}` (bench.api, docs/benchmarks.md). Raising
    DisconnectionError makes the pool discard this connection and check out or open another.
    """
    if dbapi_connection.driver_connection.is_closed():
        raise DisconnectionError("PostgreSQL closed this pooled connection")


def make_sessionmaker(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    return async_sessionmaker(engine, expire_on_commit=False)
