"""Each site-database server's warm pool: databases made ahead from a template that already holds WordPress's
core schema, locked down and owned by a role of their own (no site's), ready for a site to claim.

A claim (activities/sites/pool.py, inside the creation's database step) renames the pool's role and database to
the site's, which takes milliseconds where CREATE DATABASE takes tens. One workflow per server
(workflows/sites/pool.py) refills the pool at a bounded rate, drops the unclaimed databases of a draining server
and removes half-made ones; it is poked (a signal, which starts it if need be) when a claim leaves the pool at
half its target or less, when an admin changes the server, and when a worker starts, and it looks again every
REFILL_EVERY anyway.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Final

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from lifecycle.sites.contracts import SiteDbPoolInput
from lifecycle.sites.workflow_types import site_db_pool_id, site_db_pool_options

# The signal that asks a server's pool workflow to look at its pool now.
REFILL_SIGNAL: Final = "refill"
# Databases one pass creates, one after another, before the workflow pauses for REFILL_PAUSE: the refill's rate is
# bounded by that (at most one CREATE DATABASE at a time per server, and a pause every few), so a pool refilling
# behind a burst of new sites takes at most about one core of the server from them.
REFILL_BATCH: Final = 5
REFILL_PAUSE: Final = timedelta(seconds=0.5)
# A pool looks at itself this often without a poke: a lost poke delays a refill by this much at most.
REFILL_EVERY: Final = timedelta(minutes=1)
# After a poke (and between the passes of a refill) the pool waits for this long without another before it goes on,
# and at most REFILL_DEFER_MAX: new sites claim from the pool while the CPU is theirs, and the refill comes after
# them (bench.sites: a refill running beside the rounds or the burst of 100 took the CPU their steps waited for).
# Under claims that never pause, the refill's rate is REFILL_BATCH per REFILL_DEFER_MAX; past that the pool runs
# dry and sites are made the slow way.
REFILL_QUIET: Final = timedelta(seconds=2)
REFILL_DEFER_MAX: Final = timedelta(seconds=10)
# A worker pokes a server's pool at most once this often, after the claims that asked for it (its pokes are
# coalesced): a burst of claims costs a signal a second, not one each. Shorter than REFILL_QUIET, so a burst's
# pokes keep deferring the refill until the burst ends.
POKE_EVERY: Final = timedelta(seconds=1)
# A pool row still `creating` this long after it was written belongs to a pass that died (a pass creates
# REFILL_BATCH databases within seconds, and its activity times out after a minute): the reconciler removes it.
HALF_MADE_AFTER: Final = timedelta(minutes=2)

# The database every pool database is cloned from, one per server (activities/sites/pool_server.py).
TEMPLATE_DATABASE: Final = "site_template"


def pool_database_name(pool_id: uuid.UUID) -> str:
    """The name of the pool's database, and of the role that owns it, until a site claims it."""
    return f"pool_{pool_id.hex}"


async def poke_pool(client: Client, server: str, task_queue: str, *, start: bool = True) -> None:
    """Ask the server's pool workflow to look at its pool now; with `start`, start it on `task_queue` if none runs.

    A pool's run is one per server, and it stays on the queue it was started on: only a starter on the queue every
    sites worker polls may start it (the API, a worker on the shared queue). One on a queue of its own (a canary, a
    test's) only wakes a running pool, or a pool started there would stop with that queue's workers.
    """
    if start:
        await site_db_pool_options(server).start(
            client, SiteDbPoolInput(server), task_queue=task_queue, start_signal=REFILL_SIGNAL
        )
        return
    try:
        await client.get_workflow_handle(site_db_pool_id(server)).signal(REFILL_SIGNAL)
    except RPCError as err:
        if err.status != RPCStatusCode.NOT_FOUND:
            raise


async def poke_every_pool(client: Client, engine: AsyncEngine, task_queue: str, *, start: bool) -> list[str]:
    """Poke the pool of every server of the catalog (a worker that starts does, so every pool runs): their names."""
    async with engine.connect() as connection:
        servers = list((await connection.execute(text("SELECT name FROM site_db_servers ORDER BY name"))).scalars())
    for server in servers:
        await poke_pool(client, server, task_queue, start=start)
    return servers
