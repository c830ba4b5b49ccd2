"""Live progress as Server-Sent Events: the "your site is being built" animation a customer watches, and deletions.

Each event's data is the JSON of the matching status endpoint, built by the same function; its id is the id of
the `lifecycle_events` row it reflects (lifecycle/db/events.py), so `Last-Event-ID` resumes exactly:

- a site's events carry the site as each change left it, so a stream (or a resume) shows every step in order,
  even steps that committed while the client was away;
- a deletion's answer adds up rows of several tables (its recorded status, every service's progress), so its
  stream computes the answer from PostgreSQL once per change of the deletion (once for all its watchers), and
  sends it under that change's id.

A stream ends after the event with a terminal status, or after a `credentials-ended` event once what opened it
no longer would (api/streams/credentials.py). Nothing here asks a worker anything, and a waiting stream holds no
database session: it waits on the process's one LISTEN connection (api/streams/hub.py).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any, Final

from fastapi import APIRouter, Cookie, Header, Query, Request
from pydantic import WithJsonSchema
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from sse_starlette import EventSourceResponse, ServerSentEvent

from api.deletion.schemas import DeletionOut
from api.deletion.status import account_deletion_record
from api.deletion.status_router import account_deletion_out, bot_deletion_out
from api.dependencies import (
    StreamAccountKeyDep,
    StreamAdminTokenDep,
    account_key_hash,
    admin_actor,
    admin_token,
    get_rate_limit,
    require_account,
)
from api.problems import ProblemError, problem_responses
from api.sites.router import site_out
from api.streams.credentials import (
    CREDENTIALS_ENDED_EVENT,
    CREDENTIALS_ENDED_SCHEMA,
    StreamCredential,
    StreamCredentials,
    key_end_reasons,
)
from api.streams.hub import EventHub, SubjectKey, account_key
from api.streams.tokens import COOKIE_NAME, QUERY_PARAMETER, StreamGrant, StreamKind, verify
from lifecycle.db.events import DELETION, SITE, latest_deletion_event, site_events
from lifecycle.db.models import DeletionRequest, Site
from lifecycle.deletion.workflow_types import bot_deletion_id
from lifecycle.settings import Settings
from lifecycle.statuses import TERMINAL_DELETION_STATES, TERMINAL_SITE_STATUSES

router = APIRouter(tags=["events"])

# A site stream reads its site by itself this often even without a wake-up: one indexed read per watcher.
SITE_RECHECK_SECONDS: Final = 30.0

# Event ids are bigint sequence values. The header is a string, as EventSource sends it: empty means no event
# received yet (a fresh stream), as do a missing header; anything but digits is refused.
MAX_EVENT_ID: Final = 2**63 - 1
LAST_EVENT_ID_PATTERN: Final = r"^[0-9]{0,19}$"
LastEventIdHeader = Annotated[
    str | None,
    WithJsonSchema({"type": "string", "pattern": LAST_EVENT_ID_PATTERN}),
    Header(
        alias="Last-Event-ID",
        pattern=LAST_EVENT_ID_PATTERN,
        description="The id of the last event received: the stream resumes after it. Empty: no event yet.",
    ),
]


def _resume_after(last_event_id: str | None) -> int | None:
    return min(int(last_event_id), MAX_EVENT_ID) if last_event_id else None


_EVENT_STREAM_DESCRIPTION = (
    "`text/event-stream`: one event per status or step change, its data the JSON of {answer} and its id usable "
    "as `Last-Event-ID`; a comment line every `EVENTS_KEEPALIVE` seconds (15 by default); the stream ends after "
    "the event with a terminal status ({terminal}). It also ends, after an event `credentials-ended` whose data "
    "says why (`token_expired`, `key_revoked`, `account_deleted`), when its stream token expires or the key behind "
    "it stops opening the account: a client should not reconnect with the same credential."
)


def _stream_responses(
    answer: str, terminal: frozenset[StrEnum], model: str, *problems: int
) -> dict[int | str, dict[str, Any]]:
    *others, last = sorted(terminal)
    description = _EVENT_STREAM_DESCRIPTION.format(answer=answer, terminal=f"{', '.join(others)} or {last}")
    # Without `itemSchema` (OpenAPI 3.2), an event stream's `schema` describes each event.
    change = {
        "type": "object",
        "required": ["data", "id"],
        "properties": {
            "data": {
                "type": "string",
                "contentMediaType": "application/json",
                "contentSchema": {"$ref": f"#/components/schemas/{model}"},
            },
            "id": {"type": "string", "pattern": "^[0-9]+$"},
            "event": {"type": "string", "enum": ["message"]},
        },
    }
    ended = {
        "type": "object",
        "required": ["data", "event"],
        "properties": {
            "data": {
                "type": "string",
                "contentMediaType": "application/json",
                "contentSchema": CREDENTIALS_ENDED_SCHEMA,
            },
            "event": {"type": "string", "enum": [CREDENTIALS_ENDED_EVENT]},
        },
    }
    event = {"oneOf": [change, ended]}
    return {
        200: {"description": description, "content": {"text/event-stream": {"schema": event}}},
        **problem_responses(*problems),
    }


def _sessions(request: Request) -> async_sessionmaker[AsyncSession]:
    sessionmaker: async_sessionmaker[AsyncSession] = request.app.state.sessionmaker
    return sessionmaker


# The callers are checked with a session of their own, closed before the stream begins: the shared
# dependencies would hold theirs open until the response ends, which for a stream is minutes.
# A browser's EventSource cannot send `Authorization`: it opens a stream with a token minted for that one stream
# (api/streams/tokens.py), as an HttpOnly cookie or, failing that, in the query string.

AccessTokenQuery = Annotated[
    str | None,
    Query(
        alias=QUERY_PARAMETER,
        description="A stream token (POST .../events/token), for clients that can send neither `Authorization` "
        "nor the cookie. Redacted from the access log.",
    ),
]
StreamTokenCookie = Annotated[
    str | None, Cookie(alias=COOKIE_NAME, description="The stream token, as POST .../events/token set it.")
]


def _refused_token(detail: str) -> ProblemError:
    return ProblemError(401, detail, headers={"WWW-Authenticate": "Bearer"})


async def _granted(
    request: Request, kind: StreamKind, resource_id: uuid.UUID, *tokens: str | None
) -> StreamGrant | None:
    """The grant of a token sent for this stream, if one was: one whose key no longer opens the account (nor
    would a request with the key itself) is refused."""
    given = [token for token in tokens if token]
    for token in given:
        grant = verify(request.app.state.settings, token, kind, resource_id)
        if grant is None:
            continue
        if grant.key_id is not None:
            async with _sessions(request)() as session:
                ended = (await key_end_reasons(session, [grant.key_id]))[grant.key_id]
            if ended is not None:
                raise _refused_token(f"The key that minted this stream token no longer opens the account ({ended}).")
        return grant
    if given:
        raise _refused_token(
            "The stream token is wrong, expired, or for another stream; ask POST .../events/token for a new one."
        )
    return None


@dataclass(frozen=True)
class _Opened:
    """Who opened a stream, and what must keep holding for it to go on."""

    account_id: uuid.UUID
    credential: StreamCredential


async def _stream_account(
    request: Request,
    key_hash: StreamAccountKeyDep,
    kind: StreamKind,
    resource_id: uuid.UUID,
    *tokens: str | None,
) -> _Opened:
    """The account whose stream this is: by its key if one is sent, else by a token for this stream."""
    if key_hash is None:
        grant = await _granted(request, kind, resource_id, *tokens)
        if grant is not None:
            return _Opened(grant.account_id, StreamCredential(grant.key_id, grant.expires))
        key_hash = await account_key_hash(None)  # neither: answers 401 as every account operation does
    async with _sessions(request)() as session:
        caller = await require_account(key_hash, session, get_rate_limit(request))
    return _Opened(caller.account_id, StreamCredential(caller.key_id, expires=None))


async def _stream_admin(
    request: Request, token: StreamAdminTokenDep, account_id: uuid.UUID, *tokens: str | None
) -> StreamCredential:
    if token is None:
        grant = await _granted(request, StreamKind.ACCOUNT_DELETION, account_id, *tokens)
        if grant is not None:
            return StreamCredential(grant.key_id, grant.expires)
        token = await admin_token(None)  # neither: answers 401 as every admin operation does
    async with _sessions(request)() as session:
        await admin_actor(token, session, request.app.state.settings)
    return StreamCredential(key_id=None, expires=None)


def _event_stream(
    request: Request, events: AsyncGenerator[ServerSentEvent, None], credential: StreamCredential
) -> EventSourceResponse:
    settings: Settings = request.app.state.settings
    credentials: StreamCredentials = request.app.state.stream_credentials
    return EventSourceResponse(
        credentials.guard(events, credential),
        ping=settings.events_keepalive,
        ping_message_factory=lambda: ServerSentEvent(comment="keepalive"),
        headers={"Cache-Control": "no-store"},
    )


def _hub(request: Request) -> EventHub:
    hub: EventHub = request.app.state.events
    return hub


@router.get(
    "/sites/{site_id}/events",
    response_class=EventSourceResponse,
    summary="A site's progress as Server-Sent Events, each the JSON of GET /sites/{id}",
    responses=_stream_responses("GET /sites/{id}", TERMINAL_SITE_STATUSES, "SiteOut", 401, 404, 422),
)
async def site_events_stream(
    site_id: uuid.UUID,
    request: Request,
    key_hash: StreamAccountKeyDep,
    last_event_id: LastEventIdHeader = None,
    access_token: AccessTokenQuery = None,
    stream_token: StreamTokenCookie = None,
) -> EventSourceResponse:
    opened = await _stream_account(request, key_hash, StreamKind.SITE, site_id, stream_token, access_token)
    async with _sessions(request)() as session:
        site = await session.get(Site, site_id)
        # Another account's site is indistinguishable from a missing one.
        if site is None or site.account_id != opened.account_id:
            raise ProblemError(404, "No such site.")
    return _event_stream(request, _site_stream(request, site_id, _resume_after(last_event_id)), opened.credential)


def _site_from_state(state: dict[str, Any]) -> Site:
    """The site as a trigger recorded it (migrations 0005, 0015), for the same builder as GET /sites/{id}."""
    return Site(
        id=uuid.UUID(state["id"]),
        name=state["name"],
        tagline=state["tagline"],
        domain=state["domain"],
        status=state["status"],
        steps=state["steps"],
        error=state["error"],
        # Events recorded before revision 0015 do not name it.
        database_server=state.get("database_server"),
    )


async def _site_stream(
    request: Request, site_id: uuid.UUID, after: int | None
) -> AsyncGenerator[ServerSentEvent, None]:
    async with _hub(request).watch((SITE, str(site_id))) as watch:
        if after is not None and await _site_settled_at(request, site_id, after):
            return
        while True:
            async with _sessions(request)() as session:
                events = await site_events(session, site_id, after=after)
                if not events and after is None:
                    # Its events are past retention: the row itself is the current state.
                    site = await session.get(Site, site_id)
                    events = [(0, json.loads(site_out(site).model_dump_json()))] if site is not None else []
            for event_id, state in events:
                answer = site_out(_site_from_state(state))
                yield ServerSentEvent(answer.model_dump_json(), id=str(event_id))
                after = event_id
                if answer.status in TERMINAL_SITE_STATUSES:
                    return
            # The hub wakes it; the bound only covers a hub that could not read for a while (PostgreSQL away).
            await watch.wait(at_most=SITE_RECHECK_SECONDS)


async def _site_settled_at(request: Request, site_id: uuid.UUID, after: int) -> bool:
    """A resume after the last change of a settled site: the client has its final event, there is nothing to
    send."""
    async with _sessions(request)() as session:
        if await site_events(session, site_id, after=after):
            return False
        latest = await site_events(session, site_id, after=None)
    return bool(latest) and latest[-1][0] <= after and latest[-1][1]["status"] in TERMINAL_SITE_STATUSES


# --- Deletions


@dataclass(frozen=True)
class _DeletionSubject:
    """What a deletion stream follows: the keys the hub wakes it for, and how to build its answer."""

    key: SubjectKey
    # Read again for each answer: its status and completed_at change while the stream runs.
    record: Callable[[AsyncSession], Awaitable[DeletionRequest | None]]
    answer: Callable[[AsyncSession, DeletionRequest], Awaitable[DeletionOut]]
    # The latest change of the subject: one deletion's, or any of an account's deletions.
    latest: Callable[[AsyncSession], Awaitable[int]]


@dataclass
class _Computed:
    latest: int
    at: float
    answer: DeletionOut


class _DeletionGone(Exception):
    """The deletion's record went away while a stream followed it (an operator removed it)."""


class SharedDeletionAnswers:
    """One computation of a deletion's answer per change, whatever the number of watchers: the first watcher to
    wake computes, the others reuse it, so N watchers cost one read of the progress per change, not N."""

    def __init__(self, refresh: float) -> None:
        self._refresh = refresh
        self._cache: dict[SubjectKey, _Computed] = {}
        self._locks: dict[SubjectKey, asyncio.Lock] = {}

    async def answer(self, request: Request, subject: _DeletionSubject) -> tuple[int, DeletionOut]:
        lock = self._locks.setdefault(subject.key, asyncio.Lock())
        async with lock:
            async with _sessions(request)() as session:
                latest = await subject.latest(session)
                cached = self._cache.get(subject.key)
                now = time.monotonic()
                if cached is not None and cached.latest == latest:
                    return latest, cached.answer
                record = await subject.record(session)
                if record is None:
                    raise _DeletionGone()
                answer = await subject.answer(session, record)
            self._cache[subject.key] = _Computed(latest, time.monotonic(), answer)
            self._forget_stale(now)
            return latest, answer

    def _forget_stale(self, now: float) -> None:
        stale = [key for key, computed in self._cache.items() if now - computed.at > 10 * self._refresh]
        for key in stale:
            del self._cache[key]
            lock = self._locks.get(key)
            if lock is not None and not lock.locked():
                del self._locks[key]


def _shared_answers(request: Request) -> SharedDeletionAnswers:
    answers: SharedDeletionAnswers | None = getattr(request.app.state, "deletion_answers", None)
    if answers is None:
        answers = SharedDeletionAnswers(request.app.state.settings.events_deletion_refresh)
        request.app.state.deletion_answers = answers
    return answers


@router.get(
    "/bots/{bot_id}/deletion/events",
    response_class=EventSourceResponse,
    summary="A bot deletion's progress as Server-Sent Events, each the JSON of GET /bots/{id}/deletion",
    responses=_stream_responses("GET /bots/{id}/deletion", TERMINAL_DELETION_STATES, "DeletionOut", 401, 404, 422),
)
async def bot_deletion_events(
    bot_id: uuid.UUID,
    request: Request,
    key_hash: StreamAccountKeyDep,
    last_event_id: LastEventIdHeader = None,
    access_token: AccessTokenQuery = None,
    stream_token: StreamTokenCookie = None,
) -> EventSourceResponse:
    opened = await _stream_account(request, key_hash, StreamKind.BOT_DELETION, bot_id, stream_token, access_token)
    async with _sessions(request)() as session:
        record = await session.get(DeletionRequest, bot_deletion_id(bot_id))
    if record is None or record.account_id != opened.account_id:
        raise ProblemError(404, "No deletion was requested for this bot.")
    workflow_id = record.workflow_id

    async def reread(session: AsyncSession) -> DeletionRequest | None:
        return await session.get(DeletionRequest, workflow_id)

    async def latest(session: AsyncSession) -> int:
        return await latest_deletion_event(session, workflow_id=workflow_id)

    subject = _DeletionSubject((DELETION, workflow_id), reread, bot_deletion_out, latest)
    return _event_stream(request, _deletion_stream(request, subject, _resume_after(last_event_id)), opened.credential)


@router.get(
    "/accounts/{account_id}/deletion/events",
    response_class=EventSourceResponse,
    summary="An account deletion's progress as Server-Sent Events, each the JSON of GET /accounts/{id}/deletion "
    "(admin token)",
    responses=_stream_responses(
        "GET /accounts/{id}/deletion", TERMINAL_DELETION_STATES, "DeletionOut", 401, 403, 404, 422
    ),
)
async def account_deletion_events(
    account_id: uuid.UUID,
    request: Request,
    token: StreamAdminTokenDep,
    last_event_id: LastEventIdHeader = None,
    access_token: AccessTokenQuery = None,
    stream_token: StreamTokenCookie = None,
) -> EventSourceResponse:
    credential = await _stream_admin(request, token, account_id, stream_token, access_token)
    async with _sessions(request)() as session:
        record = await account_deletion_record(session, account_id)
    if record is None:
        raise ProblemError(404, "No deletion was requested for this account.")

    async def reread(session: AsyncSession) -> DeletionRequest | None:
        return await account_deletion_record(session, account_id)

    async def latest(session: AsyncSession) -> int:
        return await latest_deletion_event(session, account_id=account_id)

    subject = _DeletionSubject(account_key(account_id), reread, account_deletion_out, latest)
    return _event_stream(request, _deletion_stream(request, subject, _resume_after(last_event_id)), credential)


async def _deletion_stream(
    request: Request, subject: _DeletionSubject, after: int | None
) -> AsyncGenerator[ServerSentEvent, None]:
    settings: Settings = request.app.state.settings
    answers = _shared_answers(request)
    sent: str | None = None
    async with _hub(request).watch(subject.key) as watch:
        try:
            latest, answer = await answers.answer(request, subject)
            terminal = answer.status in TERMINAL_DELETION_STATES
            resumed_unchanged = after is not None and latest <= after
            if resumed_unchanged and not terminal:
                # Nothing changed since the client's last event: it has this answer already.
                sent = answer.model_dump_json()
            while True:
                data = answer.model_dump_json()
                # Every change of the deletion is an event with an id (the status too is a database change now).
                # A resume at a settled deletion answers its final state once more: its EventSource reconnected,
                # so it may not have seen it.
                if data != sent and (after is None or latest > after or (resumed_unchanged and terminal)):
                    yield ServerSentEvent(data, id=str(latest))
                    sent, after = data, max(latest, after or 0)
                if terminal:
                    return
                await watch.wait(at_most=settings.events_deletion_refresh)
                resumed_unchanged = False
                latest, answer = await answers.answer(request, subject)
                terminal = answer.status in TERMINAL_DELETION_STATES
        except _DeletionGone:
            return
