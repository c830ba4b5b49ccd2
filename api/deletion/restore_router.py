"""Restoring an account during its deletion's grace period (admin): lossless, with a new key."""

from __future__ import annotations

import uuid

from fastapi import APIRouter

from api.deletion.restore import RestoreRefused, restore_account
from api.deletion.restore_schemas import AccountRestored
from api.dependencies import AdminDep, SessionDep, TemporalDep
from api.problems import ProblemError, problem_responses
from api.security import generate_api_key, hash_api_key, shown_prefix
from lifecycle.statuses import DeletionState

router = APIRouter(tags=["accounts"])


@router.post(
    "/accounts/{account_id}/restore",
    response_model=AccountRestored,
    summary="Admin: cancel an account's pending deletion during its grace period and issue a new API key; "
    "409 once deleting began or if none is pending",
    responses=problem_responses(401, 403, 404, 409),
)
async def restore(account_id: uuid.UUID, _admin: AdminDep, session: SessionDep, client: TemporalDep) -> AccountRestored:
    key = generate_api_key()
    try:
        # Only the hash is stored, and only once the workflow accepted the restore.
        restored = await restore_account(
            session, client, account_id=account_id, new_key_hash=hash_api_key(key), new_key_prefix=shown_prefix(key)
        )
    except RestoreRefused as refused:
        raise ProblemError(409, str(refused), title="Cannot restore") from refused
    if restored is None:
        raise ProblemError(404, "No such account.")
    return AccountRestored(id=account_id, workflow_id=restored.workflow_id, status=DeletionState.RESTORED, api_key=key)
