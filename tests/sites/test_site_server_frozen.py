"""A site-database server that stops answering (SIGSTOP) before the health check notices: the sites placed on it
whose database step never reached it are placed again on the healthy server and finish there
(activities/sites/placement.py, workflows/sites/creation.py), through a lost answer of the move, a worker stopped
mid-step and two resets; nothing of them is left on the frozen server once it answers again. A site whose database
step had reached the server before it froze waits for it, and finishes there. The worker's pooled administrative
connections to the frozen server neither hang a step cut short on them nor keep it waiting for an answer
(activities/sites/database.py).

Two real servers: the session's PostgreSQL (as `steady`) and one of this module's (as `frozen`).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Iterator

import asyncpg
import pytest
import pytest_asyncio
from sqlalchemy.engine import make_url
from temporalio.client import Client

from activities.sites.database import AdminConnections, SiteDatabaseServer, site_database_name
from activities.sites.files import site_directory
from activities.sites.reachability import (
    CONNECT_TIMEOUT_SECONDS,
    FIRST_ANSWER_TIMEOUT_SECONDS,
    SiteDatabaseServerUnreachable,
)
from devstack.ports import free_port
from devstack.postgres import PostgresServer
from lifecycle.settings import Settings
from lifecycle.sites.contracts import SERVER_BACK_SIGNAL
from lifecycle.sites.workflow_types import site_creation_id
from tests.eventually import eventually
from tests.operators.cli import AsyncCli
from tests.sites.fleet import Fleet, fleet_of, freeze, thaw, unreachable_failures
from tests.sites.helpers import start_creation
from tests.workers import own_queue, own_worker


@pytest.fixture(scope="module")
def frozen_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostgresServer]:
    server = PostgresServer(tmp_path_factory.mktemp("postgres-frozen"), free_port(), durable=False)
    server.start()
    yield server
    server.stop()


@pytest_asyncio.fixture(scope="module")
async def fleet(
    settings: Settings, postgres_server: PostgresServer, frozen_server: PostgresServer, temporal_client: Client
) -> AsyncIterator[Fleet]:
    urls = {"steady": postgres_server.url(), "frozen": frozen_server.url()}
    async with fleet_of(settings, postgres_server, temporal_client, urls) as fleet:
        yield fleet


@pytest.fixture(scope="module")
def cli(temporal_client: Client) -> AsyncCli:
    return AsyncCli(temporal_client.service_client.config.target_host)


@pytest.mark.long
async def test_an_administrative_connection_to_a_server_that_froze_is_dropped_not_waited_on(
    fleet: Fleet, frozen_server: PostgresServer
) -> None:
    """A pooled connection opened while the server answered: a step cut short on it (cancelled, as a first try is
    at its timeout) ends within the bound of giving the connection back, where asyncpg's cancel request would wait
    for a frozen server for ever; and its first statement is bounded (activities/sites/database.py)."""
    connections = AdminConnections()
    server = SiteDatabaseServer(fleet.urls["frozen"], connections, name="frozen")
    name = site_database_name(str(uuid.uuid4()))
    try:
        # Two connections, both idle in the pool when the server freezes.
        async with server.connect() as first, server.connect() as second:
            assert await first.fetchval("SELECT 1") == await second.fetchval("SELECT 1") == 1
        pool = await connections.pool(server.dsn())
        freeze(frozen_server)
        try:
            started = time.monotonic()
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(2):
                    await server.exists(name)
            assert time.monotonic() - started < 2 + CONNECT_TIMEOUT_SECONDS + 3, "the cancelled step never ended"
            started = time.monotonic()
            with pytest.raises(SiteDatabaseServerUnreachable) as raised:
                await server.exists(name)
            assert raised.value.server == "frozen"
            assert time.monotonic() - started < FIRST_ANSWER_TIMEOUT_SECONDS + 3
            # The pool went with it: the next use opens a new one, whose connect is bounded.
            assert connections.discarded(server.dsn(), pool)
        finally:
            thaw(frozen_server)
        assert not await server.exists(name)
    finally:
        await connections.close()


@pytest.mark.long
async def test_sites_requested_just_after_a_server_froze_move_to_the_healthy_one_through_kills_and_resets(
    fleet: Fleet, frozen_server: PostgresServer, postgres_server: PostgresServer, temporal_client: Client, cli: AsyncCli
) -> None:
    await fleet.set_free({"steady": 6, "frozen": 12})
    queue = own_queue(fleet.settings)
    # Built on `frozen` while it answers, up to its bootstrap: the worker's pool then holds an idle administrative
    # connection to it, which the first try of the next database step there takes.
    built = await fleet.record_site()
    sites = [await fleet.record_site() for _ in range(4)]
    frozen = False
    try:
        # The move's first answer is lost after it committed (its retry finds the site moved already), and each
        # bootstrap hangs on its first attempt, so the worker stops inside it, after the move.
        faults = "move_site_database_server=lose:1,bootstrap_site=delay:60:1"
        async with own_worker(queue, temporal_client, faults=faults):
            await start_creation(temporal_client, queue.site_task_queue, built)

            async def built_on_frozen() -> bool:
                site = await fleet.site(built)
                return (site["database_server"], site["steps"]["database"]) == ("frozen", "done")

            await eventually(built_on_frozen, "the first site's database is made on frozen")
            freeze(frozen_server)
            frozen = True
            for site_id in sites:
                await start_creation(temporal_client, queue.site_task_queue, site_id)

            async def all_placed() -> bool:
                return all([(await fleet.site(site_id))["database_server"] is not None for site_id in sites])

            await eventually(all_placed, "every site is placed")
            # Placed after the freeze, before any health check noticed: the catalog still says active, and `frozen`
            # has the most room.
            assert {(await fleet.site(site_id))["database_server"] for site_id in sites} == {"frozen"}

            async def all_bootstrapping() -> bool:
                for site_id in sites:
                    site = await fleet.site(site_id)
                    if (site["database_server"], site["steps"]["database"]) != ("steady", "done"):
                        return False
                    if "bootstrap_site" not in await pending_activities(temporal_client, site_id):
                        return False
                return True

            await eventually(all_bootstrapping, "every site moves to steady and reaches its bootstrap", within=40)
        # The worker is gone mid-bootstrap. One run is reset to its start; another to the workflow task that asked
        # for its move, which it asks for again.
        first = temporal_client.get_workflow_handle(site_creation_id(sites[0]))
        first_run = (await first.describe()).run_id
        await cli.run("workflow", "reset", "--workflow-id", first.id, "--type", "FirstWorkflowTask", "--reason", "test")
        second = temporal_client.get_workflow_handle(site_creation_id(sites[1]))
        second_run = (await second.describe()).run_id
        asked = await move_asked_in(temporal_client, sites[1])
        await cli.run("workflow", "reset", "--workflow-id", second.id, "--event-id", str(asked), "--reason", "test")
        async with own_worker(queue, temporal_client):
            assert (await temporal_client.get_workflow_handle(first.id).describe()).run_id != first_run
            assert (await temporal_client.get_workflow_handle(second.id).describe()).run_id != second_run
            for site_id in sites:
                site = await fleet.until_status(site_id, "active")
                assert site["database_server"] == "steady" and set(site["steps"].values()) == {"done"}
                # The files step wrote the frozen server into the config; the site's config names steady.
                config = (site_directory(fleet.settings.sites_path, site_id) / "wp-config.php").read_text()
                assert f"127.0.0.1:{postgres_server.port}'" in config
                assert f":{frozen_server.port}'" not in config
            assert await moves_tried(temporal_client, sites[1]) >= 1
            # The site built on frozen has its database there: its bootstrap waits for the server, and finishes there.
            site = await fleet.site(built)
            assert (site["status"], site["database_server"]) == ("provisioning", "frozen")
            thaw(frozen_server)
            frozen = False
            await temporal_client.get_workflow_handle(site_creation_id(built)).signal(SERVER_BACK_SIGNAL)
            assert (await fleet.until_status(built, "active"))["database_server"] == "frozen"
    finally:
        if frozen:
            thaw(frozen_server)
    # One database per site, on the server the site names; nothing on the other.
    for site_id in sites:
        assert await fleet.holds_database("steady", site_id)
        assert not await fleet.holds_database("frozen", site_id)
    assert await fleet.holds_database("frozen", built) and not await fleet.holds_database("steady", built)


async def pending_activities(client: Client, site_id: str) -> set[str]:
    described = await client.get_workflow_handle(site_creation_id(site_id)).describe()
    return {activity.activity_type.name for activity in described.raw_description.pending_activities}


async def move_asked_in(client: Client, site_id: str) -> int:
    """The WorkflowTaskCompleted event whose workflow task scheduled the site's first move."""
    history = await client.get_workflow_handle(site_creation_id(site_id)).fetch_history()
    for event in history.events:
        if event.HasField("activity_task_scheduled_event_attributes"):
            scheduled = event.activity_task_scheduled_event_attributes
            if scheduled.activity_type.name == "move_site_database_server":
                return int(scheduled.workflow_task_completed_event_id)
    raise AssertionError(f"site {site_id}: no move scheduled")


async def moves_tried(client: Client, site_id: str) -> int:
    history = await client.get_workflow_handle(site_creation_id(site_id)).fetch_history()
    return sum(
        event.activity_task_scheduled_event_attributes.activity_type.name == "move_site_database_server"
        for event in history.events
        if event.HasField("activity_task_scheduled_event_attributes")
    )


@pytest.mark.long
async def test_a_site_whose_database_step_reached_the_frozen_server_waits_for_it_and_finishes_there(
    fleet: Fleet, frozen_server: PostgresServer, temporal_client: Client
) -> None:
    await fleet.set_free({"steady": 5, "frozen": 8})
    queue = own_queue(fleet.settings)
    site_id = await fleet.record_site()
    name = site_database_name(site_id)
    admin_url = make_url(fleet.urls["frozen"]).set(drivername="postgresql").render_as_string(hide_password=False)
    # CREATE ROLE waits behind this lock: the step has reached the server and recorded so, and created nothing yet.
    holder = await asyncpg.connect(admin_url)
    watcher = await asyncpg.connect(admin_url)
    frozen = False
    try:
        await holder.execute("BEGIN; LOCK TABLE pg_catalog.pg_authid IN SHARE MODE")
        async with own_worker(queue, temporal_client):
            await start_creation(temporal_client, queue.site_task_queue, site_id)

            async def blocked_step() -> int | None:
                described = await temporal_client.get_workflow_handle(site_creation_id(site_id)).describe()
                pending = {activity.activity_type.name for activity in described.raw_description.pending_activities}
                if "create_site_database" not in pending:
                    return None  # still the first try, whose timeout would cancel the statement
                pid: int | None = await watcher.fetchval(
                    "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE $1",
                    f"CREATE ROLE {name} %",
                )
                return pid

            pid = await eventually(blocked_step, "the database step waits inside the server")
            assert (await fleet.site(site_id))["database_server"] == "frozen"
            # The server goes away under the step (its backend gone before the freeze, which would hold the signal
            # that ends it), then stops answering at all.
            assert await watcher.fetchval("SELECT pg_terminate_backend($1, 10000)", pid)
            await holder.execute("ROLLBACK")
            freeze(frozen_server)
            frozen = True

            async def move_refused_and_waiting() -> bool:
                return (
                    await moves_tried(temporal_client, site_id) >= 1
                    and await unreachable_failures(temporal_client, site_id) >= 2
                )

            await eventually(move_refused_and_waiting, "the move is refused and the step waits for its server")
            site = await fleet.site(site_id)
            assert (site["status"], site["database_server"]) == ("provisioning", "frozen")
            thaw(frozen_server)
            frozen = False
            site = await fleet.until_status(site_id, "active")
        assert site["database_server"] == "frozen"
        assert await fleet.holds_database("frozen", site_id) and not await fleet.holds_database("steady", site_id)
    finally:
        if frozen:
            thaw(frozen_server)
        await holder.close()
        await watcher.close()
