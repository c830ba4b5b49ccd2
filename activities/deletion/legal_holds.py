"""Whether a legal hold stops an account's deletions now: asked by a deletion run, never told in its history."""

from __future__ import annotations

from temporalio import activity

from activities.heartbeat import heartbeats
from activities.resources import ActivityResources
from lifecycle.deletion.legal_holds import is_held


class LegalHolds:
    def __init__(self, resources: ActivityResources) -> None:
        self._resources = resources

    @activity.defn(name="legal_hold_in_force")
    @heartbeats
    async def legal_hold_in_force(self, account_id: str) -> bool:
        """True while a hold placed on the account is not released. Only the answer enters the history."""
        async with self._resources.engine.connect() as conn:
            return await is_held(conn, account_id)
