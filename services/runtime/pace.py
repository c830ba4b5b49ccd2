"""A service's pace: its share of the deletion budget (DeleteRequest.rows_per_second), applied to its own
database by one limiter row that every slice of every deletion in the service reserves its next batch from, and
slowed further while that database shows pressure (the signals and why are under `pressure` below).

The limiter is a GCRA, as the gateway's budget was: `deletion_pace.next_slot` holds the time from which the next
rows may go, and a reservation moves it on by rows / rate. Its clock is the database's own, so every worker
process of the service shares it.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from lifecycle.deletion.contracts import MIN_BATCH_SIZE
from lifecycle.statuses import Throttle

# Rows one reservation takes: a tenth of a second of the shipped budget, as one budget for the whole gateway
# took before the services. Sized by a share instead, N services sharing the budget made N times the statements
# and commits for the same rows, each commit a WAL flush that every neighbour's commit queues behind
# (bench.neighbour's p99 went from 1.5x to 3.2x idle).
BATCH_ROWS = 2_000
# Seconds of the share one reservation takes at most: under a small share the batch shrinks, so that a new share
# still applies within a second.
RESERVATION_MAX = 1.0
# Under pressure, each batch costs this many times its rows: the service runs at a quarter of its share.
PRESSURE_SLOWDOWN = 4
# A backend waiting this long on a lock is pressure (a shorter wait is ordinary row-lock traffic).
LOCK_WAIT_SECONDS = 1.0
# Replica lag above this is pressure (pt-archiver's --max-lag default is 1 s; a deletion can afford more).
MAX_REPLICA_LAG_SECONDS = 5.0
# The pressure signals are read at most this often per slice: one cheap catalog query a second.
PRESSURE_CHECK_EVERY = 1.0
# A wait for budget is cut into pieces this long, with a heartbeat after each: the slice stays visibly alive.
WAIT_PIECE = 1.0

PACE_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS deletion_pace (id integer PRIMARY KEY CHECK (id = 1),"
    " next_slot timestamptz NOT NULL DEFAULT clock_timestamp())",
    "INSERT INTO deletion_pace (id) VALUES (1) ON CONFLICT (id) DO NOTHING",
)
_NO_FSYNC = text("SET LOCAL synchronous_commit = off")
# Start no earlier than the slot; move the slot on by what the batch costs at the rate.
_RESERVE = text(
    "WITH slot AS (SELECT greatest(next_slot, clock_timestamp()) AS start FROM deletion_pace WHERE id = 1 FOR UPDATE)"
    " UPDATE deletion_pace SET next_slot = slot.start + make_interval(secs => CAST(:seconds AS float8))"
    " FROM slot WHERE deletion_pace.id = 1 RETURNING extract(epoch FROM slot.start - clock_timestamp())"
)


_PRESSURE = text(
    "SELECT (SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
    " AND wait_event_type = 'Lock' AND clock_timestamp() - query_start > make_interval(secs => :lock_wait)),"
    " (SELECT count(*) FROM pg_stat_progress_vacuum WHERE relid = to_regclass(:table)),"
    " (SELECT coalesce(max(extract(epoch FROM replay_lag)), 0) FROM pg_stat_replication)"
)


async def pressure(conn: AsyncConnection, table: str) -> Throttle | None:
    """The first pressure signal the database shows, if any.

    - lock waits: a session of this database waiting over LOCK_WAIT_SECONDS on a lock means writers queue; a
      deletion adding row locks and WAL makes that queue longer;
    - autovacuum on the table being deleted from: it is cleaning up after us, and competes with us for I/O;
    - replica lag (pg_stat_replication, empty without replicas): a replica falling behind the WAL we write.
    A slice's own statement latency is not a signal here: it moves with the batch size the budget chooses.
    """
    lock_waits, vacuuming, lag = (await conn.execute(_PRESSURE, {"lock_wait": LOCK_WAIT_SECONDS, "table": table})).one()
    if lock_waits:
        return Throttle.LOCK_WAITS
    if vacuuming:
        return Throttle.AUTOVACUUM
    if float(lag) > MAX_REPLICA_LAG_SECONDS:
        return Throttle.REPLICA_LAG
    return None


@dataclass(frozen=True)
class Reservation:
    rows: int
    wait: float


async def reserve(conn: AsyncConnection, rows_per_second: int, max_rows: int, *, pressured: bool) -> Reservation:
    """The next batch: BATCH_ROWS, or RESERVATION_MAX seconds' worth of rows at the rate if fewer (at least
    MIN_BATCH_SIZE, at most `max_rows`), and how long to wait before it starts. The caller commits."""
    wanted = min(BATCH_ROWS, math.ceil(rows_per_second * RESERVATION_MAX))
    rows = min(max_rows, max(min(MIN_BATCH_SIZE, max_rows), wanted))
    cost = PRESSURE_SLOWDOWN if pressured else 1
    await conn.execute(_NO_FSYNC)
    wait = (await conn.execute(_RESERVE, {"seconds": rows * cost / rows_per_second})).scalar_one()
    return Reservation(rows, max(0.0, float(wait)))


class Pacer:
    def __init__(self, rows_per_second: int, heartbeat: Callable[[], None]) -> None:
        # 0: unlimited, and no back-off either (the benches, a maintenance window); see docs/deletion-budget.md.
        self._rate = rows_per_second
        self._heartbeat = heartbeat
        self._pressure_checked_at = float("-inf")
        self._pressure: Throttle | None = None
        # The strongest reason any batch of the slice was slowed down: the response's `throttled`.
        self.throttled: Throttle | None = None

    async def next_batch(self, conn: AsyncConnection, table: str, max_rows: int) -> int:
        """Rows the next batch may delete, once the service's budget allows it to start."""
        if not self._rate:
            return max_rows
        now = time.monotonic()
        if now - self._pressure_checked_at >= PRESSURE_CHECK_EVERY:
            self._pressure = await pressure(conn, table)
            self._pressure_checked_at = now
        reservation = await reserve(conn, self._rate, max_rows, pressured=self._pressure is not None)
        await conn.commit()
        slowed = self._pressure or (Throttle.BUDGET if reservation.wait > 0 else None)
        if slowed is not None and (self.throttled is None or self.throttled == Throttle.BUDGET):
            self.throttled = slowed
        await self._wait(reservation.wait)
        return reservation.rows

    async def _wait(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            await asyncio.sleep(min(left, WAIT_PIECE))
            self._heartbeat()
