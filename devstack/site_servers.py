"""The local stack's two site-database servers, `sites-a` and `sites-b`, besides the product's own PostgreSQL.

Each is an embedded PostgreSQL of its own with the same `site_provisioner` role the product's server has. They
are registered in the catalog (lifecycle/sites/servers.py) on the stack's first start, and `default` (the
product's own server, SITE_DATABASE_URL) is drained then, so new sites alternate between the two and
`GET /site-db-servers` shows it. A later start only brings their URLs up to date (the ports may have moved),
leaving an operator's changes of state and capacity alone.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from devstack.local_env import SITE_PROVISIONER, StackPorts
from devstack.postgres import PostgresServer
from lifecycle.settings import LOCAL_DATABASE
from lifecycle.sites.servers import DEFAULT_POOL_TARGET, DEFAULT_SERVER
from lifecycle.statuses import SiteDbServerState

LOCAL_SITE_SERVER_CAPACITY = 100


def site_servers(data_dir: Path, ports: StackPorts) -> dict[str, PostgresServer]:
    return {
        "sites-a": PostgresServer(data_dir / "postgres-sites-a", ports.sites_a),
        "sites-b": PostgresServer(data_dir / "postgres-sites-b", ports.sites_b),
    }


def start_site_servers(servers: dict[str, PostgresServer]) -> None:
    """Side by side: each start is mostly waiting for its own server."""

    def start(server: PostgresServer) -> None:
        server.start()
        server.ensure_provisioner(SITE_PROVISIONER)

    with ThreadPoolExecutor(len(servers)) as pool:
        list(pool.map(start, servers.values()))


def register_site_servers(product: PostgresServer, servers: dict[str, PostgresServer]) -> None:
    values = ", ".join(
        f"('{name}', 'postgresql+asyncpg://{SITE_PROVISIONER}@127.0.0.1:{server.port}/postgres',"
        f" {LOCAL_SITE_SERVER_CAPACITY}, {DEFAULT_POOL_TARGET}, '{SiteDbServerState.ACTIVE.value}')"
        for name, server in servers.items()
    )
    product.psql(
        "WITH added AS (INSERT INTO site_db_servers (name, admin_url, capacity, pool_target, state)"
        f" VALUES {values} ON CONFLICT (name) DO UPDATE SET admin_url = EXCLUDED.admin_url"
        " RETURNING xmax = 0 AS inserted)"
        f" UPDATE site_db_servers SET state = '{SiteDbServerState.DRAINING.value}'"
        f" WHERE name = '{DEFAULT_SERVER}' AND EXISTS (SELECT 1 FROM added WHERE inserted)",
        database=LOCAL_DATABASE,
    )
