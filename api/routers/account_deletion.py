"""Deleting an account: the caller's own (signed out at once), or an admin's re-drive of one by id."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Body, status

from api.dependencies import AdminDep, CallerDep, SessionDep, SettingsDep, TemporalDep
from api.problems import ProblemError, problem_responses
from api.schemas.bots import DeletionAccepted
from api.schemas.exports import AccountDeletionOptions
from lifecycle.deletion_requests import redrive_account_deletion, request_account_deletion
from lifecycle.export_starts import request_account_export
from lifecycle.statuses import DeletionState

router = APIRouter(tags=["accounts"])


@router.delete(
    "/account",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=DeletionAccepted,
    summary="Delete the calling account: its keys stop working at once, its data goes in the background",
    responses=problem_responses(401),
)
async def delete_account(
    caller: CallerDep,
    session: SessionDep,
    client: TemporalDep,
    settings: SettingsDep,
    options: Annotated[AccountDeletionOptions | None, Body()] = None,
) -> DeletionAccepted:
    if options is not None and options.export_first:
        # Recorded before the deletion is: every run of the account deletion waits for this export's archive
        # to be ready and its link mailed (activities/account_export.py, await_account_exports).
        await request_account_export(session, client, settings, account_id=caller.account_id, deletion_waits=True)
    accepted = await request_account_deletion(session, client, settings, account_id=caller.account_id)
    # The caller is signed out, so there is no status URL it could read; a confirmation email follows.
    return DeletionAccepted(workflow_id=accepted.workflow_id, status=DeletionState.RUNNING, status_url=None)


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
    return DeletionAccepted(
        workflow_id=accepted.workflow_id,
        status=DeletionState.COMPLETED if accepted.finished else DeletionState.RUNNING,
        status_url=None,
    )
