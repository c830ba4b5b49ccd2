"""One rows/s deletion budget, kept in PostgreSQL and changed live by `PUT /deletion-budget`, and each service's
own rows/s where an operator set one.

A deletion splits the budget evenly over the registered services it calls that have no rows/s of their own
(budget_share below) and sends each its share in every DeleteSubjectData request
(`rows_per_second`); a service with an override (deletion_budget_overrides) gets its own instead. Each service
applies its rate to its own store, and backs off further while that store shows pressure (services/runtime/pace.py
for this project's services). An override may name a service that is not registered yet; it applies once the
service joins. Why not Temporal's task-queue rate limit (`temporal task-queue config set --queue-rps-limit`): that
limit counts activity starts, and a slice's rows vary with the service and the batch size.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from lifecycle.deletion.contracts import DeletionBudget

# Chosen by measurement (bench.neighbour, docs/deletion-budget.md): a neighbour's p99 stays within 2x idle.
DEFAULT_ROWS_PER_SECOND = 20_000
# Bounds a PUT accepts. Below the minimum, one smallest batch would hold a reservation for over a second.
MIN_ROWS_PER_SECOND = 100
MAX_ROWS_PER_SECOND = 100_000_000

_READ = text("SELECT rows_per_second FROM deletion_budget WHERE id = 1")
_SET = text("UPDATE deletion_budget SET rows_per_second = :rate, updated_at = now() WHERE id = 1")
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
    """Change the budget (None: unlimited) and record the change; the caller commits. Running deletions send the
    services their new share with their next slice."""
    await conn.execute(_SET, {"rate": rows_per_second})
    await conn.execute(_RECORD_CHANGE, {"rate": rows_per_second, "service": None})


async def set_overrides(conn: AsyncConnection, overrides: Mapping[str, int | None]) -> None:
    """Set each named service's own rows/s, or remove it (None: the service shares the budget again), and record
    each change; services not named keep theirs. The caller commits."""
    for service, rate in overrides.items():
        await conn.execute(_REMOVE_OVERRIDE if rate is None else _SET_OVERRIDE, {"service": service, "rate": rate})
        await conn.execute(_RECORD_CHANGE, {"rate": rate, "service": service})


def budget_share(budget: DeletionBudget, deleting: list[str], service: str) -> int:
    """A service's rows/s for its next call: its own override if it has one; otherwise the budget split evenly
    over the deletion's services still deleting that have none (a service done leaves its share to the others),
    each of which applies its share to its own store; 0 (unlimited) without a budget."""
    if (own := budget.services.get(service)) is not None:
        return own
    if budget.rows_per_second is None:
        return 0
    sharing = sum(1 for name in deleting if name not in budget.services)
    return max(1, budget.rows_per_second // max(1, sharing))
