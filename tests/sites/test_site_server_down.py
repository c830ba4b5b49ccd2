"""A site-database server that fails (activities/sites/health_check.py, workflows/sites/creation.py): a killed
server gets no new site once the health check marks it down; a site caught mid-creation on it, with no other server
to move to (tests/sites/test_site_server_frozen.py has one that moves), waits (and alerts once stuck for
STUCK_AFTER_SITE_CREATION, its step's retries being no progress), and one
deleted meanwhile is removed, once it is back; a creation cancelled while it waits rolls back once the server
answers; the health check never overrides an operator; and a drained server's sites are still deleted.

Two real servers: the session's PostgreSQL (as `steady`) and one of this module's (as `flaky`), which a test kills
with SIGKILL and starts again. The catalog is a product database of this module's (tests/sites/fleet.py).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio
from temporalio.client import Client

from activities.sites.health_check import ServerHealth
from devstack.ports import free_port
from devstack.postgres import PostgresServer
from lifecycle.settings import Settings
from lifecycle.sites.contracts import SiteServersChecked
from lifecycle.sites.workflow_types import SITE_SERVER_HEALTH_CHECK_WORKFLOW, site_creation_id, site_deletion_id
from lifecycle.statuses import SiteDbServerState, SiteDbServerStateSetBy
from lifecycle.stuck import RunKind
from tests.conftest import ADMIN_HEADERS
from tests.eventually import eventually
from tests.sites.fleet import Fleet, fleet_of, unreachable_failures, with_password
from tests.stuck import assert_alerts_once_stuck
from workflows.activity_presets import SITE_STEP

pytestmark = pytest.mark.slow  # it kills processes

STEP_ATTEMPTS = SITE_STEP["retry_policy"].maximum_attempts


@pytest.fixture(scope="module")
def flaky_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostgresServer]:
    server = PostgresServer(tmp_path_factory.mktemp("postgres-flaky"), free_port(), durable=False)
    server.start()
    yield server
    server.stop()


@pytest_asyncio.fixture(scope="module")
async def fleet(
    settings: Settings, postgres_server: PostgresServer, flaky_server: PostgresServer, temporal_client: Client
) -> AsyncIterator[Fleet]:
    urls = {"steady": postgres_server.url(), "flaky": flaky_server.url()}
    async with fleet_of(settings, postgres_server, temporal_client, urls) as fleet:
        yield fleet


async def check_health(fleet: Fleet, client: Client) -> SiteServersChecked:
    """One pass of the health check on the fleet's worker, as its schedule starts it."""
    return await client.execute_workflow(
        SITE_SERVER_HEALTH_CHECK_WORKFLOW,
        id=f"health-check-test-{uuid.uuid4().hex[:8]}",
        task_queue=fleet.settings.site_task_queue,
        result_type=SiteServersChecked,
    )


@pytest.mark.long
async def test_a_killed_server_takes_no_new_site_and_its_site_in_flight_finishes_once_back(
    fleet: Fleet, flaky_server: PostgresServer, temporal_client: Client
) -> None:
    await fleet.set_free({"steady": 3, "flaky": 5})
    placed = await fleet.create_site()
    assert (await fleet.until_status(placed, "active"))["database_server"] == "flaky"
    # No other server takes a site: the one caught on `flaky` cannot move, and waits for it.
    await fleet.patch("steady", state="draining")
    flaky_server.kill()
    try:
        # Placed before any check noticed: the catalog still says active, and `flaky` has the most room.
        caught = await fleet.create_site()
        assert (await fleet.site(caught))["database_server"] == "flaky"

        async def waiting() -> bool:
            return await unreachable_failures(temporal_client, caught) >= 1

        await eventually(waiting, "the database step finds its server unreachable")
        # Waiting for its server, the creation is stuck: its step's retries are not progress.
        failures = await unreachable_failures(temporal_client, caught)

        async def retried() -> bool:
            return await unreachable_failures(temporal_client, caught) > failures

        await assert_alerts_once_stuck(
            fleet.settings,
            temporal_client,
            RunKind.SITE_CREATION,
            caught,
            meanwhile=lambda: eventually(retried, "the step tries again"),
        )
        # One failed check moves nothing; the second in a row marks it down.
        first = await check_health(fleet, temporal_client)
        assert "flaky" in first.unreachable and "flaky" not in first.marked_down
        assert (await fleet.servers())["flaky"]["state"] == "active"
        assert "flaky" in (await check_health(fleet, temporal_client)).marked_down
        flaky = (await fleet.servers())["flaky"]
        assert (flaky["state"], flaky["state_set_by"]) == ("down", "health_check")
        # Down, it takes no new site, though it has room: with `steady` drained, none can be placed.
        elsewhere = await fleet.create_site()
        assert (await fleet.until_status(elsewhere, "rolled_back"))["error_code"] == "no_database_server"

        # More tries than a step's retry policy allows it (which would have rolled the site back), and it waits on.
        async def outlasted_the_retries() -> bool:
            return await unreachable_failures(temporal_client, caught) > STEP_ATTEMPTS

        await eventually(outlasted_the_retries, "the step tries more often than its retry policy allows")
        assert (await fleet.site(caught))["status"] == "provisioning"
        # A site already on the server is deleted: its teardown retries until the server is back.
        answer = await fleet.api.delete(f"/sites/{placed}", headers=fleet.account_headers)
        assert answer.status_code == 202, answer.text

        async def teardown_retrying() -> bool:
            described = await temporal_client.get_workflow_handle(site_deletion_id(placed)).describe()
            return any(
                pending.activity_type.name == "drop_site_database" and pending.attempt >= 2
                for pending in described.raw_description.pending_activities
            )

        await eventually(teardown_retrying, "the teardown's database step retries while its server is down")
    finally:
        flaky_server.start()
        await fleet.patch("steady", state="active")
    assert "flaky" not in (await check_health(fleet, temporal_client)).marked_active
    assert "flaky" in (await check_health(fleet, temporal_client)).marked_active
    flaky = (await fleet.servers())["flaky"]
    assert (flaky["state"], flaky["state_set_by"]) == ("active", "health_check")

    site = await fleet.until_status(caught, "active")
    # The health check told the waiting creation its server was back, rather than leaving it to its timer.
    history = await temporal_client.get_workflow_handle(site_creation_id(caught)).fetch_history()
    assert any(event.HasField("workflow_execution_signaled_event_attributes") for event in history.events)
    assert site["database_server"] == "flaky" and site["error_code"] is None
    assert set(site["steps"].values()) == {"done"}
    await fleet.until_status(placed, "deleted")
    assert not await fleet.holds_database("flaky", placed)
    # Each site's database is on its own server only: nothing duplicated, no orphan.
    assert await fleet.holds_database("flaky", caught) and not await fleet.holds_database("steady", caught)
    assert not await fleet.holds_database("steady", elsewhere) and not await fleet.holds_database("flaky", elsewhere)


async def test_the_health_check_never_overrides_an_operators_state(fleet: Fleet, temporal_client: Client) -> None:
    # A server nobody listens on, with no room, so no site goes there whatever its state.
    nowhere = with_password(f"postgresql+asyncpg://postgres@127.0.0.1:{free_port()}/postgres")
    added = await fleet.api.put("/site-db-servers/nowhere", json={"url": nowhere, "capacity": 0}, headers=ADMIN_HEADERS)
    assert added.status_code == 201, added.text
    await fleet.patch("nowhere", state="draining")
    await fleet.patch("steady", state="down")
    try:
        for _ in range(3):
            checked = await check_health(fleet, temporal_client)
            assert "nowhere" in checked.unreachable and not checked.marked_down and not checked.marked_active
        servers = await fleet.servers()
        assert (servers["nowhere"]["state"], servers["nowhere"]["state_set_by"]) == ("draining", "operator")
        assert (servers["steady"]["state"], servers["steady"]["state_set_by"]) == ("down", "operator")
        # An operator's `active` is no shield for a server that does not answer.
        await fleet.patch("nowhere", state="active")
        assert "nowhere" not in (await check_health(fleet, temporal_client)).marked_down
        assert "nowhere" in (await check_health(fleet, temporal_client)).marked_down
    finally:
        await fleet.patch("steady", state="active")


async def test_a_drained_server_takes_no_new_site_and_its_sites_are_still_deleted(
    fleet: Fleet, temporal_client: Client
) -> None:
    await fleet.set_free({"steady": 3, "flaky": 5})
    kept = await fleet.create_site()
    assert (await fleet.until_status(kept, "active"))["database_server"] == "flaky"
    await fleet.patch("flaky", state="draining")
    try:
        new = await fleet.create_site()
        assert (await fleet.site(new))["database_server"] == "steady"
        answer = await fleet.api.delete(f"/sites/{kept}", headers=fleet.account_headers)
        assert answer.status_code == 202, answer.text
        await fleet.until_status(kept, "deleted")
        assert not await fleet.holds_database("flaky", kept)
        await check_health(fleet, temporal_client)
        assert (await fleet.servers())["flaky"]["state"] == "draining"
        await fleet.until_status(new, "active")
    finally:
        await fleet.patch("flaky", state="active")


def test_a_flapping_server_keeps_its_state() -> None:
    """Checks that fail every other time never reach two in a row: the state stays, whichever it was."""
    for state in (SiteDbServerState.ACTIVE, SiteDbServerState.DOWN):
        health = ServerHealth(state, SiteDbServerStateSetBy.HEALTH_CHECK, failed=0, passed=0)
        for answered in [False, True] * 5:
            health = health.after_check(answered)
            assert health.state == state


async def test_a_creation_cancelled_while_it_waits_for_its_server_rolls_back_once_the_server_answers(
    fleet: Fleet, temporal_client: Client
) -> None:
    # A server whose URL leads nowhere yet, with the most room: the next site goes there and waits for it.
    late = {"url": with_password(f"postgresql+asyncpg://postgres@127.0.0.1:{free_port()}/postgres"), "capacity": 100}
    added = await fleet.api.put("/site-db-servers/late", json=late, headers=ADMIN_HEADERS)
    assert added.status_code == 201, added.text
    # Nowhere else to go, the site waits for `late` rather than moving.
    await fleet.patch("steady", state="draining")
    await fleet.patch("flaky", state="draining")
    try:
        site_id = await fleet.create_site()
        assert (await fleet.site(site_id))["database_server"] == "late"

        async def waiting() -> bool:
            return await unreachable_failures(temporal_client, site_id) >= 1

        await eventually(waiting, "the database step finds its server unreachable")
        answer = await fleet.api.delete(f"/sites/{site_id}", headers=fleet.account_headers)
        assert answer.status_code == 202, answer.text

        async def undo_retrying() -> bool:
            described = await temporal_client.get_workflow_handle(site_creation_id(site_id)).describe()
            return any(
                pending.activity_type.name == "drop_site_database" and pending.attempt >= 2
                for pending in described.raw_description.pending_activities
            )

        await eventually(undo_retrying, "the cancelled creation's database undo retries while its server is down")
        assert (await fleet.site(site_id))["status"] == "rolling_back"
        # The server answers at last (here: its URL now leads to a live one), and the site goes for good.
        late["url"] = fleet.urls["flaky"]
        replaced = await fleet.api.put("/site-db-servers/late", json=late, headers=ADMIN_HEADERS)
        assert replaced.status_code == 200, replaced.text
        await fleet.until_status(site_id, "deleted")
        assert not await fleet.holds_database("flaky", site_id)
    finally:
        await fleet.patch("late", state="draining")
        await fleet.patch("steady", state="active")
        await fleet.patch("flaky", state="active")
