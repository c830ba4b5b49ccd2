"""The sites side of an account deletion: stop creations in flight, list sites, await teardowns."""

from __future__ import annotations

import uuid

from sqlalchemy import text
from temporalio import activity
from temporalio.service import RPCError, RPCStatusCode

from activities.heartbeat import heartbeats
from activities.polling import raise_if_running
from activities.resources import ActivityResources
from lifecycle.sites.workflow_types import site_creation_id
from lifecycle.statuses import DOMAIN_HOLDING_SITE_STATUSES, SiteStatus

# Creations still running (an undo is part of the creation's run): cancelled, each rolls itself back.
_IN_FLIGHT = (SiteStatus.PROVISIONING, SiteStatus.ROLLING_BACK)
# Once no creation is in flight, the sites that still hold a database, files or a domain.
# A site deletion takes any of these apart (a creation stopped by a terminate, a failed rollback included).
_TO_TEAR_DOWN = DOMAIN_HOLDING_SITE_STATUSES

_GONE = (RPCStatusCode.NOT_FOUND, RPCStatusCode.FAILED_PRECONDITION)


class AccountSites:
    def __init__(self, resources: ActivityResources) -> None:
        self._resources = resources

    async def _site_ids(self, account_id: str, statuses: tuple[SiteStatus, ...]) -> list[str]:
        async with self._resources.engine.connect() as conn:
            rows = await conn.execute(
                text("SELECT id FROM sites WHERE account_id = :account AND status = ANY(:statuses) ORDER BY id"),
                {"account": uuid.UUID(account_id), "statuses": [status.value for status in statuses]},
            )
            return [str(site_id) for (site_id,) in rows]

    @activity.defn(name="stop_account_site_creations")
    @heartbeats
    async def stop_account_site_creations(self, account_id: str) -> int:
        """Cancel every creation in flight (each rolls itself back) and wait until all have closed.

        Cancelling again on a later attempt is harmless: a run asked to cancel twice cancels once."""
        handles = [
            self._resources.client.get_workflow_handle(site_creation_id(site_id))
            for site_id in await self._site_ids(account_id, _IN_FLIGHT)
        ]
        for handle in handles:
            try:
                await handle.cancel()
            except RPCError as err:
                if err.status not in _GONE:
                    raise
        # Each attempt looks once; a creation still rolling back fails it as StillRunning (activities/polling.py).
        for handle in handles:
            await raise_if_running(self._resources.client, handle.id)
        return len(handles)

    @activity.defn(name="list_account_sites")
    @heartbeats
    async def list_account_sites(self, account_id: str) -> list[str]:
        """Sites that still hold a database, files or a domain once no creation is in flight."""
        return await self._site_ids(account_id, _TO_TEAR_DOWN)

    @activity.defn(name="await_site_deletion")
    @heartbeats
    async def await_site_deletion(self, workflow_id: str) -> None:
        """Wait for a teardown that a DELETE /sites started; a workflow cannot await a non-child. Each attempt
        looks once and fails as StillRunning while it is open (activities/polling.py)."""
        await raise_if_running(self._resources.client, workflow_id)
