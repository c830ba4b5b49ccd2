"""Tokens that let a browser open one event stream: minted here with the key (or the admin token), then sent
by the browser as an HttpOnly cookie, or in the query string (see api/streams/tokens.py for why)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, Field

from api.deletion.status import account_deletion_record
from api.dependencies import AdminDep, CallerDep, SessionDep, SettingsDep
from api.problems import ProblemError, problem_responses
from api.streams.tokens import COOKIE_NAME, StreamGrant, StreamKind, StreamTokensUnavailable, encode, mint
from lifecycle.db.models import DeletionRequest, Site
from lifecycle.deletion.workflow_types import bot_deletion_id
from lifecycle.settings import Settings

router = APIRouter(tags=["events"])


class StreamTokenOut(BaseModel):
    token: str = Field(description="Opens this one stream until `expires_at`; also set as an HttpOnly cookie.")
    expires_at: datetime
    stream_url: str = Field(description="The stream it opens: with the cookie as is, or add `?access_token=`.")


_RESPONSES = problem_responses(401, 404, 422)
_DESCRIPTION = (
    "A browser's EventSource cannot send `Authorization`. This answers a token for this one stream, valid for "
    "`STREAM_TOKEN_TTL` (reconnections included) while the key that minted it is not revoked, in an HttpOnly, "
    "SameSite=Strict cookie whose path is the stream's, and in the body for clients that must put it in the "
    "stream's query string as `access_token`. The stream it opens ends with an event `credentials-ended` then."
)


def _answer(request: Request, response: Response, settings: Settings, grant: StreamGrant, path: str) -> StreamTokenOut:
    try:
        token = encode(settings, grant)
    except StreamTokensUnavailable:
        raise ProblemError(503, "Stream tokens are not configured on this server (EXPORT_SIGNING_KEY).") from None
    response.set_cookie(
        COOKIE_NAME,
        token,
        max_age=int(settings.stream_token_ttl.total_seconds()),
        path=path,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    response.headers["Cache-Control"] = "no-store"
    return StreamTokenOut(token=token, expires_at=datetime.fromtimestamp(grant.expires, UTC), stream_url=path)


@router.post(
    "/sites/{site_id}/events/token",
    status_code=201,
    response_model=StreamTokenOut,
    summary="A token that opens this site's event stream from a browser",
    description=_DESCRIPTION,
    responses=_RESPONSES,
)
async def site_stream_token(
    site_id: uuid.UUID,
    request: Request,
    response: Response,
    caller: CallerDep,
    session: SessionDep,
    settings: SettingsDep,
) -> StreamTokenOut:
    site = await session.get(Site, site_id)
    if site is None or site.account_id != caller.account_id:
        raise ProblemError(404, "No such site.")
    grant = mint(settings, StreamKind.SITE, site_id, caller.account_id, caller.key_id)
    return _answer(request, response, settings, grant, f"/sites/{site_id}/events")


@router.post(
    "/bots/{bot_id}/deletion/events/token",
    status_code=201,
    response_model=StreamTokenOut,
    summary="A token that opens this bot deletion's event stream from a browser",
    description=_DESCRIPTION,
    responses=_RESPONSES,
)
async def bot_deletion_stream_token(
    bot_id: uuid.UUID,
    request: Request,
    response: Response,
    caller: CallerDep,
    session: SessionDep,
    settings: SettingsDep,
) -> StreamTokenOut:
    record = await session.get(DeletionRequest, bot_deletion_id(bot_id))
    if record is None or record.account_id != caller.account_id:
        raise ProblemError(404, "No deletion was requested for this bot.")
    grant = mint(settings, StreamKind.BOT_DELETION, bot_id, caller.account_id, caller.key_id)
    return _answer(request, response, settings, grant, f"/bots/{bot_id}/deletion/events")


@router.post(
    "/accounts/{account_id}/deletion/events/token",
    status_code=201,
    response_model=StreamTokenOut,
    summary="A token that opens this account deletion's event stream from a browser (admin token)",
    description=_DESCRIPTION,
    responses=problem_responses(401, 403, 404, 422),
)
async def account_deletion_stream_token(
    account_id: uuid.UUID,
    request: Request,
    response: Response,
    _admin: AdminDep,
    session: SessionDep,
    settings: SettingsDep,
) -> StreamTokenOut:
    if await account_deletion_record(session, account_id) is None:
        raise ProblemError(404, "No deletion was requested for this account.")
    grant = mint(settings, StreamKind.ACCOUNT_DELETION, account_id, account_id, None)
    return _answer(request, response, settings, grant, f"/accounts/{account_id}/deletion/events")
