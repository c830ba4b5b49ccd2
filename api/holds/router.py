"""An account's legal hold (admin): placed with a reason, read, released. While a hold is in force nothing of the
account is deleted: a deletion requested meanwhile is accepted and waits, `held`; one under way stops at its next
batch boundary, `held`; both go on once the hold is released (workflows/deletion/legal_hold.py)."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, Response

from api.dependencies import AdminDep, SessionDep, TemporalDep
from api.holds.holds import account_exists, hold_in_force, place_hold, release_hold, tell_deletions
from api.holds.schemas import LegalHoldOut, LegalHoldPut
from api.problems import ProblemError, problem_responses

router = APIRouter(tags=["accounts"])

_NO_ACCOUNT = "No such account."


def _no_hold(account_id: uuid.UUID, doing: str) -> ProblemError:
    return ProblemError(404, f"Account {account_id} has no legal hold in force{doing}.", title="No legal hold")


@router.put(
    "/accounts/{account_id}/legal-hold",
    response_model=LegalHoldOut,
    summary="Admin: place a legal hold on an account (201), or change the reason of the one in force (200); its "
    "deletions stop at their next batch boundary, and wait, `held`, until it is released",
    responses={201: {"description": "Placed", "model": LegalHoldOut}, **problem_responses(401, 403, 404, 422)},
)
async def put_legal_hold(
    account_id: uuid.UUID,
    body: LegalHoldPut,
    _admin: AdminDep,
    session: SessionDep,
    client: TemporalDep,
    response: Response,
) -> LegalHoldOut:
    if not await account_exists(session, account_id):
        raise ProblemError(404, _NO_ACCOUNT)
    hold, placed = await place_hold(session, account_id, body.reason)
    await tell_deletions(session, client, account_id)
    response.status_code = 201 if placed else 200
    return hold


@router.get(
    "/accounts/{account_id}/legal-hold",
    response_model=LegalHoldOut,
    summary="Admin: the legal hold in force on an account; 404 if none is",
    responses=problem_responses(401, 403, 404, 422),
)
async def get_legal_hold(account_id: uuid.UUID, _admin: AdminDep, session: SessionDep) -> LegalHoldOut:
    hold = await hold_in_force(session, account_id)
    if hold is not None:
        return hold
    if not await account_exists(session, account_id):
        raise ProblemError(404, _NO_ACCOUNT)
    raise _no_hold(account_id, "")


@router.delete(
    "/accounts/{account_id}/legal-hold",
    response_model=LegalHoldOut,
    summary="Admin: release the account's legal hold; its deletions go on from where they stopped. 404 if no hold "
    "is in force (a repeat: nothing to release)",
    responses=problem_responses(401, 403, 404, 422),
)
async def delete_legal_hold(
    account_id: uuid.UUID, _admin: AdminDep, session: SessionDep, client: TemporalDep
) -> LegalHoldOut:
    released = await release_hold(session, account_id)
    if released is None and not await account_exists(session, account_id):
        raise ProblemError(404, _NO_ACCOUNT)
    # Also when nothing was released: a repeat after a release whose signals failed tells the runs again.
    await tell_deletions(session, client, account_id)
    if released is None:
        raise _no_hold(account_id, ": nothing to release")
    return released
