"""How many things of a kind one account may hold (MAX_SITES_PER_ACCOUNT, MAX_BOTS_PER_ACCOUNT,
MAX_KEYS_PER_ACCOUNT): counted under a lock the account's creations take turns on, so two concurrent requests
never both take the last free place."""

from __future__ import annotations

import uuid

from sqlalchemy import Select, select
from sqlalchemy.ext.asyncio import AsyncSession

from api.problems import ProblemError
from lifecycle.db.models import Account


async def take_account_turn(session: AsyncSession, account_id: uuid.UUID) -> None:
    """Every creation of one account queues here until the one before it commits, so a count after it cannot be
    stale. NO KEY UPDATE leaves alone the key-share locks that inserts (foreign keys) and deletion starts take on
    the account."""
    await session.execute(select(Account.id).where(Account.id == account_id).with_for_update(key_share=True))


# A tenant's limits (bots, keys) answer 429 with Retry-After, as its rate does. Waiting alone frees no place (the
# account deletes a bot or revokes a key, or a key expires), so the hint is when asking again is reasonable.
LIMIT_RETRY_AFTER_SECONDS = 60


async def refuse_at_limit(
    session: AsyncSession,
    held: Select[int],
    limit: int,
    *,
    noun: str,
    remedy: str,
    title: str,
    status: int = 429,
) -> None:
    """`status` (429 with Retry-After, or the sites' 409) once the account holds `limit` of what `held` counts; the
    caller holds the account's turn."""
    count = (await session.execute(held)).scalar_one()
    if count >= limit:
        await session.rollback()  # ends the account's turn at once
        headers = {"Retry-After": str(LIMIT_RETRY_AFTER_SECONDS)} if status == 429 else None
        detail = f"This account holds {count} {noun}, the most it may have. {remedy}"
        raise ProblemError(status, detail, title=title, headers=headers)
