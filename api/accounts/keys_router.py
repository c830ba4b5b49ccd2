"""The calling account's API keys: issue another, list them, revoke one. Rotating a key is issuing a new one,
moving the clients to it, then revoking the old one; the last key cannot be revoked (DELETE /account is how an
account signs out for good). A revoked key is refused at once, and the streams it opened (or minted a token
for) end within STREAM_CREDENTIALS_RECHECK seconds (api/streams/credentials.py)."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, Response, status
from sqlalchemy import func, select, text, update

from api.accounts.keys_schemas import ApiKeyCreated, ApiKeyOut
from api.dependencies import CallerDep, SessionDep
from api.problems import ProblemError, problem_responses
from api.security import generate_api_key, hash_api_key, shown_prefix
from lifecycle.db.models import ApiKey

router = APIRouter(tags=["accounts"])

_NOT_FOUND = "No such key in this account (or it is revoked already)."

# Revocations of one account's keys take turns, so two at once cannot each see the other's key as the one left
# and leave none. An advisory lock rather than the account's row: DELETE /account revokes the keys before it
# updates that row, so a revocation holding the row while it waits on a key would deadlock with it.
_ONE_REVOCATION_PER_ACCOUNT = text("SELECT pg_advisory_xact_lock(hashtext('api_keys'), hashtext(:account))")


@router.post(
    "/account/keys",
    status_code=status.HTTP_201_CREATED,
    response_model=ApiKeyCreated,
    summary="Issue another API key for the calling account; the key is shown this once",
    responses=problem_responses(401),
)
async def create_key(caller: CallerDep, session: SessionDep, response: Response) -> ApiKeyCreated:
    key = generate_api_key()
    row = ApiKey(account_id=caller.account_id, key_hash=hash_api_key(key), prefix=shown_prefix(key))
    session.add(row)
    await session.commit()
    response.headers["Cache-Control"] = "no-store"
    return ApiKeyCreated(id=row.id, api_key=key)


@router.get(
    "/account/keys",
    response_model=list[ApiKeyOut],
    summary="The calling account's keys that are not revoked, by id and prefix, never in full",
    responses=problem_responses(401),
)
async def list_keys(caller: CallerDep, session: SessionDep) -> list[ApiKeyOut]:
    rows = await session.execute(
        select(ApiKey.id, ApiKey.prefix, ApiKey.created_at)
        .where(ApiKey.account_id == caller.account_id, ApiKey.revoked_at.is_(None))
        .order_by(ApiKey.created_at, ApiKey.id)
    )
    return [ApiKeyOut(id=row.id, prefix=row.prefix, created_at=row.created_at) for row in rows]


@router.delete(
    "/account/keys/{key_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    summary="Revoke one of the calling account's keys (the calling key too); 409 for its last key",
    responses=problem_responses(401, 404, 409, 422),
)
async def revoke_key(key_id: uuid.UUID, caller: CallerDep, session: SessionDep) -> Response:
    await session.execute(_ONE_REVOCATION_PER_ACCOUNT, {"account": str(caller.account_id)})
    live = set(
        (
            await session.execute(
                select(ApiKey.id).where(ApiKey.account_id == caller.account_id, ApiKey.revoked_at.is_(None))
            )
        ).scalars()
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
