"""The end of an account deletion's grace period, recorded before anything is deleted."""

from __future__ import annotations

from sqlalchemy import text
from temporalio import activity

from activities.heartbeat import heartbeats
from activities.resources import ActivityResources

# Idempotent: a retry keeps the first end. An expedited grace moves deletes_at back to now, so a later run of
# the same deletion (a re-drive after a terminate) sees the grace as over and never waits, or lets an admin
# restore, once deleting may have begun.
_END_GRACE = text(
    "UPDATE deletion_requests SET deletes_at = least(deletes_at, now())"
    " WHERE workflow_id = :workflow_id AND deletes_at IS NOT NULL"
)


class DeletionGrace:
    def __init__(self, resources: ActivityResources) -> None:
        self._resources = resources

    @activity.defn(name="end_account_deletion_grace")
    @heartbeats
    async def end_account_deletion_grace(self, workflow_id: str) -> None:
        async with self._resources.engine.begin() as conn:
            await conn.execute(_END_GRACE, {"workflow_id": workflow_id})
