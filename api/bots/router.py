"""Bots: create, list, read, and delete in the background."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, Request, Response, status
from fastapi.responses import JSONResponse
from sqlalchemy import func, select

from api.bots.schemas import BotCreate, BotOut
from api.deletion.answer import NO_WAIT, PreferHeader, deletion_answers, plan_wait
from api.deletion.requests import Finished, await_deletion, request_bot_deletion
from api.deletion.schemas import DeletionAccepted, DeletionFinished
from api.dependencies import (
    CallerDep,
    EngineDep,
    SessionDep,
    SettingsDep,
    TemporalDep,
)
from api.paging import DEFAULT_PAGE, PAGED, Cursor, Limit, page
from api.problems import ProblemError, problem_responses
from api.quotas import refuse_at_limit, take_account_turn
from lifecycle.db.models import Bot
from lifecycle.statuses import DeletionState

router = APIRouter(tags=["bots"])

_NOT_FOUND = "No such bot in this account."
# A bot whose deletion is requested is gone for its account: not listed, not found, not counted.
_LISTED = Bot.deletion_requested_at.is_(None)


@router.post(
    "/bots",
    status_code=status.HTTP_201_CREATED,
    response_model=BotOut,
    summary="Create a bot; 429 once the account holds MAX_BOTS_PER_ACCOUNT bots",
    responses=problem_responses(401, 422, 429),
)
async def create_bot(body: BotCreate, caller: CallerDep, session: SessionDep, settings: SettingsDep) -> BotOut:
    await take_account_turn(session, caller.account_id)
    # The bots GET /bots lists count: one whose deletion is requested leaves its place at once.
    await refuse_at_limit(
        session,
        select(func.count()).select_from(Bot).where(_LISTED, Bot.account_id == caller.account_id),
        settings.max_bots_per_account,
        noun="bots",
        remedy="Delete one to create another.",
        title="Bot limit reached",
    )
    bot = Bot(account_id=caller.account_id, name=body.name)
    session.add(bot)
    await session.commit()
    return BotOut(id=bot.id, name=bot.name)


@router.get(
    "/bots",
    response_model=list[BotOut],
    summary="The account's bots, oldest first, a page at a time",
    responses=problem_responses(401, 422) | PAGED,
)
async def list_bots(
    caller: CallerDep,
    session: SessionDep,
    request: Request,
    response: Response,
    cursor: Cursor = None,
    limit: Limit = DEFAULT_PAGE,
) -> list[BotOut]:
    listed = select(Bot).where(Bot.account_id == caller.account_id, _LISTED)
    bots = await page(
        session, listed, (Bot.created_at, Bot.id), cursor=cursor, limit=limit, request=request, response=response
    )
    return [BotOut(id=bot.id, name=bot.name) for bot in bots]


@router.get("/bots/{bot_id}", response_model=BotOut, summary="One bot", responses=problem_responses(401, 404))
async def get_bot(bot_id: uuid.UUID, caller: CallerDep, session: SessionDep) -> BotOut:
    bot = (
        await session.execute(select(Bot).where(Bot.id == bot_id, Bot.account_id == caller.account_id, _LISTED))
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
    caller: CallerDep,
    session: SessionDep,
    engine: EngineDep,
    client: TemporalDep,
    settings: SettingsDep,
    response: Response,
    prefer: PreferHeader = None,
) -> DeletionAccepted | JSONResponse:
    accepted = await request_bot_deletion(
        session,
        engine,
        client,
        settings.task_queue,
        account_id=caller.account_id,
        bot_id=bot_id,
        due_within=settings.erasure_due_within,
        registry_settle_seconds=settings.deletion_registry_settle_seconds,
    )
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
