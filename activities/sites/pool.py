"""The warm pool's records in the product database (`site_db_pool`), the claim a site's database step makes, and
the pass the pool workflow runs over one server (lifecycle/sites/pool.py says what the pool is).

A claim is one UPDATE that takes the oldest ready database of the site's server (FOR UPDATE SKIP LOCKED, so
concurrent claims take different ones) and names the site on it; the unique `site_id` means a site holds at most
one, and every later attempt, reset or new run of the creation finds that one again. A claimed row never becomes
ready again. The server's work follows the record (activities/sites/pool_server.py), so a kill between the two
leaves a claimed row whose retry finishes the renames, and the undo drops the database under either name.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import TextClause, text
from sqlalchemy.ext.asyncio import AsyncEngine
from temporalio import activity

from activities.heartbeat import heartbeating
from activities.resources import ActivityResources
from activities.sites import pool_server
from activities.sites.database import SiteDatabaseServer
from lifecycle.sites.contracts import SiteDbPoolInput, SiteDbPoolPass
from lifecycle.sites.pool import HALF_MADE_AFTER, POKE_EVERY, REFILL_BATCH, poke_pool, pool_database_name
from lifecycle.statuses import SiteDbServerState, SitePoolState

_CLAIMED_BY = text("SELECT id, server, false AS new FROM site_db_pool WHERE site_id = :site")
# The site's claim in one statement: the pool database it holds, else the oldest ready one of the server the site
# was placed on (placement recorded it before any database step runs), taken under FOR UPDATE SKIP LOCKED so that
# concurrent claims take different ones. `new` says which; `remaining` and `target` come with a new one: what is left
# ready, and the target (a claim pokes the pool only once it is down to half, see PoolClaim.low).
_CLAIM = text(
    "WITH held AS (SELECT id, server FROM site_db_pool WHERE site_id = :site),"
    " taken AS (UPDATE site_db_pool SET state = :claimed, site_id = :site, claimed_at = now()"
    " WHERE NOT EXISTS (SELECT 1 FROM held) AND id = ("
    " SELECT id FROM site_db_pool WHERE state = :ready"
    " AND server = (SELECT database_server FROM sites WHERE id = :site) ORDER BY created_at LIMIT 1"
    " FOR UPDATE SKIP LOCKED) RETURNING id, server,"
    " (SELECT count(*) FROM site_db_pool r WHERE r.server = site_db_pool.server AND r.state = :ready) - 1 AS remaining,"
    " (SELECT pool_target FROM site_db_servers s WHERE s.name = site_db_pool.server) AS target)"
    " SELECT id, server, false AS new, 0 AS remaining, 0 AS target FROM held"
    " UNION ALL SELECT id, server, true, remaining, target FROM taken"
)
_SERVER = text("SELECT admin_url, state, pool_target FROM site_db_servers WHERE name = :server")
_COUNT_READY = text("SELECT count(*) FROM site_db_pool WHERE server = :server AND state = :ready")
_RECORD_CREATING = text("INSERT INTO site_db_pool (id, server, state) VALUES (:id, :server, :creating)")
_MARK_READY = text("UPDATE site_db_pool SET state = :ready WHERE id = ANY(:ids) AND state = :creating")
# Out of the pool before it is dropped: a claim can no longer take it, and a pass killed between the two leaves a
# database with no row, which the reconciler drops.
_TAKE_READY = text(
    "DELETE FROM site_db_pool WHERE id IN (SELECT id FROM site_db_pool WHERE server = :server AND state = :ready"
    " ORDER BY created_at DESC LIMIT :count FOR UPDATE SKIP LOCKED) RETURNING id"
)
_UNCLAIMED = text(
    "SELECT id, state, created_at < now() - make_interval(secs => :half_made) AS stale FROM site_db_pool"
    " WHERE server = :server AND state <> :claimed"
)
_ALL_IDS = text("SELECT id FROM site_db_pool WHERE server = :server")
_FORGET = text("DELETE FROM site_db_pool WHERE id = :id AND state = :state RETURNING id")

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PoolClaim:
    pool_name: str
    server: str
    new: bool  # this attempt took it (so the pool is one short)
    # The pool is down to half its target or less: worth a poke. Above that the workflow's own look every
    # REFILL_EVERY refills it: a poke per claim would put a signal's workflow task on every site creation's path.
    low: bool = False


class SiteDbPool:
    """The pool's records, for the database step, its undo and the pool workflow's pass."""

    def __init__(self, engine: AsyncEngine) -> None:
        # Every statement here is one statement, a transaction of its own: autocommit spares a BEGIN and a COMMIT.
        self._engine = engine.execution_options(isolation_level="AUTOCOMMIT")

    async def claimed_by(self, site_id: str) -> str | None:
        """The pool database the site claimed, by its pool name (which it keeps on the server until renamed)."""
        async with self._engine.connect() as connection:
            found = (await connection.execute(_CLAIMED_BY, {"site": uuid.UUID(site_id)})).one_or_none()
        return pool_database_name(found.id) if found is not None else None

    async def claim(self, site_id: str, *, take_new: bool) -> PoolClaim | None:
        """The site's claim: the one it made before, else (if `take_new`) a ready database of its server, else
        None (none made and none ready: the slow way)."""
        site = uuid.UUID(site_id)
        async with self._engine.connect() as connection:
            if take_new:
                params = {"site": site, "claimed": SitePoolState.CLAIMED, "ready": SitePoolState.READY}
                found = (await connection.execute(_CLAIM, params)).one_or_none()
            else:
                found = (await connection.execute(_CLAIMED_BY, {"site": site})).one_or_none()
        if found is None:
            return None
        if not found.new:
            return PoolClaim(pool_database_name(found.id), found.server, new=False)
        return PoolClaim(pool_database_name(found.id), found.server, new=True, low=found.remaining * 2 <= found.target)


class SitePoolActivities:
    def __init__(self, resources: ActivityResources) -> None:
        self._resources = resources
        self._engine = resources.engine

    async def _execute(self, statement: TextClause, **params: Any) -> list[Any]:
        """One statement in its own transaction; the first column of the rows it returns, if any."""
        async with self._engine.begin() as connection:
            result = await connection.execute(statement, params)
            return list(result.scalars()) if result.returns_rows else []

    @activity.defn(name="refill_site_db_pool")
    async def refill_site_db_pool(self, pool: SiteDbPoolInput) -> SiteDbPoolPass:
        """One pass over a server's pool: remove half-made databases, then, by the server's state, make up to
        REFILL_BATCH more towards its target (active), drop the unclaimed ones (draining) or the surplus over a
        lowered target, or leave it be (down: unreachable). Only the pool's own workflow runs it, one at a time."""
        async with heartbeating():
            async with self._engine.connect() as connection:
                row = (await connection.execute(_SERVER, {"server": pool.server})).one_or_none()
            if row is None or row.state == SiteDbServerState.DOWN:
                return SiteDbPoolPass()
            settings = self._resources.settings
            server = (
                SiteDatabaseServer(self._resources.keys.open(row.admin_url), outbound=settings.outbound)
                if row.admin_url is not None
                else SiteDatabaseServer(settings.site_admin_database_url)
            )
            half_made = await self._remove_half_made(pool.server, server)
            ready = int((await self._execute(_COUNT_READY, server=pool.server, ready=SitePoolState.READY))[0])
            target = row.pool_target if row.state == SiteDbServerState.ACTIVE else 0
            if ready > target:
                taken = await self._execute(
                    _TAKE_READY, server=pool.server, ready=SitePoolState.READY, count=ready - target
                )
                for pool_id in taken:
                    await server.drop(pool_database_name(pool_id))
                return SiteDbPoolPass(ready=ready - len(taken), dropped=len(taken), half_made_removed=half_made)
            wanted = min(target - ready, REFILL_BATCH)
            if wanted:
                ids = [uuid.uuid4() for _ in range(wanted)]
                for pool_id in ids:
                    await self._execute(
                        _RECORD_CREATING, id=pool_id, server=pool.server, creating=SitePoolState.CREATING
                    )
                await pool_server.create_pool_databases(server, [pool_database_name(i) for i in ids])
                await self._execute(_MARK_READY, ids=ids, ready=SitePoolState.READY, creating=SitePoolState.CREATING)
            return SiteDbPoolPass(
                ready=ready + wanted, created=wanted, half_made_removed=half_made, more=ready + wanted < target
            )

    async def _remove_half_made(self, name: str, server: SiteDatabaseServer) -> int:
        """Drop what a dead pass left: a `creating` row past HALF_MADE_AFTER (its database may or may not exist),
        a `ready` row whose database or role is gone, and a pool database or role on the server with no row."""
        async with self._engine.connect() as connection:
            rows = (
                await connection.execute(
                    _UNCLAIMED,
                    {"server": name, "claimed": SitePoolState.CLAIMED, "half_made": HALF_MADE_AFTER.total_seconds()},
                )
            ).all()
            recorded = {pool_database_name(i) for i in (await connection.execute(_ALL_IDS, {"server": name})).scalars()}
        whole = await pool_server.whole_pool_databases(server)
        removed = 0
        for row in rows:
            pool_name = pool_database_name(row.id)
            half = (row.state == SitePoolState.CREATING and row.stale) or (
                row.state == SitePoolState.READY and pool_name not in whole
            )
            # Out of the pool first, and only while it still is as read: a claim since then keeps its database.
            # (A claim renames the pool's role before its database, so in between the pair looked half-made here,
            # and this pass once dropped a database a site step was adopting.) A pass killed between the two leaves
            # a database with no row, which the loop below drops on the next pass.
            if half and await self._execute(_FORGET, id=row.id, state=row.state):
                await server.drop(pool_name)
                removed += 1
        # Read after the rows: a database made since has its row by now (the row is written first).
        for orphan in await pool_server.pool_objects(server) - recorded:
            await server.drop(orphan)
            removed += 1
        return removed


def poke_in_background(resources: ActivityResources, server: str, pending: set[str]) -> None:
    """Tell the server's pool workflow a database was claimed, off the path the customer waits on, coalesced: one
    poke per POKE_EVERY per server from this worker, sent after the claims that asked for it. A poke lost (the
    worker dies first) only delays the refill until the workflow's next look (REFILL_EVERY)."""
    if server in pending:
        return  # a poke is on its way, and will be sent after this claim
    pending.add(server)

    async def poke() -> None:
        try:
            await asyncio.sleep(POKE_EVERY.total_seconds())
            pending.discard(server)
            await poke_pool(resources.client, server, resources.settings.site_task_queue, start=False)
        except Exception as err:  # a lost poke costs a delay, never the site
            logger.warning("could not poke the pool of %s: %s", server, err)
        finally:
            pending.discard(server)

    task = asyncio.get_running_loop().create_task(poke())
    _POKES.add(task)
    task.add_done_callback(_POKES.discard)


# Pokes on their way, held so that they are not garbage-collected before they are sent.
_POKES: set[asyncio.Task[None]] = set()
