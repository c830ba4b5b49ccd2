"""An account's deletion lanes: at most ACCOUNT_DELETIONS_AT_ONCE of its DELETE /bots deletions run at once, the
others wait their turn in the order they were requested (deletion_requests.account_lane).

A lane is `taken` by an open deletion and freed when its status is recorded closed, so nothing needs releasing
by hand: a run that is cancelled, fails or is terminated frees its lane with the status that records it. Each
call fills the free lanes, oldest request first, under a transaction-scoped lock on the account, and answers
which deletions it let in, so the caller's run can tell them.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from temporalio import activity

from activities.resources import ActivityResources
from lifecycle.deletion.contracts import AccountLaneAnswer, AccountLaneRequest
from lifecycle.statuses import OPEN_DELETIONS_SQL

_LOCK_ACCOUNT = text("SELECT pg_advisory_xact_lock(hashtextextended('account-lanes:' || :account, 0))")
_JOIN = text(
    "UPDATE deletion_requests SET account_lane = 'waiting' WHERE workflow_id = :workflow_id AND account_lane IS NULL"
    " RETURNING workflow_id"
)
_FILL = text(
    f"""
    WITH free AS (
        SELECT greatest(:at_once - count(*), 0) AS lanes FROM deletion_requests
        WHERE account_id = CAST(:account AS uuid) AND account_lane = 'taken' AND {OPEN_DELETIONS_SQL}
    ), next AS (
        SELECT workflow_id FROM deletion_requests
        WHERE account_id = CAST(:account AS uuid) AND account_lane = 'waiting' AND {OPEN_DELETIONS_SQL}
        ORDER BY requested_at, workflow_id LIMIT (SELECT lanes FROM free)
    )
    UPDATE deletion_requests SET account_lane = 'taken' WHERE workflow_id IN (SELECT workflow_id FROM next)
    RETURNING workflow_id
    """
)
_RECORDED = text("SELECT true FROM deletion_requests WHERE workflow_id = :workflow_id FOR UPDATE")
_LANE = text("SELECT account_lane FROM deletion_requests WHERE workflow_id = :workflow_id")


_ACCOUNT_OF_LANE = text(
    "SELECT CAST(account_id AS text) FROM deletion_requests WHERE workflow_id = :workflow_id"
    " AND account_lane IS NOT NULL"
)


async def _fill(conn: AsyncConnection, account_id: str, at_once: int) -> list[str]:
    await conn.execute(_LOCK_ACCOUNT, {"account": account_id})
    rows = await conn.execute(_FILL, {"account": account_id, "at_once": at_once})
    return sorted(workflow_id for (workflow_id,) in rows)


async def open_lanes_after(engine: AsyncEngine, workflow_id: str, at_once: int) -> list[str]:
    """Once a deletion's closed status is recorded without its run (the reconciler's `terminated`): the deletions
    of its account let into the lane it freed; none if it took no lane."""
    async with engine.begin() as conn:
        account_id = await conn.scalar(_ACCOUNT_OF_LANE, {"workflow_id": workflow_id})
        return [] if account_id is None else await _fill(conn, account_id, at_once)


class AccountLanes:
    def __init__(self, resources: ActivityResources) -> None:
        self._resources = resources
        self._at_once = resources.settings.account_deletions_at_once

    @activity.defn(name="take_account_lane")
    async def take_account_lane(self, request: AccountLaneRequest) -> AccountLaneAnswer:
        """Fill the account's free lanes, the deletion joining its queue first if its request did not (a run an
        operator started). Idempotent: a lane once taken stays the deletion's while it is open. A deletion with no
        request record takes no lane."""
        async with self._resources.engine.begin() as conn:
            await conn.execute(_LOCK_ACCOUNT, {"account": request.account_id})
            # Locked first: a record the API commits meanwhile is seen by every statement below, or by none (each
            # statement reads afresh), so the answer never reads `waiting` from a record the fill did not see.
            if not await conn.scalar(_RECORDED, {"workflow_id": request.workflow_id}):
                return AccountLaneAnswer(taken=True)  # no request record to queue on
            await conn.execute(_JOIN, {"workflow_id": request.workflow_id})
            opened = await _fill(conn, request.account_id, self._at_once)
            lane = await conn.scalar(_LANE, {"workflow_id": request.workflow_id})
        others = [workflow_id for workflow_id in opened if workflow_id != request.workflow_id]
        return AccountLaneAnswer(taken=lane == "taken", opened_for=others)

    @activity.defn(name="open_account_lanes")
    async def open_account_lanes(self, account_id: str) -> list[str]:
        """Fill the account's free lanes (a run calls it once its own closed status is recorded); the deletions
        let in."""
        async with self._resources.engine.begin() as conn:
            return await _fill(conn, account_id, self._at_once)
