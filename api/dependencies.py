"""FastAPI dependencies: settings, database session, Temporal client, and who is calling."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker
from temporalio.client import Client

from api.problems import ProblemError
from api.security import hash_api_key, tokens_equal
from lifecycle.db.models import Account, ApiKey
from lifecycle.settings import Settings
from lifecycle.temporal_client import connect

_bearer = HTTPBearer(auto_error=False, description="An account API key, or the admin token for admin endpoints.")

_UNAUTHORIZED_HEADERS = {"WWW-Authenticate": "Bearer"}


class TemporalConnection:
    """Connects on first use, so the API starts (and says it is not ready) while Temporal is down."""

    def __init__(self, settings: Settings, client: Client | None = None) -> None:
        self._settings = settings
        self._client = client
        self._lock = asyncio.Lock()

    async def get(self) -> Client:
        if self._client is None:
            async with self._lock:
                if self._client is None:
                    self._client = await asyncio.wait_for(connect(self._settings), timeout=5)
        return self._client


def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


async def get_session(request: Request) -> AsyncIterator[AsyncSession]:
    sessionmaker: async_sessionmaker[AsyncSession] = request.app.state.sessionmaker
    async with sessionmaker() as session:
        yield session


def get_engine(request: Request) -> AsyncEngine:
    engine: AsyncEngine = request.app.state.engine
    return engine


async def get_temporal(request: Request) -> Client:
    connection: TemporalConnection = request.app.state.temporal
    return await connection.get()


SettingsDep = Annotated[Settings, Depends(get_settings)]
SessionDep = Annotated[AsyncSession, Depends(get_session)]
EngineDep = Annotated[AsyncEngine, Depends(get_engine)]
TemporalDep = Annotated[Client, Depends(get_temporal)]
Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]


@dataclass(frozen=True)
class Caller:
    account_id: uuid.UUID


async def _account_for_key(session: AsyncSession, key: str) -> uuid.UUID | None:
    row = await session.execute(
        select(ApiKey.account_id)
        .join(Account, Account.id == ApiKey.account_id)
        .where(
            ApiKey.key_hash == hash_api_key(key),
            ApiKey.revoked_at.is_(None),
            Account.deletion_requested_at.is_(None),
        )
    )
    return row.scalar_one_or_none()


def api_key_of(credentials: HTTPAuthorizationCredentials | None) -> str:
    if credentials is None:
        raise ProblemError(401, "Send an API key as `Authorization: Bearer <key>`.", headers=_UNAUTHORIZED_HEADERS)
    return credentials.credentials


def unknown_api_key() -> ProblemError:
    return ProblemError(401, "The API key is unknown or revoked.", headers=_UNAUTHORIZED_HEADERS)


async def require_account(credentials: Credentials, session: SessionDep) -> Caller:
    account_id = await _account_for_key(session, api_key_of(credentials))
    if account_id is None:
        raise unknown_api_key()
    return Caller(account_id=account_id)


async def require_admin(credentials: Credentials, session: SessionDep, settings: SettingsDep) -> None:
    if credentials is None:
        raise ProblemError(
            401, "Send the admin token as `Authorization: Bearer <token>`.", headers=_UNAUTHORIZED_HEADERS
        )
    if settings.admin_token and tokens_equal(credentials.credentials, settings.admin_token):
        return
    if await _account_for_key(session, credentials.credentials) is not None:
        raise ProblemError(403, "This endpoint needs the admin token; an account API key cannot use it.")
    raise ProblemError(401, "The admin token is wrong.", headers=_UNAUTHORIZED_HEADERS)


CallerDep = Annotated[Caller, Depends(require_account)]
AdminDep = Annotated[None, Depends(require_admin)]
