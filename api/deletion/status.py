"""A deletion's status from durable state only: PostgreSQL for the request and per-service progress, the
Temporal server's `describe` for how the run stands. No worker is asked anything, so a busy, slow or absent
worker cannot slow an answer, and a slow or absent Temporal server costs at most DESCRIBE_TIMEOUT.

How the status is decided:

- RUNNING: the run's `LifecycleStatus` search attribute (scheduled, running, paused or waiting_for_operator);
- COMPLETED: `completed`, or `incomplete` if an operator skipped a service, or `restored` if the run published
  that an admin restored the account during its grace period;
- CANCELED, TERMINATED: `cancelled`, `terminated`; FAILED, TIMED_OUT: `failed`;
- no such run: `running` if recorded but not started yet (the reconciler starts it), or `completed` if the
  record says it finished (its history is gone after retention);
- no answer within DESCRIBE_TIMEOUT (Temporal down or slow): from the database alone, `completed` or
  `incomplete` once `completed_at` is set, else `unknown`.

`unknown` is the honest answer while Temporal is down: the run may be running, paused or closed by an operator,
and the database cannot tell which. The answer is still 200 with the progress the deleters committed.
"""

from __future__ import annotations

import asyncio
import enum
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Final, Literal

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from lifecycle.db.models import DeletionProgress, DeletionRequest
from lifecycle.deletion.pace import Pace
from lifecycle.search_attributes import LIFECYCLE_STATUS
from lifecycle.statuses import (
    CLOSED_WITHOUT_COMPLETING,
    OPEN_DELETION_STATES,
    DeletionState,
    Throttle,
    strongest_throttle,
)

# `describe` is answered by the server from its own store in a few milliseconds; past this, answer from the
# database instead, so a struggling Temporal server never holds a status call for long.
DESCRIBE_TIMEOUT = timedelta(milliseconds=250)

# Shown while Temporal does not answer and the database has no completion recorded.
UNKNOWN: Final = "unknown"
ShownStatus = DeletionState | Literal["unknown"]

# A deleter records its rate with every batch, several times a second while it runs; a rate older than this is
# from before a pause, a stall or a slice boundary's wait, and counts as nothing.
RATE_STALE = timedelta(seconds=3)

# States in which a deletion is deleting, so its measured rate and estimate apply.
_MOVING_STATES = frozenset({DeletionState.RUNNING})

_CLOSED_STATES = {
    WorkflowExecutionStatus.COMPLETED: DeletionState.COMPLETED,
    WorkflowExecutionStatus.CANCELED: DeletionState.CANCELLED,
    WorkflowExecutionStatus.TERMINATED: DeletionState.TERMINATED,
    WorkflowExecutionStatus.FAILED: DeletionState.FAILED,
    WorkflowExecutionStatus.TIMED_OUT: DeletionState.FAILED,
}


class _Run(enum.Enum):
    ABSENT = "absent"  # the server has no run under this id
    UNANSWERED = "unanswered"  # no client, an RPC error, or no answer within DESCRIBE_TIMEOUT


@dataclass(frozen=True)
class ServiceTally:
    deleted: int
    total: int


@dataclass(frozen=True)
class DeletionView:
    status: ShownStatus
    progress: dict[str, ServiceTally]
    # False when Temporal did not answer and the status comes from the database alone.
    temporal_answered: bool
    pace: Pace = field(default_factory=Pace)

    @property
    def resumable(self) -> bool:
        return self.status in CLOSED_WITHOUT_COMPLETING


async def bot_deletion_view(session: AsyncSession, client: Client | None, record: DeletionRequest) -> DeletionView:
    return await _view(session, client, record, progress_of=[record.workflow_id])


async def account_deletion_view(session: AsyncSession, client: Client | None, record: DeletionRequest) -> DeletionView:
    """The account's run, with the progress of every bot deletion recorded for the account added up."""
    bot_runs = (
        await session.execute(
            select(DeletionRequest.workflow_id).where(
                DeletionRequest.account_id == record.account_id, DeletionRequest.kind == "bot"
            )
        )
    ).scalars()
    return await _view(session, client, record, progress_of=list(bot_runs))


async def account_deletion_record(session: AsyncSession, account_id: uuid.UUID) -> DeletionRequest | None:
    return (
        await session.execute(
            select(DeletionRequest).where(DeletionRequest.account_id == account_id, DeletionRequest.kind == "account")
        )
    ).scalar_one_or_none()


async def _view(
    session: AsyncSession, client: Client | None, record: DeletionRequest, *, progress_of: Sequence[str]
) -> DeletionView:
    # The database read and the server's describe are independent: one waits while the other answers.
    (progress, any_skipped, pace), run = await asyncio.gather(
        _progress(session, progress_of), _run_state(client, record.workflow_id)
    )
    if run is _Run.UNANSWERED:
        status: ShownStatus = UNKNOWN
        if record.completed_at is not None:
            status = DeletionState.INCOMPLETE if any_skipped else DeletionState.COMPLETED
        return DeletionView(status, progress, temporal_answered=False, pace=pace)
    if run is _Run.ABSENT:
        run = DeletionState.RUNNING if record.completed_at is None else DeletionState.COMPLETED
    if run is DeletionState.COMPLETED and any_skipped:
        run = DeletionState.INCOMPLETE
    if run not in _MOVING_STATES:
        # Paused, waiting, or closed: whatever the deleters measured last no longer applies.
        pace = Pace(remaining=pace.remaining)
    return DeletionView(run, progress, temporal_answered=True, pace=pace)


async def _progress(session: AsyncSession, workflow_ids: Sequence[str]) -> tuple[dict[str, ServiceTally], bool, Pace]:
    if not workflow_ids:
        return {}, False, Pace()
    under_way = ~DeletionProgress.done
    # A rate recorded longer ago than RATE_STALE is from before a pause or a stall: it no longer applies.
    current = under_way & (DeletionProgress.updated_at > func.now() - RATE_STALE)
    rows = await session.execute(
        select(
            DeletionProgress.service,
            func.sum(DeletionProgress.deleted),
            func.sum(DeletionProgress.total),
            func.bool_or(DeletionProgress.skipped),
            func.coalesce(func.sum(DeletionProgress.rows_per_second).filter(current), 0),
            func.coalesce(
                func.sum(func.greatest(DeletionProgress.total - DeletionProgress.deleted, 0)).filter(under_way), 0
            ),
            func.array_agg(func.distinct(DeletionProgress.throttled)).filter(current),
        )
        .where(DeletionProgress.workflow_id.in_(workflow_ids))
        .group_by(DeletionProgress.service)
        .order_by(DeletionProgress.service)
    )
    progress: dict[str, ServiceTally] = {}
    any_skipped = False
    rate = remaining = 0
    throttles: set[Throttle] = set()
    for service, deleted, total, skipped, service_rate, service_remaining, service_throttles in rows:
        progress[service] = ServiceTally(deleted=int(deleted), total=int(total))
        any_skipped = any_skipped or bool(skipped)
        rate += int(service_rate)
        remaining += int(service_remaining)
        throttles.update(Throttle(value) for value in service_throttles or () if value is not None)
    return progress, any_skipped, Pace(rate, remaining, strongest_throttle(throttles))


async def _run_state(client: Client | None, workflow_id: str) -> DeletionState | _Run:
    if client is None:
        return _Run.UNANSWERED
    handle = client.get_workflow_handle(workflow_id)
    try:
        # The RPC deadline bounds the server; wait_for also bounds a connection that is itself stuck.
        description = await asyncio.wait_for(
            handle.describe(rpc_timeout=DESCRIBE_TIMEOUT), DESCRIBE_TIMEOUT.total_seconds() * 2
        )
    except RPCError as err:
        return _Run.ABSENT if err.status == RPCStatusCode.NOT_FOUND else _Run.UNANSWERED
    except (TimeoutError, RuntimeError, OSError):
        return _Run.UNANSWERED
    if description.status == WorkflowExecutionStatus.RUNNING:
        published = description.typed_search_attributes.get(LIFECYCLE_STATUS)
        return DeletionState(published) if published in OPEN_DELETION_STATES else DeletionState.RUNNING
    if description.status == WorkflowExecutionStatus.COMPLETED:
        restored = description.typed_search_attributes.get(LIFECYCLE_STATUS) == DeletionState.RESTORED
        return DeletionState.RESTORED if restored else DeletionState.COMPLETED
    if description.status in _CLOSED_STATES:
        return _CLOSED_STATES[description.status]
    # CONTINUED_AS_NEW is never the latest run's status; treat anything unforeseen as still going.
    return DeletionState.RUNNING
