"""One rows/s deletion budget, kept in PostgreSQL and changed live by `PUT /deletion-budget`.

A deletion splits it evenly over the registered services it calls (activities/deletion/services.py) and sends
each its share in every DeleteSubjectData request (`rows_per_second`); each service applies its share to its own
store, and backs off further while that store shows pressure (services/runtime/pace.py for this project's
services). Why not Temporal's task-queue rate limit (`temporal task-queue config set --queue-rps-limit`): that
limit counts activity starts, and a slice's rows vary with the service and the batch size.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

# Chosen by measurement (bench.neighbour, docs/deletion-budget.md): a neighbour's p99 stays within 2x idle.
DEFAULT_ROWS_PER_SECOND = 20_000
# Bounds a PUT accepts. Below the minimum, one smallest batch would hold a reservation for over a second.
MIN_ROWS_PER_SECOND = 100
MAX_ROWS_PER_SECOND = 100_000_000

_READ = text("SELECT rows_per_second FROM deletion_budget WHERE id = 1")
_SET = text("UPDATE deletion_budget SET rows_per_second = :rate, updated_at = now() WHERE id = 1")
_RECORD_CHANGE = text("INSERT INTO deletion_budget_changes (rows_per_second) VALUES (:rate)")


async def read_budget(conn: AsyncConnection) -> int | None:
    return (await conn.execute(_READ)).scalar_one_or_none()


async def set_budget(conn: AsyncConnection, rows_per_second: int | None) -> None:
    """Change the budget (None: unlimited) and record the change; the caller commits. Running deletions send the
    services their new share with their next slice."""
    await conn.execute(_SET, {"rate": rows_per_second})
    await conn.execute(_RECORD_CHANGE, {"rate": rows_per_second})
