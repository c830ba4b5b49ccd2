"""Which server holds a site's database: recorded on the site, read by every later step.

`place` is idempotent: a site that already has a server keeps it, whatever the catalog says now, so a retry, a
reset or a new run never moves a site. The choice (lifecycle/sites/servers.py) and its record happen under one
transaction-scoped advisory lock, so concurrent placements count each other and never pass a server's capacity.

Only `move` changes a placement: when the site's server does not answer the database step, and only while that
step has not touched the server (`sites.database_touched`, recorded by `touch` once the server answered and before
anything could be created there), so the site has nothing on it. The touch and the move are each one conditional
UPDATE of the site's row, so whichever comes second sees the first: a site is either moved with nothing on its old
server, or kept there, never both.
"""

from __future__ import annotations

import uuid

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from temporalio.exceptions import ApplicationError

from activities.sites.database import AdminConnections, SiteDatabaseServer
from lifecycle.outbound import OutboundRule
from lifecycle.sealing import KeyRing
from lifecycle.sites.errors import NO_DATABASE_SERVER_ERROR
from lifecycle.sites.servers import CHOOSE_SERVER
from lifecycle.statuses import SiteStatus

_LOCK = text("SELECT pg_advisory_xact_lock(hashtext('site_placement'))")
_PLACED = text("SELECT database_server FROM sites WHERE id = :id")
_RECORD = text("UPDATE sites SET database_server = :server WHERE id = :id AND database_server IS NULL")
_SERVER_OF_SITE = text(
    "SELECT s.name, s.admin_url FROM sites t JOIN site_db_servers s ON s.name = t.database_server WHERE t.id = :id"
)
_TOUCH = text("UPDATE sites SET database_touched = true WHERE id = :id AND database_server = :server")
_PLACEMENT = text("SELECT database_server, database_touched, status FROM sites WHERE id = :id")
_MOVE = text(
    "UPDATE sites SET database_server = :to, updated_at = now() WHERE id = :id AND database_server = :from"
    " AND NOT database_touched AND status = :provisioning"
)


class NoDatabaseServerError(ApplicationError):
    """No active server has room: the creation fails for good with its own code (lifecycle/sites/errors.py)."""

    def __init__(self, site_id: str) -> None:
        super().__init__(
            f"site {site_id}: no active site-database server has free capacity",
            type=NO_DATABASE_SERVER_ERROR,
            non_retryable=True,
        )


class SitePlacement:
    def __init__(
        self,
        engine: AsyncEngine,
        default_admin_url: str,
        keys: KeyRing,
        admin_connections: AdminConnections | None = None,
        outbound: OutboundRule | None = None,
    ) -> None:
        self._engine = engine
        # Open the registered servers' URLs, stored sealed (lifecycle/sealing.py).
        self._keys = keys
        self._admin_connections = admin_connections
        # A read of the record is one statement: autocommit spares it a BEGIN and a ROLLBACK.
        self._reads = engine.execution_options(isolation_level="AUTOCOMMIT")
        # The `default` server's URL when the catalog stores none: SITE_DATABASE_URL, else the product's own.
        self._default_admin_url = default_admin_url
        self._outbound = outbound

    async def place(self, site_id: str) -> str:
        """The site's server: the one recorded, else the one chosen now and recorded."""
        async with self._engine.begin() as connection:
            placed = (await connection.execute(_PLACED, {"id": uuid.UUID(site_id)})).scalar_one_or_none()
            if placed is not None:
                return str(placed)
            await connection.execute(_LOCK)
            # Read again under the lock: a step running beside this one (files and database run in parallel) may
            # have placed the site while this one waited.
            placed = (await connection.execute(_PLACED, {"id": uuid.UUID(site_id)})).scalar_one_or_none()
            if placed is not None:
                return str(placed)
            chosen = (await connection.execute(CHOOSE_SERVER, {"excluded": None})).scalar_one_or_none()
            if chosen is None:
                raise NoDatabaseServerError(site_id)
            await connection.execute(_RECORD, {"id": uuid.UUID(site_id), "server": chosen})
            return str(chosen)

    async def placed_server(self, site_id: str) -> SiteDatabaseServer | None:
        """The server the site was placed on, or None if it never was (then it holds no database anywhere)."""
        async with self._reads.connect() as connection:
            row = (await connection.execute(_SERVER_OF_SITE, {"id": uuid.UUID(site_id)})).one_or_none()
        if row is None:
            return None
        if row.admin_url is None:
            return SiteDatabaseServer(self._default_admin_url, self._admin_connections, name=row.name)
        return SiteDatabaseServer(self._keys.open(row.admin_url), self._admin_connections, self._outbound, row.name)

    async def touch(self, site_id: str, server: str) -> None:
        """Record that the database step reached `server`: the site's database may live there from now on. A site
        moved meanwhile raises SiteChanged, so that the step creates nothing on the server it left."""
        async with self._reads.connect() as connection:
            touched = (await connection.execute(_TOUCH, {"id": uuid.UUID(site_id), "server": server})).rowcount
        if not touched:
            raise ApplicationError(f"site {site_id} is no longer placed on {server}", type="SiteChanged")

    async def move(self, site_id: str, server: str) -> bool:
        """Place the site again, on another active server with room, if `server` holds nothing of it; True when
        the site is (now, or already) placed elsewhere than `server`, False when it stays and waits for it."""
        async with self._engine.begin() as connection:
            await connection.execute(_LOCK)
            row = (await connection.execute(_PLACEMENT, {"id": uuid.UUID(site_id)})).one_or_none()
            if row is None or row.database_server is None:
                return False
            if row.database_server != server:
                return True  # moved already: a retry, or a reset run, of this move
            if row.database_touched or row.status != SiteStatus.PROVISIONING:
                return False
            chosen = (await connection.execute(CHOOSE_SERVER, {"excluded": server})).scalar_one_or_none()
            if chosen is None:
                return False
            params = {"id": uuid.UUID(site_id), "from": server, "to": chosen, "provisioning": SiteStatus.PROVISIONING}
            # Conditional still: a database step that touched the server since the read above keeps the site there.
            return bool((await connection.execute(_MOVE, params)).rowcount)

    async def server(self, site_id: str) -> SiteDatabaseServer:
        """For a forward step: the site's server, placing the site first if no step has yet."""
        server = await self.placed_server(site_id)
        if server is None:
            # Only a run from before the catalog skipped the placement in save_site_metadata.
            await self.place(site_id)
            server = await self.placed_server(site_id)
        if server is None:
            # Placed just above, so the row went in between (with its account): a retry finds it deleted.
            raise ApplicationError(f"site {site_id} vanished while being placed", type="SiteChanged")
        return server
