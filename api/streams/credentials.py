"""What keeps an open event stream authorised while it runs, not only when it opens.

A stream is opened by an account's API key, or by a stream token (api/streams/tokens.py) minted with a key or with
the admin token. It ends, after a last event `credentials-ended` whose data says why, at its token's expiry, and
within `stream_credentials_recheck` seconds of the key behind it no longer opening its account: revoked
(DELETE /account/keys/{id}) or expired (`key_revoked` either way), or its account asked to be deleted (which revokes
every key), or gone with it. A browser told so closes its EventSource instead of reconnecting with a token that
no longer opens anything.

Cheap by construction: an expiry needs no read (it is the stream's own deadline), and the keys behind every open
stream of the process are checked together, one indexed query per interval, none while no such stream is open.
The admin token cannot be revoked short of a restart, so a stream it opened ends at its token's expiry only.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession
from sse_starlette import ServerSentEvent

from api.accounts.keys import key_states_sql

logger = logging.getLogger(__name__)

# The SSE event type of a stream's last event when its credential ends: `source.addEventListener(...)`.
CREDENTIALS_ENDED_EVENT: Final = "credentials-ended"


class EndReason(StrEnum):
    TOKEN_EXPIRED = "token_expired"
    KEY_REVOKED = "key_revoked"
    ACCOUNT_DELETED = "account_deleted"


# The data of a `credentials-ended` event, as the OpenAPI schema describes it.
CREDENTIALS_ENDED_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "required": ["reason"],
    "properties": {"reason": {"type": "string", "enum": [reason.value for reason in EndReason]}},
}


@dataclass(frozen=True)
class StreamCredential:
    # The key that opened the stream or minted its token; None for the admin token.
    key_id: uuid.UUID | None
    # A token's expiry (Unix seconds); None for a key or the admin token sent as is.
    expires: int | None


_KEY_STATES = text(key_states_sql(":key_ids"))


async def key_end_reasons(
    connection: AsyncConnection | AsyncSession, key_ids: Iterable[uuid.UUID]
) -> dict[uuid.UUID, EndReason | None]:
    """For each key: None while it opens its account, else why it no longer does."""
    wanted = list(key_ids)
    rows = (await connection.execute(_KEY_STATES, {"key_ids": wanted})).all()
    found: dict[uuid.UUID, EndReason | None] = {
        row.id: None if row.opens else EndReason.ACCOUNT_DELETED if row.account_deleted else EndReason.KEY_REVOKED
        for row in rows
    }
    # A key without a row went with its account.
    return {key_id: found.get(key_id, EndReason.ACCOUNT_DELETED) for key_id in wanted}


class _Held:
    """One open stream's credential, and the deadline its stream waits under."""

    def __init__(self, credential: StreamCredential) -> None:
        self.credential = credential
        self.ended: EndReason | None = None
        self.deadline: asyncio.Timeout | None = None

    def end(self, reason: EndReason) -> None:
        if self.ended is None:
            self.ended = reason
        # Interrupts whatever the stream waits on (the hub, a read) at once.
        if self.deadline is not None and not self.deadline.expired():
            self.deadline.reschedule(asyncio.get_running_loop().time())

    def seconds_left(self) -> float | None:
        return None if self.credential.expires is None else self.credential.expires - time.time()


class StreamCredentials:
    """Ends a process's open streams whose credential ended; see the module's docstring."""

    def __init__(self, engine: AsyncEngine, *, recheck: float) -> None:
        self._engine = engine
        self._recheck = recheck
        # The open streams that a key opened (or minted the token of), with that key.
        self._keyed: dict[_Held, uuid.UUID] = {}
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="stream-credentials")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def guard(
        self, events: AsyncGenerator[ServerSentEvent, None], credential: StreamCredential
    ) -> AsyncIterator[ServerSentEvent]:
        """`events` for as long as `credential` holds, then a `credentials-ended` event and the end."""
        held = _Held(credential)
        if credential.key_id is not None:
            self._keyed[held] = credential.key_id
        try:
            while True:
                left = held.seconds_left()
                if left is not None and left <= 0:
                    held.end(EndReason.TOKEN_EXPIRED)
                if held.ended is not None:
                    break
                loop = asyncio.get_running_loop()
                try:
                    async with asyncio.timeout_at(None if left is None else loop.time() + left) as deadline:
                        held.deadline = deadline
                        event = await anext(events)
                except StopAsyncIteration:
                    return
                except TimeoutError:
                    if not deadline.expired():
                        raise  # not ours: the stream's own error
                    held.end(EndReason.TOKEN_EXPIRED)  # unless something else ended it first
                    break
                finally:
                    held.deadline = None
                yield event
            yield ServerSentEvent(json.dumps({"reason": held.ended}), event=CREDENTIALS_ENDED_EVENT)
        finally:
            self._keyed.pop(held, None)
            await events.aclose()

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._recheck)
            held = {each: key_id for each, key_id in self._keyed.items() if each.ended is None}
            if not held:
                continue
            try:
                async with self._engine.connect() as connection:
                    reasons = await key_end_reasons(connection, set(held.values()))
            except Exception as err:
                # PostgreSQL away: the streams wait for it as they do for their own reads.
                logger.warning("stream credentials: cannot check keys: %r", err)
                continue
            for each, key_id in held.items():
                reason = reasons[key_id]
                if reason is not None:
                    each.end(reason)
