"""Previews of a deletion: what deleting the calling account or one of its bots would remove, and how long it
would take, asked of every registered service now, with nothing changed (api/deletion/preview.py)."""

from __future__ import annotations

import uuid

from fastapi import APIRouter
from sqlalchemy import select

from api.deletion.preview import account_subject, bot_subject, preview_deletion
from api.deletion.preview_schemas import DeletionPreviewOut
from api.dependencies import CallerDep, SessionDep, SettingsDep, TemporalDep
from api.problems import ProblemError, problem_responses
from lifecycle.db.models import Bot

router = APIRouter(tags=["deletions"])


@router.get(
    "/account/deletion/preview",
    response_model=DeletionPreviewOut,
    summary="What deleting the calling account would remove, per service, and how long it would take; changes nothing",
    responses=problem_responses(401, 422, 503),
)
async def preview_account_deletion(
    caller: CallerDep, session: SessionDep, client: TemporalDep, settings: SettingsDep
) -> DeletionPreviewOut:
    # Every bot of the account, as the account deletion takes them (activities/deletion/records.py).
    bot_ids = await session.execute(select(Bot.id).where(Bot.account_id == caller.account_id).order_by(Bot.id))
    return await preview_deletion(
        session,
        client,
        settings,
        account_id=caller.account_id,
        subject=account_subject(caller.account_id),
        bot_ids=[str(bot_id) for bot_id in bot_ids.scalars()],
    )


@router.get(
    "/bots/{bot_id}/deletion/preview",
    response_model=DeletionPreviewOut,
    summary="What deleting a bot would remove, per service, and how long it would take; changes nothing",
    responses=problem_responses(401, 404, 503),
)
async def preview_bot_deletion(
    bot_id: uuid.UUID, caller: CallerDep, session: SessionDep, client: TemporalDep, settings: SettingsDep
) -> DeletionPreviewOut:
    found = (
        await session.execute(
            select(Bot.id).where(
                Bot.id == bot_id, Bot.account_id == caller.account_id, Bot.deletion_requested_at.is_(None)
            )
        )
    ).scalar_one_or_none()
    if found is None:
        # Another account's bot, too: nothing says it exists.
        raise ProblemError(404, "No such bot in this account.")
    return await preview_deletion(
        session, client, settings, account_id=caller.account_id, subject=bot_subject(bot_id), bot_ids=[str(bot_id)]
    )
