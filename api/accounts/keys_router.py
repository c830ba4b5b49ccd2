"""The calling account's API keys: issue another (perhaps expiring), list them, revoke one. Rotating a key is
issuing a new one, moving the clients to it, then revoking the old one; the last live key cannot be revoked
(DELETE /account is how an account signs out for good). A revoked or expired key is refused at once, and the
streams it opened (or minted a token for) end within STREAM_CREDENTIALS_RECHECK seconds
(api/streams/credentials.py). An account holds at most MAX_KEYS_PER_ACCOUNT live keys."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Annotated

from fastapi import APIRouter, Body, Response, status
from sqlalchemy import func, select, text, update

from api.accounts.keys import LIVE_KEY_SQL
from api.accounts.keys_schemas import ApiKeyCreate, ApiKeyCreated, ApiKeyOut
from api.dependencies import CallerDep, SessionDep, SettingsDep
from api.problems import ProblemError, problem_responses
from api.quotas import refuse_at_limit
from api.security import generate_api_key, hash_api_key, shown_prefix
from lifecycle.db.models import ApiKey

router = APIRouter(tags=["accounts"])

_NOT_FOUND = "No such key in this account (or it is revoked or expired already)."

# Issues and revocations of one account's keys take turns: two revocations at once cannot each see the other's
# key as the one left and leave none, and two issues cannot both take the last free place. An advisory lock
# rather than the account's row: DELETE /account revokes the keys before it updates that row, so a revocation
# holding the row while it waits on a key would deadlock with it.
_ONE_CHANGE_PER_ACCOUNT = text("SELECT pg_advisory_xact_lock(hashtext('api_keys'), hashtext(:account))")
_LIVE = text(LIVE_KEY_SQL)


@router.post(
    "/account/keys",
    status_code=status.HTTP_201_CREATED,
    response_model=ApiKeyCreated,
    summary="Issue another API key for the calling account, perhaps expiring; the key is shown this once. 429 "
    "once the account holds MAX_KEYS_PER_ACCOUNT live keys",
    responses=problem_responses(401, 422, 429),
)
async def create_key(
    caller: CallerDep,
    session: SessionDep,
    settings: SettingsDep,
    response: Response,
    body: Annotated[ApiKeyCreate | None, Body()] = None,
) -> ApiKeyCreated:
    expires_in = None if body is None else body.expires_in
    expires_at = None if expires_in is None else datetime.now(UTC) + timedelta(seconds=expires_in)
    await session.execute(_ONE_CHANGE_PER_ACCOUNT, {"account": str(caller.account_id)})
    await refuse_at_limit(
        session,
        select(func.count()).select_from(ApiKey).where(ApiKey.account_id == caller.account_id, _LIVE),
        settings.max_keys_per_account,
        noun="live keys",
        remedy="Revoke one to issue another.",
        title="Key limit reached",
    )
    key = generate_api_key()
    row = ApiKey(
        account_id=caller.account_id, key_hash=hash_api_key(key), prefix=shown_prefix(key), expires_at=expires_at
    )
    session.add(row)
    await session.commit()
    response.headers["Cache-Control"] = "no-store"
    return ApiKeyCreated(id=row.id, api_key=key, expires_at=expires_at)


@router.get(
    "/account/keys",
    response_model=list[ApiKeyOut],
    summary="The calling account's live keys (neither revoked nor expired), by id and prefix, never in full",
    responses=problem_responses(401),
)
async def list_keys(caller: CallerDep, session: SessionDep) -> list[ApiKeyOut]:
    rows = await session.execute(
        select(ApiKey).where(ApiKey.account_id == caller.account_id, _LIVE).order_by(ApiKey.created_at, ApiKey.id)
    )
    return [
        ApiKeyOut(
            id=row.id,
            prefix=row.prefix,
            created_at=row.created_at,
            expires_at=row.expires_at,
            last_used_at=row.last_used_at,
        )
        for row in rows.scalars()
    ]


@router.delete(
    "/account/keys/{key_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    summary="Revoke one of the calling account's keys (the calling key too); 409 for its last live key",
    responses=problem_responses(401, 404, 409, 422),
)
async def revoke_key(key_id: uuid.UUID, caller: CallerDep, session: SessionDep) -> Response:
    await session.execute(_ONE_CHANGE_PER_ACCOUNT, {"account": str(caller.account_id)})
    live = set(
        (await session.execute(select(ApiKey.id).where(ApiKey.account_id == caller.account_id, _LIVE))).scalars()
    )
    if key_id not in live:
        raise ProblemError(404, _NOT_FOUND)
    if live == {key_id}:
        raise ProblemError(
            409,
            "This is the account's last key: issue another first (POST /account/keys), or delete the account.",
            title="Cannot revoke the last key",
        )
    # Already revoked if the account's deletion revoked every key meanwhile: revoked either way.
    await session.execute(
        update(ApiKey).where(ApiKey.id == key_id, ApiKey.revoked_at.is_(None)).values(revoked_at=func.now())
    )
    await session.commit()
    return Response(status_code=status.HTTP_204_NO_CONTENT)
