"""A deletion's status from PostgreSQL alone: the request's recorded status and the per-service progress.

Nothing here asks Temporal or a worker, so neither a busy worker nor a slow or absent Temporal server can slow an
answer or change it. The status is `deletion_requests.status`, written by whoever knows of a change: the API
when it records the request (`accepted`, or `scheduled` in a grace period), the run for every change it makes
(workflows/deletion/status_recorder.py), and the reconciler for a run that closed or was reset without recording it (a
terminate, say: activities/deletion/reconciler.py). Which statuses are open and terminal is lifecycle/statuses.py's.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from lifecycle.db.models import DeletionProgress, DeletionRequest
from lifecycle.deletion.contracts import DELETER_SLICE
from lifecycle.deletion.pace import Pace
from lifecycle.statuses import CLOSED_WITHOUT_COMPLETING, DeletionState, Throttle, strongest_throttle

# A service's rate is recorded with every answer, once a slice (DELETER_SLICE, 5 s) while it runs; a rate older than
# two slices is from before a pause or a stall, and counts as nothing.
RATE_STALE = 2 * DELETER_SLICE

# States in which a deletion is deleting, so its measured rate and estimate apply.
_MOVING_STATES = frozenset({DeletionState.RUNNING})


@dataclass(frozen=True)
class ServiceTally:
    deleted: int
    total: int
    # Since when the deletion has waited for a registered service's worker; None while it answers.
    waiting_since: datetime | None = None
    # Why Temporal holds back the calls to it meanwhile (its endpoint's circuit breaker open), if it does.
    blocked_reason: str | None = None


@dataclass(frozen=True)
class DeletionView:
    status: DeletionState
    progress: dict[str, ServiceTally]
    pace: Pace = field(default_factory=Pace)

    @property
    def resumable(self) -> bool:
        return self.status in CLOSED_WITHOUT_COMPLETING


async def bot_deletion_view(session: AsyncSession, record: DeletionRequest) -> DeletionView:
    return await _view(session, record, progress_of=[record.workflow_id])


async def account_deletion_view(session: AsyncSession, record: DeletionRequest) -> DeletionView:
    """The account's status, with the progress of every bot deletion recorded for the account added up."""
    bot_runs = (
        await session.execute(
            select(DeletionRequest.workflow_id).where(
                DeletionRequest.account_id == record.account_id, DeletionRequest.kind == "bot"
            )
        )
    ).scalars()
    return await _view(session, record, progress_of=list(bot_runs))


async def account_deletion_record(session: AsyncSession, account_id: uuid.UUID) -> DeletionRequest | None:
    return (
        await session.execute(
            select(DeletionRequest).where(DeletionRequest.account_id == account_id, DeletionRequest.kind == "account")
        )
    ).scalar_one_or_none()


async def _view(session: AsyncSession, record: DeletionRequest, *, progress_of: Sequence[str]) -> DeletionView:
    status = DeletionState(record.status)
    progress, pace = await _progress(session, progress_of)
    if status not in _MOVING_STATES:
        # Paused, waiting, or closed: whatever the deleters measured last no longer applies.
        pace = Pace(remaining=pace.remaining)
    return DeletionView(status, progress, pace)


async def _progress(session: AsyncSession, workflow_ids: Sequence[str]) -> tuple[dict[str, ServiceTally], Pace]:
    if not workflow_ids:
        return {}, Pace()
    under_way = ~DeletionProgress.done
    # A rate recorded longer ago than RATE_STALE is from before a pause or a stall: it no longer applies.
    current = under_way & (DeletionProgress.updated_at > func.now() - RATE_STALE)
    rows = await session.execute(
        select(
            DeletionProgress.service,
            func.sum(DeletionProgress.deleted),
            func.sum(DeletionProgress.total),
            func.coalesce(func.sum(DeletionProgress.rows_per_second).filter(current), 0),
            func.coalesce(
                func.sum(func.greatest(DeletionProgress.total - DeletionProgress.deleted, 0)).filter(under_way), 0
            ),
            func.array_agg(func.distinct(DeletionProgress.throttled)).filter(current),
            func.min(DeletionProgress.waiting_since).filter(under_way),
            func.max(DeletionProgress.blocked_reason).filter(under_way),
        )
        .where(DeletionProgress.workflow_id.in_(workflow_ids))
        .group_by(DeletionProgress.service)
        .order_by(DeletionProgress.service)
    )
    progress: dict[str, ServiceTally] = {}
    rate = remaining = 0
    throttles: set[Throttle] = set()
    for service, deleted, total, service_rate, service_remaining, service_throttles, waiting_since, blocked in rows:
        progress[service] = ServiceTally(int(deleted), int(total), waiting_since, blocked)
        rate += int(service_rate)
        remaining += int(service_remaining)
        throttles.update(Throttle(value) for value in service_throttles or () if value is not None)
    return progress, Pace(rate, remaining, strongest_throttle(throttles))
