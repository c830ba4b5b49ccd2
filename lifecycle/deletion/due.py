"""When an erasure is due (GDPR Art. 12(3): one month to act on a request), and which open ones are near it or past it.

A deletion's `due_at` is its request plus ERASURE_DUE_WITHIN, written with the request. A legal hold stops the
clock: while one is in force on the account nothing alerts, and its release moves the open deletions' `due_at`
later by the time it held them (push_back_due_dates). A deletion alerts once ERASURE_DUE_ALERT_SHARE of its time
has passed unfinished (`due_at` minus the rest of ERASURE_DUE_WITHIN), and again once past `due_at`.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from lifecycle.settings import Settings
from lifecycle.statuses import OPEN_DELETIONS_SQL, DeletionState


class DueStage(StrEnum):
    # ERASURE_DUE_ALERT_SHARE of the time has passed.
    NEAR = "near"
    OVERDUE = "overdue"


def due_at(requested_at: datetime, settings: Settings) -> datetime:
    return requested_at + settings.erasure_due_within


def near_due_from(due: datetime, settings: Settings) -> datetime:
    """When the alert share of the time is reached: what is left of the time is counted back from `due_at`, so a
    hold's push-back moves it too."""
    return due - settings.erasure_due_within * (1 - settings.erasure_due_alert_share)


# The open deletions whose clock runs (no legal hold in force), with their due dates.
_RUNNING_CLOCKS = text(
    "SELECT r.workflow_id, r.due_at FROM deletion_requests r"
    f" WHERE r.{OPEN_DELETIONS_SQL} AND r.status <> '{DeletionState.HELD}' AND r.due_at IS NOT NULL"
    " AND NOT EXISTS (SELECT FROM legal_holds h WHERE h.account_id = r.account_id AND h.released_at IS NULL)"
)
# On a hold's release: the open deletions of the account are due later by the time the hold stopped their clock.
_PUSH_BACK = text(
    "UPDATE deletion_requests SET due_at = due_at + (now() - greatest(requested_at, CAST(:placed_at AS timestamptz)))"
    f" WHERE account_id = :account AND {OPEN_DELETIONS_SQL} AND due_at IS NOT NULL"
)
# How long legal holds stopped a deletion's clock: each hold's overlap with the time from its request to its end.
HELD_FOR_SQL = (
    "SELECT coalesce(sum(greatest(least(coalesce(h.released_at, now()), coalesce(r.completed_at, now()))"
    " - greatest(h.placed_at, r.requested_at), interval '0')), interval '0')"
    " FROM deletion_requests r JOIN legal_holds h ON h.account_id = r.account_id WHERE r.workflow_id = :workflow_id"
)


@dataclass(frozen=True)
class DueErasure:
    workflow_id: str
    due_at: datetime
    stage: DueStage


def stage_at(due: datetime, settings: Settings, at: datetime) -> DueStage | None:
    if at >= due:
        return DueStage.OVERDUE
    if at >= near_due_from(due, settings):
        return DueStage.NEAR
    return None


def is_overdue(due: datetime, completed_at: datetime | None, status: DeletionState, now: datetime) -> bool:
    """Finished after its due date, or not finished past it; never while a legal hold stops its clock."""
    if completed_at is not None:
        return completed_at > due
    return status != DeletionState.HELD and now > due


async def due_erasures(conn: AsyncConnection, settings: Settings, at: datetime) -> list[DueErasure]:
    """The open deletions, clock running, that are near their due date or past it at `at`."""
    found = []
    for workflow_id, due in await conn.execute(_RUNNING_CLOCKS):
        if (stage := stage_at(due, settings, at)) is not None:
            found.append(DueErasure(workflow_id, due, stage))
    return found


async def push_back_due_dates(session: AsyncSession, account_id: uuid.UUID, placed_at: datetime) -> None:
    """Called in the transaction that releases a hold placed at `placed_at`."""
    await session.execute(_PUSH_BACK, {"account": account_id, "placed_at": placed_at})


async def held_for(conn: AsyncConnection, workflow_id: str) -> timedelta:
    held: timedelta = (await conn.execute(text(HELD_FOR_SQL), {"workflow_id": workflow_id})).scalar_one()
    return held
