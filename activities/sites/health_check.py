"""The health check of the site-database servers: every server of the catalog is connected to, with a short
timeout, and its state follows what the last checks agree on.

- An `active` server that failed DOWN_AFTER_FAILED_CHECKS checks in a row becomes `down`, set by the health
  check, whoever had made it active: no new site is placed on it, and the steps of its own sites wait for it.
- A server the health check marked `down` becomes `active` again after ACTIVE_AFTER_PASSED_CHECKS checks in a
  row passed, and the creations of its provisioning sites are signalled, so a step waiting for it tries at once.
- A state an operator set (`draining`, or `down`) is never changed: the check only counts.

Flapping: a state changes only after two checks in a row agree, so one lost connection moves nothing, and a
server that fails every other check keeps the state it had rather than flipping with each check.

Each record is made under a lock on the server's row, from the row as it stands then, so an operator's PATCH
landing between the connection attempt and the record is never overwritten.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Final

from sqlalchemy import text
from temporalio import activity
from temporalio.service import RPCError, RPCStatusCode

from activities.heartbeat import heartbeating
from activities.resources import ActivityResources
from activities.sites.database import SiteDatabaseServer
from lifecycle.sites.contracts import SERVER_BACK_SIGNAL, SiteServersChecked
from lifecycle.sites.workflow_types import site_creation_id
from lifecycle.statuses import SiteDbServerState, SiteDbServerStateSetBy, SiteStatus

# A live server answers a connection and a SELECT 1 in milliseconds, even under load.
CHECK_TIMEOUT_SECONDS: Final = 3.0
DOWN_AFTER_FAILED_CHECKS: Final = 2
ACTIVE_AFTER_PASSED_CHECKS: Final = 2

_SERVERS = text("SELECT name, admin_url FROM site_db_servers ORDER BY name")
_PROVISIONING_ON = text(
    f"SELECT id FROM sites WHERE database_server = :name AND status = '{SiteStatus.PROVISIONING.value}'"
)
# Locked, so an operator's PATCH waits for this record, or this record reads the PATCH's state.
_LOCKED = text(
    "SELECT state, state_set_by, failed_checks, passed_checks FROM site_db_servers WHERE name = :name FOR UPDATE"
)
_RECORD = text(
    "UPDATE site_db_servers SET state = :state, state_set_by = :set_by, failed_checks = :failed,"
    " passed_checks = :passed, updated_at = CASE WHEN :changed THEN now() ELSE updated_at END"
    " WHERE name = :name"
)


@dataclass(frozen=True)
class ServerHealth:
    """A server's row as the health check reads and writes it."""

    state: SiteDbServerState
    set_by: SiteDbServerStateSetBy
    failed: int
    passed: int

    def after_check(self, answered: bool) -> ServerHealth:
        """The row after one more check: the counts move, and the state only where the module's rules say."""
        failed, passed = (0, self.passed + 1) if answered else (self.failed + 1, 0)
        state, set_by = self.state, self.set_by
        if not answered and state == SiteDbServerState.ACTIVE and failed >= DOWN_AFTER_FAILED_CHECKS:
            state, set_by = SiteDbServerState.DOWN, SiteDbServerStateSetBy.HEALTH_CHECK
        elif (
            answered
            and (state, set_by) == (SiteDbServerState.DOWN, SiteDbServerStateSetBy.HEALTH_CHECK)
            and passed >= ACTIVE_AFTER_PASSED_CHECKS
        ):
            state = SiteDbServerState.ACTIVE
        return ServerHealth(state, set_by, failed, passed)


class SiteServerHealth:
    def __init__(self, resources: ActivityResources) -> None:
        self._resources = resources
        # The `default` server's URL when the catalog stores none, as placement has it.
        self._default_admin_url = resources.settings.site_admin_database_url

    @activity.defn(name="check_site_db_servers")
    async def check_site_db_servers(self) -> SiteServersChecked:
        async with heartbeating():
            async with self._resources.engine.connect() as connection:
                servers = (await connection.execute(_SERVERS)).all()
            answers = await asyncio.gather(
                *(self._answers(server.name, self._server(server.admin_url)) for server in servers)
            )
            result = SiteServersChecked(checked=len(servers))
            for server, answered in zip(servers, answers, strict=True):
                if not answered:
                    result.unreachable.append(server.name)
                changed = await self._record(server.name, answered)
                if changed == SiteDbServerState.DOWN:
                    result.marked_down.append(server.name)
                elif changed == SiteDbServerState.ACTIVE:
                    result.marked_active.append(server.name)
                    await self._wake_creations(server.name)
            return result

    async def _record(self, name: str, answered: bool) -> SiteDbServerState | None:
        """Count the check on the server's row; the state it moved to, or None if it stayed."""
        async with self._resources.engine.begin() as connection:
            row = (await connection.execute(_LOCKED, {"name": name})).one_or_none()
            if row is None:
                return None  # removed from the catalog meanwhile
            before = ServerHealth(
                SiteDbServerState(row.state),
                SiteDbServerStateSetBy(row.state_set_by),
                row.failed_checks,
                row.passed_checks,
            )
            after = before.after_check(answered)
            await connection.execute(
                _RECORD,
                {
                    "name": name,
                    "state": after.state,
                    "set_by": after.set_by,
                    "failed": after.failed,
                    "passed": after.passed,
                    "changed": after.state != before.state,
                },
            )
        if after.state == before.state:
            return None
        activity.logger.warning("site-database server %s: %s -> %s (health check)", name, before.state, after.state)
        return after.state

    async def _wake_creations(self, name: str) -> None:
        """Tell the creations of the server's sites it is back, so a step waiting for it tries now; a creation
        already closed, or one that waits for nothing, loses nothing by it."""
        async with self._resources.engine.connect() as connection:
            sites = (await connection.execute(_PROVISIONING_ON, {"name": name})).scalars().all()

        async def wake(site_id: object) -> None:
            handle = self._resources.client.get_workflow_handle(site_creation_id(str(site_id)))
            try:
                await handle.signal(SERVER_BACK_SIGNAL)
            except RPCError as err:
                # Closed (NOT_FOUND), or Temporal not answering: a waiting step still tries at the end of its wait.
                if err.status != RPCStatusCode.NOT_FOUND:
                    activity.logger.warning("site %s: creation not told its server is back: %s", site_id, err)

        await asyncio.gather(*(wake(site_id) for site_id in sites))

    def _server(self, admin_url: str | None) -> SiteDatabaseServer:
        """A registered URL's host is held to the outbound rule: one it refuses is a server that does not answer."""
        if admin_url is None:
            return SiteDatabaseServer(self._default_admin_url)
        return SiteDatabaseServer(self._resources.keys.open(admin_url), outbound=self._resources.settings.outbound)

    async def _answers(self, name: str, server: SiteDatabaseServer) -> bool:
        try:
            async with asyncio.timeout(CHECK_TIMEOUT_SECONDS), server.connect() as admin:
                await admin.fetchval("SELECT 1")
        except Exception as err:
            # Any failure: a server this worker cannot open cannot take a site either.
            activity.logger.info("site-database server %s did not answer: %s", name, type(err).__name__)
            return False
        return True
