"""The warm pool of a site-database server (lifecycle/sites/pool.py): it refills to its target, a site claims
exactly one pool database (also across a claim cut short, a lost answer, a killed worker and a reset), an empty
pool makes the site the slow way, a drained server's unclaimed databases go, and half-made ones are removed.

The server is the session's PostgreSQL, reached as a provisioner with CREATEROLE and CREATEDB only; the catalog
is a product database of this module's (its `default` is marked down), and the server's name is this module's
own, so its pool workflow is too.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import pytest_asyncio
from sqlalchemy import text
from temporalio.api.enums.v1 import PendingActivityState
from temporalio.client import Client
from temporalio.testing import ActivityEnvironment

from activities.resources import ActivityResources
from activities.sites import pool_server
from activities.sites.database import SiteDatabaseServer, site_database_name
from activities.sites.placement import SitePlacement
from activities.sites.pool import SiteDbPool, SitePoolActivities
from api.app import create_app
from devstack.postgres import PostgresServer
from lifecycle.db.engine import make_engine
from lifecycle.migrate import upgrade_async
from lifecycle.sealing import KeyRing
from lifecycle.settings import Settings
from lifecycle.sites.contracts import SITE_STEPS, SiteDbPoolInput
from lifecycle.sites.pool import pool_database_name
from lifecycle.sites.workflow_types import site_creation_id
from tests.conftest import ADMIN_HEADERS
from tests.eventually import eventually
from tests.operators.cli import AsyncCli
from tests.sites.helpers import start_creation
from tests.workers import own_queue, own_worker

PROVISIONER = "site_provisioner"
POOL_NAME = "^pool_[0-9a-f]{32}$"


@dataclass
class Pool:
    settings: Settings
    api: httpx.AsyncClient
    headers: dict[str, str]
    name: str  # the server's name in the catalog
    server: SiteDatabaseServer

    async def sql(self, query: str, **params: Any) -> list[Any]:
        engine = make_engine(self.settings.database_url, pool_size=1)
        try:
            async with engine.begin() as connection:
                result = await connection.execute(text(query), params)
                return list(result.all()) if result.returns_rows else []
        finally:
            await engine.dispose()

    async def patch(self, **changes: Any) -> dict[str, Any]:
        answer = await self.api.patch(f"/site-db-servers/{self.name}", json=changes, headers=ADMIN_HEADERS)
        assert answer.status_code == 200, answer.text
        body: dict[str, Any] = answer.json()
        return body

    async def ready(self) -> int:
        answer = await self.api.get("/site-db-servers", headers=ADMIN_HEADERS)
        ready: int = {s["name"]: s for s in answer.json()["servers"]}[self.name]["pool_ready"]
        return ready

    async def until_ready(self, count: int) -> None:
        await eventually(self.ready, f"{count} pool databases ready", until=lambda ready: ready == count)

    async def on_server(self) -> set[str]:
        """Every pool database and role on the server, by name."""
        async with self.server.connect() as admin:
            rows = await admin.fetch(
                "SELECT datname AS name FROM pg_database WHERE datname ~ $1"
                " UNION ALL SELECT rolname FROM pg_roles WHERE rolname ~ $1",
                POOL_NAME,
            )
        return {row["name"] for row in rows}

    async def ready_names(self) -> set[str]:
        rows = await self.sql("SELECT id FROM site_db_pool WHERE server = :s AND state = 'ready'", s=self.name)
        return {pool_database_name(row.id) for row in rows}

    async def claims(self, site_id: str) -> list[str]:
        rows = await self.sql("SELECT id FROM site_db_pool WHERE site_id = :site", site=uuid.UUID(site_id))
        return [pool_database_name(row.id) for row in rows]

    async def no_orphan(self) -> None:
        """Every pool database on the server is a ready one of the pool, whole (database and role), and no more;
        waited for, since a pass takes databases out of the pool before it drops them."""

        async def pool_and_server() -> tuple[set[str], set[str], set[str]]:
            ready = await self.ready_names()
            async with self.server.connect() as admin:
                databases = await admin.fetch("SELECT datname FROM pg_database WHERE datname ~ $1", POOL_NAME)
                roles = await admin.fetch("SELECT rolname FROM pg_roles WHERE rolname ~ $1", POOL_NAME)
            return ready, {row["datname"] for row in databases}, {row["rolname"] for row in roles}

        await eventually(
            pool_and_server, "no pool database but the ready ones", until=lambda found: found[0] == found[1] == found[2]
        )

    async def create_site(self) -> str:
        domain = f"pool-{uuid.uuid4().hex[:12]}.example.com"
        created = await self.api.post("/sites", json={"name": "Pooled", "domain": domain}, headers=self.headers)
        assert created.status_code == 202, created.text
        site_id: str = created.json()["id"]
        return site_id

    async def until_status(self, site_id: str, status: str) -> None:
        async def reached() -> str:
            answer = await self.api.get(f"/sites/{site_id}", headers=self.headers)
            found: str = answer.json()["status"]
            return found

        await eventually(reached, f"site {site_id} becomes {status}", until=lambda found: found == status)

    async def site_database(self, site_id: str) -> dict[str, Any] | None:
        """The site's database as the server has it: its tables' owners and its blog name, or None."""
        name = site_database_name(site_id)
        async with self.server.connect() as admin:
            if not await admin.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name):
                return None
        async with self.server.connect(name) as connection:
            owners = {
                r["tableowner"]
                for r in await connection.fetch("SELECT tableowner FROM pg_tables WHERE tablename LIKE 'wp\\_%'")
            }
            tables = await connection.fetchval("SELECT count(*) FROM pg_tables WHERE tablename LIKE 'wp\\_%'")
            blog = await connection.fetchval("SELECT option_value FROM wp_options WHERE option_name = 'blogname'")
        return {"owners": owners, "tables": tables, "blogname": blog}


@pytest_asyncio.fixture(scope="module")
async def pool(settings: Settings, postgres_server: PostgresServer, temporal_client: Client) -> AsyncIterator[Pool]:
    database = f"catalog_{uuid.uuid4().hex[:8]}"
    await asyncio.to_thread(postgres_server.create_database, database)
    await asyncio.to_thread(postgres_server.ensure_provisioner, PROVISIONER)
    await upgrade_async(postgres_server.url(database))
    own = own_queue(settings).model_copy(update={"database_url": postgres_server.url(database)})
    url = f"postgresql+asyncpg://{PROVISIONER}@127.0.0.1:{postgres_server.port}/postgres"
    name = f"pool-{uuid.uuid4().hex[:8]}"
    app = create_app(own, temporal_client=temporal_client)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://testserver") as api,
        own_worker(own, temporal_client),
    ):
        account = await api.post(
            "/accounts", json={"name": "Pool", "email": f"pool-{name}@example.com"}, headers=ADMIN_HEADERS
        )
        assert account.status_code == 201, account.text
        headers = {"Authorization": f"Bearer {account.json()['api_key']}"}
        down = await api.patch("/site-db-servers/default", json={"state": "down"}, headers=ADMIN_HEADERS)
        assert down.status_code == 200, down.text
        added = await api.put(
            f"/site-db-servers/{name}", json={"url": url, "capacity": 100, "pool_target": 2}, headers=ADMIN_HEADERS
        )
        assert added.status_code == 201, added.text
        yield Pool(own, api, headers, name, SiteDatabaseServer(url))


@pytest.fixture(scope="module")
def cli(temporal_client: Client) -> AsyncCli:
    return AsyncCli(temporal_client.service_client.config.target_host)


async def test_the_pool_refills_to_its_target_and_a_site_claims_one(pool: Pool) -> None:
    await pool.until_ready(2)
    before = await pool.ready_names()
    # Locked down and owned by no site: a role that cannot log in, no CONNECT for PUBLIC, the schema already in.
    async with pool.server.connect() as admin:
        for name in before:
            login, public_connect = await admin.fetchrow(
                "SELECT r.rolcanlogin, has_database_privilege('public', d.datname, 'CONNECT')"
                " FROM pg_database d JOIN pg_roles r ON r.oid = d.datdba WHERE d.datname = $1",
                name,
            )
            assert (login, public_connect) == (False, False), name
    site_id = await pool.create_site()
    await pool.until_status(site_id, "active")
    claimed = await pool.claims(site_id)
    assert len(claimed) == 1 and claimed[0] in before
    # The claimed database is the site's now: renamed, its tables its role's, its blog options written.
    site = await pool.site_database(site_id)
    assert site == {"owners": {site_database_name(site_id)}, "tables": 12, "blogname": "Pooled"}
    # The claim left the pool at half its target, so it poked the pool, which made one more.
    await pool.until_ready(2)
    assert claimed[0] not in await pool.ready_names()
    await pool.no_orphan()

    deleted = await pool.api.delete(f"/sites/{site_id}", headers=pool.headers)
    assert deleted.status_code == 202, deleted.text
    await pool.until_status(site_id, "deleted")
    assert await pool.site_database(site_id) is None
    assert claimed[0] not in await pool.ready_names()
    await pool.no_orphan()


async def _record_placed_site(pool: Pool) -> str:
    """A site row as the API records it, placed already (as save_site_metadata does)."""
    site = uuid.uuid4()
    [account] = await pool.sql("SELECT id FROM accounts LIMIT 1")
    await pool.sql(
        "INSERT INTO sites (id, account_id, name, tagline, domain, status, steps) VALUES"
        " (:id, :account, 'Pooled', '', :domain, 'provisioning', CAST(:steps AS jsonb))",
        id=site,
        account=account.id,
        domain=f"pool-{site.hex[:12]}.example.com",
        steps=json.dumps(dict.fromkeys(SITE_STEPS, "pending")),
    )
    engine = make_engine(pool.settings.database_url, pool_size=1)
    try:
        await SitePlacement(engine, pool.settings.site_admin_database_url, KeyRing(pool.settings)).place(str(site))
    finally:
        await engine.dispose()
    return str(site)


async def test_a_cut_claim_a_lost_answer_a_kill_and_a_reset_claim_exactly_one(
    pool: Pool, temporal_client: Client, cli: AsyncCli
) -> None:
    await pool.until_ready(2)
    site_id = await _record_placed_site(pool)
    # A step killed right after its claim committed, before renaming anything on the server.
    engine = make_engine(pool.settings.database_url, pool_size=1)
    try:
        first = await SiteDbPool(engine).claim(site_id, take_new=True)
    finally:
        await engine.dispose()
    assert first is not None and first.new
    queue = own_queue(pool.settings, f"pool-kill-{uuid.uuid4().hex[:8]}")
    # The database step's first attempt finishes the claim and its answer is lost, so a second attempt runs it
    # again; the worker is killed inside bootstrap, and the run is reset to its start.
    faults = "create_site_database=lose:1,bootstrap_site=delay:60:1"
    handle = await start_creation(temporal_client, queue.site_task_queue, site_id)
    async with own_worker(queue, temporal_client, faults=faults):

        async def inside_bootstrap() -> bool:
            pending = (await handle.describe()).raw_description.pending_activities
            return any(
                a.activity_type.name == "bootstrap_site"
                and a.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
                for a in pending
            )

        await eventually(inside_bootstrap, "the run is inside bootstrap")
    first_run = (await handle.describe()).run_id
    await cli.run("workflow", "reset", "--workflow-id", handle.id, "--type", "FirstWorkflowTask", "--reason", "test")
    async with own_worker(queue, temporal_client):
        latest = temporal_client.get_workflow_handle(site_creation_id(site_id))
        assert (await latest.describe()).run_id != first_run
        assert (await latest.result())["status"] == "active"
    assert await pool.claims(site_id) == [first.pool_name]
    site = await pool.site_database(site_id)
    assert site == {"owners": {site_database_name(site_id)}, "tables": 12, "blogname": "Pooled"}
    # The claim the test made poked nobody: a change of the server does.
    await pool.patch(capacity=100)
    await pool.until_ready(2)
    await pool.no_orphan()


@pytest.mark.parametrize("held", ["save_site_metadata", "create_site_filesystem"])
async def test_a_kill_inside_each_earlier_step_then_a_reset_claim_exactly_one(
    pool: Pool, temporal_client: Client, cli: AsyncCli, held: str
) -> None:
    """The test above kills inside bootstrap after a lost database answer; here inside metadata (nothing claimed
    yet) and inside the files step, by when the database step beside it has claimed: the run is reset to its
    start, runs the database step again, and a clean worker finishes it."""
    await pool.until_ready(2)
    site_id = await _record_placed_site(pool)
    queue = own_queue(pool.settings, f"pool-step-{uuid.uuid4().hex[:8]}")
    handle = await start_creation(temporal_client, queue.site_task_queue, site_id)
    async with own_worker(queue, temporal_client, faults=f"{held}=delay:60:1"):

        async def inside() -> bool:
            pending = (await handle.describe()).raw_description.pending_activities
            return any(
                a.activity_type.name == held and a.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
                for a in pending
            )

        await eventually(inside, f"the run is inside {held}")
    await cli.run("workflow", "reset", "--workflow-id", handle.id, "--type", "FirstWorkflowTask", "--reason", "test")
    async with own_worker(queue, temporal_client):
        latest = temporal_client.get_workflow_handle(site_creation_id(site_id))
        assert (await latest.result())["status"] == "active"
    assert len(await pool.claims(site_id)) == 1
    assert (await pool.site_database(site_id) or {}).get("tables") == 12
    await pool.no_orphan()


async def test_a_pass_never_drops_a_database_a_claim_is_adopting(
    pool: Pool, temporal_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A claim renames the pool's role, then its database. A pass that read the row as ready before the claim and
    looks at the server in between must not take the pair for half-made and drop the database (the site-step
    drill once saw the adoption fail so)."""
    await pool.until_ready(2)
    site_id = await _record_placed_site(pool)
    engine = make_engine(pool.settings.database_url, pool_size=1)
    claimed: list[str] = []
    real = pool_server.whole_pool_databases

    async def claim_mid_pass(server: SiteDatabaseServer) -> set[str]:
        # The pass has read its rows: a site step claims one now and renames its role, as the adoption begins.
        found = await SiteDbPool(engine).claim(site_id, take_new=True)
        assert found is not None
        claimed.append(found.pool_name)
        async with pool.server.connect() as admin:
            await admin.execute(f"ALTER ROLE {found.pool_name} RENAME TO {site_database_name(site_id)}")
        return await real(server)

    monkeypatch.setattr(pool_server, "whole_pool_databases", claim_mid_pass)
    resources = ActivityResources.create(pool.settings, temporal_client)
    try:
        await ActivityEnvironment().run(
            SitePoolActivities(resources).refill_site_db_pool, SiteDbPoolInput(server=pool.name)
        )
    finally:
        await resources.close()
        await engine.dispose()
    async with pool.server.connect() as admin:
        kept = await admin.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", claimed[0])
    await pool.server.drop(claimed[0])
    await pool.server.drop(site_database_name(site_id))
    assert kept, f"the pass dropped {claimed[0]}, which a site had claimed"


async def test_an_empty_pool_makes_the_site_the_slow_way(pool: Pool) -> None:
    await pool.patch(pool_target=0)
    await pool.until_ready(0)
    await pool.no_orphan()
    try:
        site_id = await pool.create_site()
        await pool.until_status(site_id, "active")
        assert await pool.claims(site_id) == []
        site = await pool.site_database(site_id)
        assert site == {"owners": {site_database_name(site_id)}, "tables": 12, "blogname": "Pooled"}
    finally:
        await pool.patch(pool_target=2)


async def test_half_made_pool_databases_are_removed_and_draining_drops_the_unclaimed(pool: Pool) -> None:
    await pool.until_ready(2)
    # What dead passes leave: a row still `creating` long after (with its database made), a ready row whose
    # database is gone, and a database with no row at all.
    stale, missing, unrecorded = (uuid.uuid4() for _ in range(3))
    await pool_server.create_pool_databases(pool.server, [pool_database_name(stale), pool_database_name(unrecorded)])
    await pool.sql(
        "INSERT INTO site_db_pool (id, server, state, created_at) VALUES"
        " (:stale, :s, 'creating', now() - interval '1 hour'), (:missing, :s, 'ready', now())",
        stale=stale,
        missing=missing,
        s=pool.name,
    )
    await pool.patch(capacity=100)  # any change pokes the pool

    async def cleaned() -> bool:
        names = await pool.on_server()
        recorded = await pool.sql("SELECT id FROM site_db_pool WHERE id IN (:a, :b)", a=stale, b=missing)
        return not recorded and not {pool_database_name(i) for i in (stale, unrecorded)} & names

    await eventually(cleaned, "the half-made pool databases are gone")
    await pool.until_ready(2)
    await pool.no_orphan()

    assert (await pool.patch(state="draining"))["state"] == "draining"
    try:
        await pool.until_ready(0)
        await pool.no_orphan()  # none ready, so none on the server
    finally:
        await pool.patch(state="active")
