"""The catalog of site-database servers (`site_db_servers`): what the API, the placement and the tooling share.

A site is placed on the active server with the most free capacity (capacity minus the sites it holds), ties going
to the first name; the choice is recorded on the site (`sites.database_server`) and every later step, retry,
reset, undo and teardown reads it from there (activities/sites/placement.py). A site whose server stops answering
before its database step touched it is placed again, on another server (SitePlacement.move).

`SITE_DATABASE_URL` is the catalog's `default` server: migration 0014 registers it with no URL of its own, which
means "the server SITE_DATABASE_URL names, else the product's own" as each worker's environment says. A `PUT` of
`default` with a URL replaces that.
"""

from __future__ import annotations

from typing import Final

from sqlalchemy import text

from lifecycle.statuses import DOMAIN_HOLDING_SITE_STATUSES, SiteDbServerState, SitePoolState, sql_list

# The server SITE_DATABASE_URL names; sites made before the catalog existed are on it.
DEFAULT_SERVER: Final = "default"
# The default server's capacity as the migration registers it: large enough that an existing deployment places
# as before; an operator sets the real figure (PATCH).
DEFAULT_SERVER_CAPACITY: Final = 10_000
# Databases a server keeps ready to claim (its warm pool, lifecycle/sites/pool.py): a claim is a fraction of a
# CREATE DATABASE, and each pooled database holds some 8 MB of disk. The pool refills a few seconds after a burst
# ends, so the target is the burst one server absorbs at full speed: 10 new sites on one server within seconds is a
# lot for a fleet of tens of servers. A larger burst past the pool is made the slow way, never refused. Raise it per
# server for expected bursts (bench.sites sets 100); IntegreSQL's initial pool is 10 too.
DEFAULT_POOL_TARGET: Final = 10
SERVER_NAME_PATTERN: Final = r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$"
SERVER_NAME_MAX_LENGTH: Final = 40
MAX_CAPACITY: Final = 1_000_000
MAX_POOL_TARGET: Final = 10_000

# A site counts against its server while it may hold a database there: every status that holds its domain.
PLACED_SITES_SQL: Final = (
    "SELECT database_server, count(*) AS placed FROM sites"
    f" WHERE database_server IS NOT NULL AND status IN ({sql_list(DOMAIN_HOLDING_SITE_STATUSES)})"
    " GROUP BY database_server"
)

# Every server with the sites it holds and its ready pool databases, by name: what GET /site-db-servers lists.
SERVERS_WITH_PLACED_SITES = text(
    "SELECT s.name, s.capacity, s.pool_target, s.state, s.state_set_by, coalesce(p.placed, 0) AS sites,"
    " (SELECT count(*) FROM site_db_pool d WHERE d.server = s.name"
    f" AND d.state = '{SitePoolState.READY.value}') AS pool_ready FROM site_db_servers s"
    f" LEFT JOIN ({PLACED_SITES_SQL}) p ON p.database_server = s.name ORDER BY s.name"
)

# The server a new site goes to: active, with free capacity, the most of it, ties by name; never `:excluded` (the
# server a moved site leaves, which may not be marked down yet; None for a first placement).
CHOOSE_SERVER = text(
    "SELECT s.name FROM site_db_servers s"
    f" LEFT JOIN ({PLACED_SITES_SQL}) p ON p.database_server = s.name"
    f" WHERE s.state = '{SiteDbServerState.ACTIVE.value}' AND s.capacity - coalesce(p.placed, 0) > 0"
    " AND s.name IS DISTINCT FROM CAST(:excluded AS text)"
    " ORDER BY s.capacity - coalesce(p.placed, 0) DESC, s.name LIMIT 1"
)
