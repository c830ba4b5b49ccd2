"""Placing and releasing legal holds: record the change in PostgreSQL, then tell the account's deletion runs.

The record comes first and the runs ask PostgreSQL themselves (workflows/deletion/legal_hold.py), so the signal
carries nothing and a lost one is harmless: a run that missed it asks again on its own timer. Both changes are
idempotent, and each one signals again, so a request whose signals failed (Temporal unreachable: 503) is simply
repeated.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from sqlalchemy import Boolean, func, literal_column, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from api.holds.schemas import LegalHoldOut
from lifecycle.db.models import Account, DeletionRequest, LegalHold
from lifecycle.deletion.due import push_back_due_dates
from lifecycle.deletion.legal_holds import IN_FORCE, LEGAL_HOLD_CHANGED
from lifecycle.deletion.workflow_types import account_deletion_id
from lifecycle.statuses import OPEN_DELETION_STATES

# Signals sent at once: an account may have thousands of bot deletions open.
SIGNALS_AT_ONCE = 20
_HOLD_COLUMNS = (LegalHold.account_id, LegalHold.reason, LegalHold.placed_at, LegalHold.released_at)


def _out(row: Any) -> LegalHoldOut:
    return LegalHoldOut(
        account_id=row.account_id,
        held=row.released_at is None,
        reason=row.reason,
        placed_at=row.placed_at,
        released_at=row.released_at,
    )


async def account_exists(session: AsyncSession, account_id: uuid.UUID) -> bool:
    return await session.scalar(select(Account.id).where(Account.id == account_id)) is not None


async def hold_in_force(session: AsyncSession, account_id: uuid.UUID) -> LegalHoldOut | None:
    row = (await session.execute(select(*_HOLD_COLUMNS).where(LegalHold.account_id == account_id, IN_FORCE))).first()
    return None if row is None else _out(row)


async def place_hold(session: AsyncSession, account_id: uuid.UUID, reason: str) -> tuple[LegalHoldOut, bool]:
    """The hold in force on the account, and whether this request placed it (False: one was already in force, and
    its reason is now `reason`). One statement: two admins placing a hold at once make one."""
    upsert = (
        insert(LegalHold)
        .values(id=uuid.uuid4(), account_id=account_id, reason=reason)
        .on_conflict_do_update(index_elements=[LegalHold.account_id], index_where=IN_FORCE, set_={"reason": reason})
        # xmax is 0 on a row this statement inserted, and the updating transaction's id on one it updated.
        .returning(*_HOLD_COLUMNS, literal_column("xmax = 0", Boolean).label("inserted"))
    )
    row = (await session.execute(upsert)).one()
    await session.commit()
    return _out(row), bool(row.inserted)


async def release_hold(session: AsyncSession, account_id: uuid.UUID) -> LegalHoldOut | None:
    """The hold this request released; None if none was in force."""
    released = (
        await session.execute(
            update(LegalHold)
            .where(LegalHold.account_id == account_id, IN_FORCE)
            .values(released_at=func.now())
            .returning(*_HOLD_COLUMNS)
        )
    ).first()
    if released is None:
        # Nothing was released, so no act to record: the audit row goes with the empty transaction.
        await session.rollback()
        return None
    # The hold stopped the account's erasure clocks: their due dates move later by the time it held them.
    await push_back_due_dates(session, account_id, released.placed_at)
    await session.commit()
    return _out(released)


async def tell_deletions(session: AsyncSession, client: Client, account_id: uuid.UUID) -> None:
    """Signal the account's deletion and its open bot deletions that a hold changed; a run that is not open
    (none yet, or closed) needs no signal: every run asks at its start."""
    bot_runs = await session.scalars(
        select(DeletionRequest.workflow_id).where(
            DeletionRequest.account_id == account_id,
            DeletionRequest.kind == "bot",
            DeletionRequest.status.in_([state.value for state in OPEN_DELETION_STATES]),
        )
    )
    workflow_ids = [account_deletion_id(account_id), *bot_runs]
    # Nothing of the database is held while Temporal answers.
    await session.close()
    for start in range(0, len(workflow_ids), SIGNALS_AT_ONCE):
        await asyncio.gather(
            *(_signal(client, workflow_id) for workflow_id in workflow_ids[start : start + SIGNALS_AT_ONCE])
        )


async def _signal(client: Client, workflow_id: str) -> None:
    try:
        await client.get_workflow_handle(workflow_id).signal(LEGAL_HOLD_CHANGED)
    except RPCError as err:
        if err.status != RPCStatusCode.NOT_FOUND:
            raise
