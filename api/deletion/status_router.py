"""Where a bot's or an account's deletion stands, answered from PostgreSQL only.

Neither a worker nor the Temporal server is on this path, so neither can slow it, change it or turn it into a
5xx (see api/deletion/status.py for who records the status).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from fastapi import APIRouter
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from api.deletion.schemas import DeletionOut, ProcessorState, ServiceCount
from api.deletion.status import DeletionView, account_deletion_record, account_deletion_view, bot_deletion_view
from api.dependencies import AdminDep, CallerDep, SessionDep
from api.problems import ProblemError, problem_responses
from lifecycle.db.models import DeletionRequest, ProcessorErasure
from lifecycle.deletion.due import is_overdue
from lifecycle.deletion.workflow_types import bot_deletion_id
from lifecycle.statuses import DeletionState, ProcessorAnswer

router = APIRouter(tags=["deletions"])


@router.get(
    "/bots/{bot_id}/deletion",
    response_model=DeletionOut,
    summary="Where a bot's deletion stands, per service",
    responses=problem_responses(401, 404),
)
async def get_bot_deletion(bot_id: uuid.UUID, caller: CallerDep, session: SessionDep) -> DeletionOut:
    record = await session.get(DeletionRequest, bot_deletion_id(bot_id))
    if record is None or record.account_id != caller.account_id:
        raise ProblemError(404, "No deletion was requested for this bot.")
    return await bot_deletion_out(session, record)


@router.get(
    "/accounts/{account_id}/deletion",
    response_model=DeletionOut,
    summary="Where an account's deletion stands, with its bots' progress added up (admin token)",
    responses=problem_responses(401, 403, 404),
)
async def get_account_deletion(account_id: uuid.UUID, _admin: AdminDep, session: SessionDep) -> DeletionOut:
    record = await account_deletion_record(session, account_id)
    if record is None:
        raise ProblemError(404, "No deletion was requested for this account.")
    return await account_deletion_out(session, record)


# The answers of the two status endpoints, shared with their event streams (api/streams/router.py).


async def bot_deletion_out(session: AsyncSession, record: DeletionRequest) -> DeletionOut:
    view = await bot_deletion_view(session, record)
    resume = f"Repeat DELETE /bots/{record.bot_id} with the account's API key." if view.resumable else None
    return _deletion_out(record, view, resume)


async def account_deletion_out(session: AsyncSession, record: DeletionRequest) -> DeletionOut:
    view = await account_deletion_view(session, record)
    resume = f"POST /accounts/{record.account_id}/deletion with the admin token." if view.resumable else None
    out = _deletion_out(record, view, resume)
    out.processors = await _processors(session, record.workflow_id)
    out.processors_pending = [name for name, state in out.processors.items() if state.status == ProcessorAnswer.PENDING]
    return out


async def _processors(session: AsyncSession, workflow_id: str) -> dict[str, ProcessorState]:
    """Each processor's answer to the deletion's latest erasure (a deletion run again after a restore tells them
    again, under a new erasure id)."""
    rows = await session.execute(
        select(ProcessorErasure)
        .where(ProcessorErasure.deletion_workflow_id == workflow_id)
        .order_by(ProcessorErasure.requested_at, ProcessorErasure.processor)
    )
    return {
        erasure.processor: ProcessorState(
            status=ProcessorAnswer(erasure.status),
            acknowledged_at=erasure.acknowledged_at,
            reference=erasure.reference,
            attempts=erasure.attempts,
        )
        for erasure in rows.scalars()
    }


def _deletion_out(record: DeletionRequest, view: DeletionView, resume: str | None) -> DeletionOut:
    return DeletionOut(
        workflow_id=record.workflow_id,
        status=view.status,
        reason=record.status_reason if view.status == DeletionState.WAITING else None,
        progress={
            name: ServiceCount(
                deleted=p.deleted,
                total=p.total,
                status="waiting" if p.waiting_since is not None else None,
                waiting_since=p.waiting_since,
                reason=_waiting_reason(p.blocked_reason) if p.waiting_since is not None else None,
            )
            for name, p in view.progress.items()
        },
        as_of=record.status_confirmed_at,
        requested_at=record.requested_at,
        completed_at=record.completed_at,
        due_at=record.due_at,
        overdue=is_overdue(record.due_at, record.completed_at, view.status, datetime.now(UTC)),
        resume=resume,
        deletes_at=record.deletes_at if view.status == DeletionState.SCHEDULED else None,
        rows_per_second=view.pace.rows_per_second,
        estimated_completion=view.pace.estimated_completion(datetime.now(UTC)),
        throttled=view.pace.throttled,
    )


def _waiting_reason(blocked_reason: str | None) -> str | None:
    """Why a waiting service's calls do not reach it, when Temporal says (activities/deletion/blocked_calls.py)."""
    if blocked_reason is None:
        return None
    return f"Temporal holds back the calls to its Nexus endpoint: {blocked_reason}"
