"""One LISTEN connection per API process that wakes every stream watching a changed site or deletion.

The hub never reads a status: it reads which subjects changed (`lifecycle_events` rows past its cursor) and
sets the wake-up of each watcher of those subjects, who then reads its own status. So N watchers cost one
listening connection and one cursor query per change, not N, and a watcher holds no database session while
it waits.

Notifications only wake the hub early: it also polls every `poll_interval`, so a dropped LISTEN connection
(PostgreSQL restarted) delays a stream by at most that long while the hub reconnects.

While no stream watches, the hub reads nothing: a notification per DELETE cost the API process a query each
(a sixth of its CPU under bench.api). It forgets its cursor then, and the first watcher to register re-reads
where the log ends before its stream's first read, so every change after that read still wakes it.

Ids come from a sequence, so a transaction that started first may commit after a later one: the cursor waits
at such a gap for up to GAP_GRACE (a rolled-back insert leaves a gap for ever) before moving past it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Final

import asyncpg
from sqlalchemy import func, select
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from lifecycle.db.events import DELETION, NOTIFY_CHANNEL, LifecycleEvent, prune_events

logger = logging.getLogger(__name__)

# Longer than any transaction that writes a status (each batch or step commits on its own), far shorter than
# a watcher would notice: how long the cursor waits for a lower id to commit before giving up on it.
GAP_GRACE: Final = 30.0
# Rows read per cursor query; a burst larger than this is read in several.
READ_BATCH: Final = 1_000
# Seconds between attempts to re-open a dropped LISTEN connection.
RECONNECT_AFTER: Final = 1.0

SubjectKey = tuple[str, str]


def account_key(account_id: uuid.UUID | str) -> SubjectKey:
    """Every deletion of one account (its own and its bots'), as the account's deletion answer adds them up."""
    return ("account", str(account_id))


class Watch:
    """One stream's registration: `changed` is set whenever one of its subjects may have changed."""

    def __init__(self) -> None:
        self.changed = asyncio.Event()

    async def wait(self, at_most: float | None) -> None:
        """Until one of its subjects may have changed, or `at_most` seconds (None: no bound)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(at_most):  # not wait_for: see EventHub._run
                await self.changed.wait()
        self.changed.clear()


class EventHub:
    def __init__(
        self,
        engine: AsyncEngine,
        database_url: str,
        *,
        poll_interval: float,
        retention: timedelta,
        prune_interval: float,
    ) -> None:
        self._engine = engine
        self._dsn = make_url(database_url).set(drivername="postgresql").render_as_string(hide_password=False)
        self._poll_interval = poll_interval
        self._retention = retention
        self._prune_interval = prune_interval
        self._watches: dict[SubjectKey, set[Watch]] = {}
        self._notified = asyncio.Event()
        self._listener: asyncpg.Connection | None = None
        self._task: asyncio.Task[None] | None = None
        # Every id up to _low was dispatched or given up on; _seen holds those dispatched above it. None while
        # no stream watches; the first watcher starts it at the newest row.
        self._low: int | None = None
        self._seen: set[int] = set()
        self._gaps: dict[int, float] = {}
        # Names this process's listening session in pg_stat_activity.
        self.application_name = f"lifecycle-events-{os.getpid()}-{uuid.uuid4().hex[:6]}"

    @property
    def watch_count(self) -> int:
        return sum(len(watches) for watches in self._watches.values())

    async def start(self) -> None:
        """Starts listening in the background: the API starts (and answers) while PostgreSQL is away."""
        self._task = asyncio.get_running_loop().create_task(self._run(), name="lifecycle-events-hub")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            # asyncio.wait, not awaiting the task inside suppress(CancelledError), which also swallowed a
            # cancellation of the caller (a shutdown that times out).
            await asyncio.wait([self._task])
        await self._close_listener()

    @contextlib.asynccontextmanager
    async def watch(self, *keys: SubjectKey) -> AsyncIterator[Watch]:
        """Registered before the stream's first read, so no change falls between the read and the wait;
        removed when the stream ends or the client goes away."""
        watch = Watch()
        if self._low is None:
            # PostgreSQL away: the hub's loop starts the cursor once it can.
            with contextlib.suppress(Exception):
                await self._start_cursor()
        for key in keys:
            self._watches.setdefault(key, set()).add(watch)
        try:
            yield watch
        finally:
            for key in keys:
                watches = self._watches.get(key)
                if watches is not None:
                    watches.discard(watch)
                    if not watches:
                        del self._watches[key]

    async def _run(self) -> None:
        next_prune = time.monotonic()
        while True:
            try:
                if self._listener is None or self._listener.is_closed():
                    await self._listen()
                # asyncio.timeout, not wait_for: on Python 3.11, a cancel that comes as the event is set is lost in
                # wait_for, and this loop then ran on with stop() waiting for it forever.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self._poll_interval):
                        await self._notified.wait()
                self._notified.clear()
                await self._dispatch_new()
                if time.monotonic() >= next_prune:
                    next_prune = time.monotonic() + self._prune_interval
                    pruned = await prune_events(self._engine, self._retention)
                    if pruned:
                        logger.info("pruned %d lifecycle events older than %s", pruned, self._retention)
            except asyncio.CancelledError:
                raise
            except Exception as err:
                # PostgreSQL away: streams wait (their keepalives go on) and the hub tries again.
                logger.warning("lifecycle events hub: cannot read events: %r", err)
                await self._close_listener()
                await asyncio.sleep(RECONNECT_AFTER)

    async def _listen(self) -> None:
        connection = await asyncpg.connect(self._dsn, server_settings={"application_name": self.application_name})
        await connection.add_listener(NOTIFY_CHANNEL, self._on_notify)
        self._listener = connection
        # Whatever committed while no one listened is read now.
        self._notified.set()

    def _on_notify(self, *_: object) -> None:
        self._notified.set()

    async def _close_listener(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None and not listener.is_closed():
            with contextlib.suppress(Exception):
                await listener.close(timeout=1)

    async def _start_cursor(self) -> None:
        """Start at the newest row: no stream watched anything before."""
        async with self._engine.connect() as connection:
            newest = (await connection.execute(select(func.max(LifecycleEvent.id)))).scalar_one() or 0
        if self._low is None:
            self._low = newest

    def _forget_cursor(self) -> None:
        self._low = None
        self._seen.clear()
        self._gaps.clear()

    async def _dispatch_new(self) -> None:
        if not self._watches:
            self._forget_cursor()
            return
        if self._low is None:
            await self._start_cursor()
            assert self._low is not None
        while True:
            async with self._engine.connect() as connection:
                rows = (
                    await connection.execute(
                        select(
                            LifecycleEvent.id,
                            LifecycleEvent.subject_kind,
                            LifecycleEvent.subject_id,
                            LifecycleEvent.account_id,
                        )
                        .where(LifecycleEvent.id > self._low)
                        .order_by(LifecycleEvent.id)
                        .limit(READ_BATCH)
                    )
                ).all()
            fresh = 0
            for event_id, kind, subject, account in rows:
                if event_id in self._seen:
                    continue
                fresh += 1
                self._seen.add(event_id)
                keys: list[SubjectKey] = [(kind, subject)]
                if kind == DELETION and account is not None:
                    keys.append(account_key(account))
                for key in keys:
                    for watch in self._watches.get(key, ()):
                        watch.changed.set()
            self._advance()
            # A full batch of rows already seen means the cursor waits at a gap: the rest comes next time.
            if len(rows) < READ_BATCH or not fresh:
                return

    def _advance(self) -> None:
        assert self._low is not None
        now = time.monotonic()
        top = max(self._seen, default=self._low)
        while self._low < top:
            following = self._low + 1
            if following in self._seen:
                self._seen.discard(following)
            elif now - self._gaps.setdefault(following, now) >= GAP_GRACE:
                del self._gaps[following]
            else:
                return
            self._low = following
