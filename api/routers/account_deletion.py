"""Deleting the calling account: signed out at once, data deleted in the background, one email at the end."""

from __future__ import annotations

from fastapi import APIRouter, status

from api.dependencies import CallerDep, SessionDep, SettingsDep, TemporalDep
from api.problems import problem_responses
from api.schemas.bots import DeletionAccepted
from lifecycle.deletion_requests import request_account_deletion

router = APIRouter(tags=["accounts"])


@router.delete(
    "/account",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=DeletionAccepted,
    summary="Delete the calling account: its keys stop working at once, its data goes in the background",
    responses=problem_responses(401),
)
async def delete_account(
    caller: CallerDep, session: SessionDep, client: TemporalDep, settings: SettingsDep
) -> DeletionAccepted:
    accepted = await request_account_deletion(session, client, settings.task_queue, account_id=caller.account_id)
    # The caller is signed out, so there is no status URL it could read; a confirmation email follows.
    return DeletionAccepted(
        workflow_id=accepted.workflow_id,
        status="completed" if accepted.finished else "running",
        status_url=None,
    )
