"""Accounts: created by an admin, read by their own key."""

from __future__ import annotations

from fastapi import APIRouter, status
from sqlalchemy import select

from api.accounts.schemas import AccountCreate, AccountCreated, AccountOut
from api.dependencies import AdminDep, CallerDep, SessionDep
from api.problems import problem_responses
from api.security import generate_api_key, hash_api_key, shown_prefix
from lifecycle.db.models import Account, ApiKey

router = APIRouter(tags=["accounts"])


@router.post(
    "/accounts",
    status_code=status.HTTP_201_CREATED,
    response_model=AccountCreated,
    summary="Create an account and its first API key (admin only)",
    responses=problem_responses(401, 403, 422),
)
async def create_account(body: AccountCreate, _admin: AdminDep, session: SessionDep) -> AccountCreated:
    account = Account(name=body.name, email=str(body.email))
    session.add(account)
    await session.flush()
    key = generate_api_key()
    session.add(ApiKey(account_id=account.id, key_hash=hash_api_key(key), prefix=shown_prefix(key)))
    await session.commit()
    return AccountCreated(id=account.id, name=account.name, email=account.email, api_key=key)


@router.get(
    "/account",
    response_model=AccountOut,
    summary="The calling account",
    responses=problem_responses(401),
)
async def get_account(caller: CallerDep, session: SessionDep) -> AccountOut:
    account = (await session.execute(select(Account).where(Account.id == caller.account_id))).scalar_one()
    return AccountOut(id=account.id, name=account.name, email=account.email)
