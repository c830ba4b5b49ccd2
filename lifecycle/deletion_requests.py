"""Accepting deletion requests: record them in the database first, then start the workflow.

The database write comes first so that a crash between the two leaves a marked row, which the reconciler
turns into a workflow; the other order could leave a deletion nobody remembers asking for.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from sqlalchemy import func, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession
from temporalio.client import Client

from lifecycle.db.models import Account, ApiKey, Bot, DeletionRequest
from lifecycle.deletion_starts import start_account_deletion, start_bot_deletion
from lifecycle.workflow_ids import account_deletion_id, bot_deletion_id


@dataclass(frozen=True)
class Accepted:
    workflow_id: str
    finished: bool


async def request_bot_deletion(
    session: AsyncSession, client: Client, task_queue: str, *, account_id: uuid.UUID, bot_id: uuid.UUID
) -> Accepted | None:
    """Mark, record and start the bot's deletion; None if the account has no such bot (nor had)."""
    workflow_id = bot_deletion_id(bot_id)
    marked = await session.execute(
        update(Bot)
        .where(Bot.id == bot_id, Bot.account_id == account_id)
        .values(deletion_requested_at=func.coalesce(Bot.deletion_requested_at, func.now()))
        .returning(Bot.id)
    )
    if marked.first() is None:
        # The bot row goes when its deletion completes; the request record says whether it was ours.
        record = await session.get(DeletionRequest, workflow_id)
        if record is None or record.account_id != account_id:
            return None
        return Accepted(workflow_id, finished=record.completed_at is not None)
    await session.execute(
        insert(DeletionRequest)
        .values(workflow_id=workflow_id, kind="bot", account_id=account_id, bot_id=bot_id)
        .on_conflict_do_nothing(index_elements=[DeletionRequest.workflow_id])
    )
    await session.commit()
    going = await start_bot_deletion(client, task_queue, bot_id=str(bot_id), account_id=str(account_id))
    return Accepted(workflow_id, finished=not going)


async def request_account_deletion(
    session: AsyncSession, client: Client, task_queue: str, *, account_id: uuid.UUID
) -> Accepted:
    """Sign the account out (revoke every key), mark and record it, then start its deletion."""
    workflow_id = account_deletion_id(account_id)
    email = (await session.execute(select(Account.email).where(Account.id == account_id))).scalar_one()
    await session.execute(
        update(ApiKey).where(ApiKey.account_id == account_id, ApiKey.revoked_at.is_(None)).values(revoked_at=func.now())
    )
    await session.execute(
        update(Account)
        .where(Account.id == account_id)
        .values(deletion_requested_at=func.coalesce(Account.deletion_requested_at, func.now()))
    )
    await session.execute(
        insert(DeletionRequest)
        .values(workflow_id=workflow_id, kind="account", account_id=account_id, notify_email=email)
        .on_conflict_do_nothing(index_elements=[DeletionRequest.workflow_id])
    )
    await session.commit()
    going = await start_account_deletion(client, task_queue, account_id=str(account_id))
    return Accepted(workflow_id, finished=not going)
