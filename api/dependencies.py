"""FastAPI dependencies: settings, database session, Temporal client, and who is calling."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Annotated, Any, Final

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker
from temporalio.client import Client
from temporalio.service import RPCError

from api.accounts.keys import account_of_key_sql, record_use_sql
from api.admin.credentials import CredentialKind
from api.problems import ProblemError
from api.rate_limits import AccountRateLimit
from api.request_ids import request_id
from api.security import hash_api_key, tokens_equal
from api.temporal_client import TemporalUnavailable
from lifecycle.audit import append_audit_event
from lifecycle.object_store import ObjectStore
from lifecycle.settings import Settings
from lifecycle.temporal_client import TemporalMisconfigured, TemporalUnreachable, connect

_bearer = HTTPBearer(auto_error=False, description="An account API key, or the admin token for admin endpoints.")

_UNAUTHORIZED_HEADERS = {"WWW-Authenticate": "Bearer"}


class TemporalConnection:
    """Connects on first use and again after a failure, so the API starts (and says it is not ready) while
    Temporal is down, and recovers by itself once it is back.

    One connection attempt runs at a time, in a task of its own: callers wait for it at most `wait` seconds, and
    giving up does not abort it. (Status calls never wait: they read PostgreSQL only.)
    A failure is remembered for RETRY_CONNECT_AFTER, so a flood of requests during an outage does not become
    a flood of connection attempts.
    """

    CONNECT_TIMEOUT = 5.0  # seconds an attempt may take before it counts as failed
    RETRY_CONNECT_AFTER = 1.0  # seconds between attempts while Temporal is down

    def __init__(self, settings: Settings, client: Client | None = None) -> None:
        self._settings = settings
        self._client = client
        self._attempt: asyncio.Task[Client] | None = None
        self._failed_at = 0.0

    async def get(self, wait: float = CONNECT_TIMEOUT) -> Client:
        if self._client is not None:
            return self._client
        try:
            return await asyncio.wait_for(asyncio.shield(self._current_attempt()), wait)
        except TimeoutError:
            raise TemporalUnavailable("still connecting to Temporal") from None

    def _current_attempt(self) -> asyncio.Task[Client]:
        attempt = self._attempt
        retry_due = time.monotonic() - self._failed_at >= self.RETRY_CONNECT_AFTER
        if attempt is None or (attempt.done() and attempt.exception() is not None and retry_due):
            attempt = asyncio.get_running_loop().create_task(self._connect())
            # Marks the failure as seen even when every caller stopped waiting before it came.
            attempt.add_done_callback(lambda done: done.cancelled() or done.exception())
            self._attempt = attempt
        return attempt

    async def check_at_start(self) -> None:
        """The first attempt, as the API starts: a configuration that can never connect (a missing certificate
        file, TLS against a plaintext server, a refused credential) stops the API with its cause, while a Temporal
        that is only down is tried again on later requests."""
        if self._client is not None:
            return
        try:
            self._client = await asyncio.wait_for(connect(self._settings), self.CONNECT_TIMEOUT)
        except (TemporalUnreachable, OSError, TimeoutError, RPCError):
            self._failed_at = time.monotonic()

    async def _connect(self) -> Client:
        try:
            client = await asyncio.wait_for(connect(self._settings), self.CONNECT_TIMEOUT)
        except (TemporalUnreachable, TemporalMisconfigured, OSError, TimeoutError, RPCError) as err:
            self._failed_at = time.monotonic()
            raise TemporalUnavailable(f"cannot connect to Temporal: {err}") from err
        self._client = client
        return client


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


def get_rate_limit(request: Request) -> AccountRateLimit:
    limit: AccountRateLimit = request.app.state.rate_limit
    return limit


def get_object_store(request: Request) -> ObjectStore:
    store: ObjectStore = request.app.state.objects
    return store


SettingsDep = Annotated[Settings, Depends(get_settings)]
ObjectStoreDep = Annotated[ObjectStore, Depends(get_object_store)]
SessionDep = Annotated[AsyncSession, Depends(get_session)]
EngineDep = Annotated[AsyncEngine, Depends(get_engine)]
TemporalDep = Annotated[Client, Depends(get_temporal)]
RateLimitDep = Annotated[AccountRateLimit, Depends(get_rate_limit)]
Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]


# Said by an operation that anyone may call, in its OpenAPI entry (`security: []` is OpenAPI's "no credential"):
# every other operation depends on account_key_hash or admin_token, and the authorization matrix fails for one
# that does neither without saying this.
PUBLIC: Final[dict[str, Any]] = {"security": []}


@dataclass(frozen=True)
class Caller:
    account_id: uuid.UUID
    # The key it called with: what a stream token minted by this call depends on (api/streams/credentials.py).
    key_id: uuid.UUID


_ACCOUNT_OF_KEY = text(account_of_key_sql(":key_hash"))
_RECORD_USE = text(record_use_sql(":key_id"))


async def account_key_hash(credentials: Credentials) -> str:
    """The hash of the caller's account key. Every operation that takes an account key depends on this, and
    tests/trust/test_authorization_matrix.py reads the dependency to know which credential an operation needs.
    Whether the key opens an account is checked by require_account."""
    if credentials is None:
        raise ProblemError(401, "Send an API key as `Authorization: Bearer <key>`.", headers=_UNAUTHORIZED_HEADERS)
    return hash_api_key(credentials.credentials)


async def admin_token(credentials: Credentials) -> str:
    """The token the caller sent for an admin operation; like account_key_hash, it names the credential an
    operation needs, and require_admin checks it."""
    if credentials is None:
        raise ProblemError(
            401, "Send the admin token as `Authorization: Bearer <token>`.", headers=_UNAUTHORIZED_HEADERS
        )
    return credentials.credentials


async def service_token(credentials: Credentials) -> str:
    """As admin_token, for an operation a deletion service's own credential may call too (its registration)."""
    return await admin_token(credentials)


async def metrics_token(credentials: Credentials) -> str:
    """As admin_token, for reading metrics, which a metrics credential may do too."""
    return await admin_token(credentials)


AccountKeyDep = Annotated[str, Depends(account_key_hash)]
AdminTokenDep = Annotated[str, Depends(admin_token)]
ServiceTokenDep = Annotated[str, Depends(service_token)]
MetricsTokenDep = Annotated[str, Depends(metrics_token)]


async def stream_account_key_hash(credentials: Credentials) -> str | None:
    """An event stream's account key, which a stream token (api/streams/tokens.py) may stand in for, since a
    browser's EventSource cannot send `Authorization`: None when no key is sent. With neither, the stream answers
    401 as account_key_hash does; the authorization matrix counts this as an account key."""
    return None if credentials is None else hash_api_key(credentials.credentials)


async def stream_admin_token(credentials: Credentials) -> str | None:
    """As stream_account_key_hash, for the admin token."""
    return None if credentials is None else credentials.credentials


StreamAccountKeyDep = Annotated[str | None, Depends(stream_account_key_hash)]
StreamAdminTokenDep = Annotated[str | None, Depends(stream_admin_token)]


async def _caller_of_key(session: AsyncSession, key_hash: str) -> Caller | None:
    row = (await session.execute(_ACCOUNT_OF_KEY, {"key_hash": key_hash})).one_or_none()
    if row is None:
        return None
    if row.use_unrecorded:
        # At most once a minute per key (api/accounts/keys.py), committed at once: a read commits nothing else.
        await session.execute(_RECORD_USE, {"key_id": row.key_id})
        await session.commit()
    return Caller(account_id=row.account_id, key_id=row.key_id)


def unknown_api_key() -> ProblemError:
    return ProblemError(401, "The API key is unknown, revoked or expired.", headers=_UNAUTHORIZED_HEADERS)


async def require_account(key_hash: AccountKeyDep, session: SessionDep, rate_limit: RateLimitDep) -> Caller:
    """The calling account, its request counted against its rate (api/rate_limits.py)."""
    caller = await _caller_of_key(session, key_hash)
    if caller is None:
        raise unknown_api_key()
    await rate_limit.take(caller.account_id)
    return caller


# Who an admin act is recorded as (audit_events.actor, api/admin/audit.py): the bootstrap token, or an issued
# credential by its kind and name, such as `admin:alice` or `service:search-index`.
BOOTSTRAP_ACTOR: Final = "admin-token"
_ISSUED = text("SELECT kind, name FROM api_credentials WHERE secret_hash = :secret_hash AND revoked_at IS NULL")


async def _issued(session: AsyncSession, token: str) -> tuple[CredentialKind, str] | None:
    row = (await session.execute(_ISSUED, {"secret_hash": hash_api_key(token)})).one_or_none()
    return None if row is None else (CredentialKind(row.kind), row.name)


async def _actor(
    token: str, session: AsyncSession, settings: Settings, admits: Callable[[CredentialKind, str], bool], needs: str
) -> str:
    """The actor `token` stands for, if it may do what `admits` allows; otherwise the problem: 403 for a
    credential that exists but is for something else, 401 for one that opens nothing."""
    if settings.admin_token and tokens_equal(token, settings.admin_token):
        return BOOTSTRAP_ACTOR
    issued = await _issued(session, token)
    if issued is not None:
        kind, name = issued
        if kind == CredentialKind.ADMIN or admits(kind, name):
            return f"{kind}:{name}"
        raise ProblemError(403, f"This endpoint needs {needs}; a {kind} credential for {name!r} cannot use it.")
    if await _caller_of_key(session, hash_api_key(token)) is not None:
        raise ProblemError(403, f"This endpoint needs {needs}; an account API key cannot use it.")
    raise ProblemError(
        401, f"The credential is wrong or revoked; this endpoint needs {needs}.", headers=_UNAUTHORIZED_HEADERS
    )


def _admin_only(kind: CredentialKind, name: str) -> bool:
    return False


async def admin_actor(token: str, session: AsyncSession, settings: Settings) -> str:
    """The admin token or an admin credential (also for the admin event streams, api/streams/router.py)."""
    return await _actor(token, session, settings, _admin_only, "an admin credential or the admin token")


# Methods whose success is an act, recorded in the audit trail.
_ACTS: Final = frozenset({"POST", "PUT", "PATCH", "DELETE"})


async def _on_record(request: Request, session: AsyncSession, actor: str) -> str:
    """The act this request makes goes on the audit trail in the transaction that makes it (lifecycle/audit.py):
    the row is written on the request's session now and commits with the act, or rolls back with it. A read
    records nothing."""
    if request.method in _ACTS:
        route = request.scope.get("route")
        await append_audit_event(
            session,
            actor=actor,
            action=f"{request.method} {getattr(route, 'path', request.url.path)}",
            target=request.url.path,
            account_id=_account_of(request),
            request_id=request_id(request),
        )
    return actor


def _account_of(request: Request) -> uuid.UUID | None:
    """The account an act's path names; None for one that names none, or a malformed id (refused with a 422
    before anything commits, the audit row with it)."""
    try:
        return uuid.UUID(str(request.path_params["account_id"]))
    except (KeyError, ValueError):
        return None


async def require_admin(token: AdminTokenDep, request: Request, session: SessionDep, settings: SettingsDep) -> str:
    return await _on_record(request, session, await admin_actor(token, session, settings))


async def require_service_or_admin(
    name: str, token: ServiceTokenDep, request: Request, session: SessionDep, settings: SettingsDep
) -> str:
    """A deletion service's registration: an admin, or the credential issued for exactly this service's name."""
    actor = await _actor(
        token,
        session,
        settings,
        lambda kind, issued_for: kind == CredentialKind.SERVICE and issued_for == name,
        f"the credential issued for the service {name!r}, or an admin's",
    )
    return await _on_record(request, session, actor)


async def require_metrics_reader(
    token: MetricsTokenDep, request: Request, session: SessionDep, settings: SettingsDep
) -> str:
    return await _actor(
        token, session, settings, lambda kind, _: kind == CredentialKind.METRICS, "a metrics credential or an admin's"
    )


CallerDep = Annotated[Caller, Depends(require_account)]
# Each the actor's name, as the audit trail records it.
AdminDep = Annotated[str, Depends(require_admin)]
ServiceOrAdminDep = Annotated[str, Depends(require_service_or_admin)]
MetricsReaderDep = Annotated[str, Depends(require_metrics_reader)]
