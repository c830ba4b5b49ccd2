"""Bots: create, list, read, and delete in the background."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, Response, status
from fastapi.responses import JSONResponse
from sqlalchemy import select

from api.bots.schemas import BotCreate, BotOut
from api.deletion.answer import NO_WAIT, PreferHeader, deletion_answers, plan_wait
from api.deletion.requests import Finished, Unauthorized, await_deletion, request_bot_deletion
from api.deletion.schemas import DeletionAccepted, DeletionFinished
from api.dependencies import (
    AccountKeyDep,
    CallerDep,
    EngineDep,
    SessionDep,
    SettingsDep,
    TemporalDep,
    unknown_api_key,
)
from api.problems import ProblemError, problem_responses
from lifecycle.db.models import Bot
from lifecycle.statuses import DeletionState

router = APIRouter(tags=["bots"])

_NOT_FOUND = "No such bot in this account."


@router.post(
    "/bots",
    status_code=status.HTTP_201_CREATED,
    response_model=BotOut,
    summary="Create a bot",
    responses=problem_responses(401, 422),
)
async def create_bot(body: BotCreate, caller: CallerDep, session: SessionDep) -> BotOut:
    bot = Bot(account_id=caller.account_id, name=body.name)
    session.add(bot)
    await session.commit()
    return BotOut(id=bot.id, name=bot.name)


@router.get("/bots", response_model=list[BotOut], summary="The account's bots", responses=problem_responses(401))
async def list_bots(caller: CallerDep, session: SessionDep) -> list[BotOut]:
    rows = await session.execute(
        select(Bot)
        .where(Bot.account_id == caller.account_id, Bot.deletion_requested_at.is_(None))
        .order_by(Bot.created_at, Bot.id)
    )
    return [BotOut(id=bot.id, name=bot.name) for bot in rows.scalars()]


@router.get("/bots/{bot_id}", response_model=BotOut, summary="One bot", responses=problem_responses(401, 404))
async def get_bot(bot_id: uuid.UUID, caller: CallerDep, session: SessionDep) -> BotOut:
    bot = (
        await session.execute(
            select(Bot).where(
                Bot.id == bot_id, Bot.account_id == caller.account_id, Bot.deletion_requested_at.is_(None)
            )
        )
    ).scalar_one_or_none()
    if bot is None:
        raise ProblemError(404, _NOT_FOUND)
    return BotOut(id=bot.id, name=bot.name)


@router.delete(
    "/bots/{bot_id}",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=DeletionAccepted,
    summary="Delete a bot and all its data: 200 once a small deletion finished, else 202 while it runs in the "
    "background; a repeat joins the open run, or finishes one that closed without completing",
    responses=deletion_answers(
        finished_model=DeletionFinished,
        accepted_description="The deletion runs in the background; `Location` is where to follow it.",
    )
    | problem_responses(401, 404),
)
async def delete_bot(
    bot_id: uuid.UUID,
    # The key is checked inside the deletion's own statement rather than through CallerDep: one round trip.
    key_hash: AccountKeyDep,
    engine: EngineDep,
    client: TemporalDep,
    settings: SettingsDep,
    response: Response,
    prefer: PreferHeader = None,
) -> DeletionAccepted | JSONResponse:
    try:
        accepted = await request_bot_deletion(
            engine,
            client,
            settings.task_queue,
            key_hash=key_hash,
            bot_id=bot_id,
            due_within=settings.erasure_due_within,
        )
    except Unauthorized:
        raise unknown_api_key() from None
    if accepted is None:
        raise ProblemError(404, _NOT_FOUND)
    status_url = f"/bots/{bot_id}/deletion"
    plan = plan_wait(prefer, settings)
    state = DeletionState.COMPLETED if accepted.finished else DeletionState.ACCEPTED
    if accepted.held:
        # A legal hold is in force on the account: the run waits until it is released, so nothing is awaited.
        state, plan = DeletionState.HELD, NO_WAIT
    if plan.seconds > 0:
        outcome = await await_deletion(client, accepted.workflow_id, plan.seconds, account=False)
        if isinstance(outcome, Finished):
            finished = DeletionFinished(
                workflow_id=accepted.workflow_id, status=outcome.status, deleted=outcome.deleted, status_url=status_url
            )
            return JSONResponse(finished.model_dump(mode="json"), headers=plan.headers(finished=True))
        # A run that finished earlier and whose history is gone is still finished: the record says so.
        state = state if accepted.finished else outcome.status
    plan.apply(response, finished=False)
    response.headers["Location"] = status_url
    return DeletionAccepted(workflow_id=accepted.workflow_id, status=state, status_url=status_url)
