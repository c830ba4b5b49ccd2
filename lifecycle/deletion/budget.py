"""One rows/s budget shared by every running deletion, kept in PostgreSQL, and the pressure signals that slow
the deleters below it.

Why PostgreSQL and not Temporal's task-queue rate limit (`temporal task-queue config set --queue-rps-limit`):
that limit counts activity starts, and a deleter call is a slice of up to DELETER_SLICE of batches whose size
varies with the service and the batch size. Turning it into rows/s would take one activity per fixed-size batch:
a workflow task and three history events per few thousand rows, for every deletion, limited or not. The budget
is instead one row that every deleter reserves its next batch from (a GCRA limiter: the row holds the time from
which the next rows may go; a reservation moves it on by rows / budget), in one short UPDATE per batch. It is
shared by every worker, changed live by `PUT /deletion-budget`, and its clock is the database's own.

A budget change reaches every deleter at its next reservation: a reservation covers at most RESERVATION seconds
of the budget, so no deleter waits long on a rate that has changed.

A registered service may have a rows/s of its own (an override, in deletion_budget_overrides): a deletion passes
it in that service's DeleteRequest instead of a share of the budget (activities/deletion/services.py,
budget_share). An override may name a service that is not registered yet; it applies once the service joins.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from lifecycle.deletion.contracts import DeletionBudget
from lifecycle.statuses import Throttle

# Chosen by measurement (bench.neighbour, docs/deletion-budget.md): a neighbour's p99 stays within 2x idle.
DEFAULT_ROWS_PER_SECOND = 20_000
# Bounds a PUT accepts. Below the minimum, one smallest batch would hold a reservation for over a second.
MIN_ROWS_PER_SECOND = 100
MAX_ROWS_PER_SECOND = 100_000_000

# Seconds of budget one reservation takes at most: the batch under a budget is this many seconds' worth of rows,
# so deletes arrive as a steady trickle of small statements rather than bursts, and a new budget applies within
# a fraction of a second.
RESERVATION = 0.1
# Under pressure, each batch costs this many times its rows: the deleters run at a quarter of the budget.
PRESSURE_SLOWDOWN = 4
# A backend waiting this long on a lock is pressure (a shorter wait is ordinary row-lock traffic).
LOCK_WAIT_SECONDS = 1.0
# Replica lag above this is pressure (pt-archiver's --max-lag default is 1 s; a deletion can afford more).
MAX_REPLICA_LAG_SECONDS = 5.0


@dataclass(frozen=True)
class Reservation:
    rows_per_second: int | None
    # Rows the next batch may delete, and how long to wait before starting it.
    rows: int
    wait: float


_RESERVE = text(
    "WITH budget AS (SELECT rows_per_second, greatest(next_slot, clock_timestamp()) AS start,"
    " least(CAST(:max_rows AS bigint), greatest(CAST(:min_rows AS bigint),"
    " CAST(ceil(rows_per_second * CAST(:reservation AS float8)) AS bigint))) AS rows"
    " FROM deletion_budget WHERE id = 1 FOR UPDATE)"
    " UPDATE deletion_budget AS d SET next_slot = budget.start"
    " + make_interval(secs => budget.rows * CAST(:cost AS float8) / budget.rows_per_second)"
    " FROM budget WHERE d.id = 1 AND budget.rows_per_second IS NOT NULL"
    " RETURNING budget.rows_per_second, budget.rows, extract(epoch FROM budget.start - clock_timestamp())"
)
_NO_FSYNC = text("SET LOCAL synchronous_commit = off")
_READ = text("SELECT rows_per_second FROM deletion_budget WHERE id = 1")
_SET = text(
    "UPDATE deletion_budget SET rows_per_second = :rate, next_slot = clock_timestamp(), updated_at = now() WHERE id = 1"
)
_RECORD_CHANGE = text("INSERT INTO deletion_budget_changes (rows_per_second, service) VALUES (:rate, :service)")
_READ_OVERRIDES = text("SELECT service, rows_per_second FROM deletion_budget_overrides ORDER BY service")
_SET_OVERRIDE = text(
    "INSERT INTO deletion_budget_overrides (service, rows_per_second) VALUES (:service, :rate)"
    " ON CONFLICT (service) DO UPDATE SET rows_per_second = EXCLUDED.rows_per_second, updated_at = now()"
)
_REMOVE_OVERRIDE = text("DELETE FROM deletion_budget_overrides WHERE service = :service")


async def read_budget(conn: AsyncConnection) -> int | None:
    return (await conn.execute(_READ)).scalar_one_or_none()


async def read_deletion_budget(conn: AsyncConnection) -> DeletionBudget:
    """The shared budget and every service's override, as they stand now."""
    overrides = {service: int(rate) for service, rate in await conn.execute(_READ_OVERRIDES)}
    return DeletionBudget(rows_per_second=await read_budget(conn), services=overrides)


async def set_budget(conn: AsyncConnection, rows_per_second: int | None) -> None:
    """Change the budget (None: unlimited) and record the change; the caller commits. The limiter's clock
    restarts from now, so reservations made at the old rate are not paid for at the new one."""
    await conn.execute(_SET, {"rate": rows_per_second})
    await conn.execute(_RECORD_CHANGE, {"rate": rows_per_second, "service": None})


async def set_overrides(conn: AsyncConnection, overrides: Mapping[str, int | None]) -> None:
    """Set each named service's own rows/s, or remove it (None: the service shares the budget again), and record
    each change; services not named keep theirs. The caller commits."""
    for service, rate in overrides.items():
        await conn.execute(_REMOVE_OVERRIDE if rate is None else _SET_OVERRIDE, {"service": service, "rate": rate})
        await conn.execute(_RECORD_CHANGE, {"rate": rate, "service": service})


async def reserve(conn: AsyncConnection, max_rows: int, min_rows: int, *, pressured: bool) -> Reservation:
    """Reserve the next batch. Unlimited: `max_rows` at once, and nothing is written."""
    # The limiter's clock needs no fsync: after a crash, at worst a few reservations are granted again.
    await conn.execute(_NO_FSYNC)
    row = (
        await conn.execute(
            _RESERVE,
            {
                "max_rows": max_rows,
                "min_rows": min_rows,
                "reservation": RESERVATION,
                "cost": PRESSURE_SLOWDOWN if pressured else 1,
            },
        )
    ).first()
    if row is None:
        return Reservation(rows_per_second=None, rows=max_rows, wait=0.0)
    rate, rows, wait = row
    return Reservation(rows_per_second=int(rate), rows=int(rows), wait=max(0.0, float(wait)))


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
    A deleter's own statement latency is not a signal here: it moves with the batch size the budget chooses.
    """
    lock_waits, vacuuming, lag = (await conn.execute(_PRESSURE, {"lock_wait": LOCK_WAIT_SECONDS, "table": table})).one()
    if lock_waits:
        return Throttle.LOCK_WAITS
    if vacuuming:
        return Throttle.AUTOVACUUM
    if float(lag) > MAX_REPLICA_LAG_SECONDS:
        return Throttle.REPLICA_LAG
    return None
