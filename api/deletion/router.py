"""Deleting an account: the caller's own (signed out at once), or an admin's re-drive of one by id."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Body, Response, status
from fastapi.responses import JSONResponse

from api.deletion.answer import NO_WAIT, PreferHeader, WaitPlan, deletion_answers, plan_wait
from api.deletion.requests import Accepted, Finished, await_deletion, redrive_account_deletion, request_account_deletion
from api.deletion.schemas import AccountDeletionFinished, DeletionAccepted
from api.dependencies import AdminDep, CallerDep, EngineDep, SessionDep, SettingsDep, TemporalDep
from api.exports.schemas import AccountDeletionOptions
from api.problems import ProblemError, problem_responses
from lifecycle.exports.starts import request_account_export
from lifecycle.statuses import DeletionState, requested_deletion_state

router = APIRouter(tags=["accounts"])


@router.delete(
    "/account",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=DeletionAccepted,
    summary="Delete the calling account: its keys stop working at once; 200 once a small account is gone, "
    "else 202 while its data goes in the background",
    responses=deletion_answers(
        finished_model=AccountDeletionFinished,
        accepted_description="The deletion runs in the background; a confirmation email follows.",
    )
    | problem_responses(401),
)
async def delete_account(
    caller: CallerDep,
    session: SessionDep,
    engine: EngineDep,
    client: TemporalDep,
    settings: SettingsDep,
    response: Response,
    prefer: PreferHeader = None,
    options: Annotated[AccountDeletionOptions | None, Body()] = None,
) -> DeletionAccepted | JSONResponse:
    export_first = options is not None and options.export_first
    if export_first:
        # Recorded before the deletion is: every run of the account deletion waits for this export's archive
        # to be ready and its link mailed (activities/exports/steps.py, await_account_exports).
        await request_account_export(session, client, settings, account_id=caller.account_id, deletion_waits=True)
    accepted = await request_account_deletion(session, client, settings, account_id=caller.account_id)
    # Committed, so the session holds no connection now; closed, so nothing below can take one and keep it
    # while the request waits (tests/deletion/test_inline_answer.py checks the pool while it does).
    await session.close()
    # The one place that decides whether this deletion can end within the request. One that cannot (a grace
    # period before it, a legal hold in force, an export first) answers here, before anything is counted or awaited.
    if accepted.deletes_at is not None or accepted.held or export_first:
        return _accepted(response, accepted.workflow_id, NO_WAIT, _state(accepted), accepted.deletes_at)
    plan = plan_wait(prefer, settings)
    if plan.seconds > 0:
        outcome = await await_deletion(client, accepted.workflow_id, plan.seconds, account=True)
        if isinstance(outcome, Finished):
            finished = AccountDeletionFinished(
                workflow_id=accepted.workflow_id,
                status=outcome.status,
                deleted=outcome.deleted,
                bots_deleted=outcome.bots_deleted or 0,
                status_url=None,
            )
            return JSONResponse(finished.model_dump(mode="json"), headers=plan.headers(finished=True))
        return _accepted(response, accepted.workflow_id, plan, outcome.status)
    return _accepted(response, accepted.workflow_id, plan, DeletionState.ACCEPTED)


def _state(accepted: Accepted) -> DeletionState:
    return requested_deletion_state(scheduled=accepted.deletes_at is not None, held=accepted.held)


def _accepted(
    response: Response, workflow_id: str, plan: WaitPlan, state: DeletionState, deletes_at: datetime | None = None
) -> DeletionAccepted:
    plan.apply(response, finished=False)
    # The caller is signed out, so there is no status URL it could read; a confirmation email follows.
    return DeletionAccepted(workflow_id=workflow_id, status=state, status_url=None, deletes_at=deletes_at)


@router.post(
    "/accounts/{account_id}/deletion",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=DeletionAccepted,
    summary="Admin: start or join an account's deletion; after a cancel, terminate or failure, a new run "
    "finishes it from wherever the data stands",
    responses=problem_responses(401, 403, 404),
)
async def redrive_account(
    account_id: uuid.UUID, _admin: AdminDep, session: SessionDep, client: TemporalDep, settings: SettingsDep
) -> DeletionAccepted:
    accepted = await redrive_account_deletion(session, client, settings, account_id=account_id)
    if accepted is None:
        raise ProblemError(404, "No such account, and none was deleted.")
    # A re-drive within the grace period waits out what is left of it (restorable until deletes_at).
    state = DeletionState.COMPLETED if accepted.finished else _state(accepted)
    return DeletionAccepted(
        workflow_id=accepted.workflow_id, status=state, status_url=None, deletes_at=accepted.deletes_at
    )
