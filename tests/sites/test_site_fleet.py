"""Sites on a fleet of database servers (lifecycle/sites/servers.py): the admin catalog, placement by free
capacity, drained and down servers, a reset that keeps a site where it was placed, and a teardown that drops the
database from the server the site is on.

Two real servers: the session's PostgreSQL (as `one`) and a second one of this module's (as `two`). The catalog is
a product database of this module's, so the session's own `default` server and its sites are left alone; `default`
is marked down here, so it takes nothing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
import pytest_asyncio
from temporalio.client import Client

from devstack.ports import free_port
from devstack.postgres import PostgresServer
from lifecycle.settings import Settings
from lifecycle.sites.workflow_types import site_creation_id
from tests.conftest import ADMIN_HEADERS
from tests.eventually import eventually
from tests.operators.cli import AsyncCli
from tests.sites.fleet import PASSWORD, Fleet, fleet_of
from tests.sites.helpers import start_creation
from tests.workers import own_queue, own_worker


@pytest.fixture(scope="module")
def second_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostgresServer]:
    server = PostgresServer(tmp_path_factory.mktemp("postgres-two"), free_port(), durable=False)
    server.start()
    yield server
    server.stop()


@pytest_asyncio.fixture(scope="module")
async def fleet(
    settings: Settings, postgres_server: PostgresServer, second_server: PostgresServer, temporal_client: Client
) -> AsyncIterator[Fleet]:
    urls = {"one": postgres_server.url(), "two": second_server.url()}
    async with fleet_of(settings, postgres_server, temporal_client, urls) as fleet:
        yield fleet


@pytest.fixture(scope="module")
def cli(temporal_client: Client) -> AsyncCli:
    return AsyncCli(temporal_client.service_client.config.target_host)


def _is_problem(answer: httpx.Response, status: int) -> None:
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"].startswith("application/problem+json"), answer.headers
    assert PASSWORD not in answer.text


async def test_the_catalog_never_answers_a_credential_and_refuses_bad_input(fleet: Fleet) -> None:
    servers = await fleet.servers()
    assert servers["default"]["state"] == "down"
    assert set(servers["one"]) == {"name", "capacity", "pool_target", "state", "state_set_by", "sites", "pool_ready"}
    assert servers["one"]["state_set_by"] == "operator"
    assert servers["one"]["pool_ready"] == 0
    put = fleet.api.put
    good = {"url": fleet.urls["one"], "capacity": 5}
    _is_problem(await put("/site-db-servers/Not_A_Slug", json=good, headers=ADMIN_HEADERS), 422)
    for bad in (
        {**good, "capacity": -1},
        {**good, "pool_target": -1},
        {**good, "url": f"http://admin:{PASSWORD}@example.com/"},
        {**good, "url": f"postgresql://admin:{PASSWORD}@/postgres"},
        {**good, "url": "not a url"},
        {"capacity": 5},
        {**good, "state": "active"},
    ):
        _is_problem(await put("/site-db-servers/three", json=bad, headers=ADMIN_HEADERS), 422)
    _is_problem(await put("/site-db-servers/three", json=good), 401)
    _is_problem(await put("/site-db-servers/three", json=good, headers=fleet.account_headers), 403)
    patch = fleet.api.patch
    _is_problem(await patch("/site-db-servers/nowhere", json={"state": "down"}, headers=ADMIN_HEADERS), 404)
    _is_problem(await patch("/site-db-servers/one", json={"state": "gone"}, headers=ADMIN_HEADERS), 422)
    _is_problem(await patch("/site-db-servers/one", json={}, headers=ADMIN_HEADERS), 422)
    _is_problem(await patch("/site-db-servers/one", json={"url": good["url"]}, headers=ADMIN_HEADERS), 422)
    assert "three" not in await fleet.servers()


async def test_sites_go_to_the_most_free_server_and_their_teardown_drops_them_there(fleet: Fleet) -> None:
    await fleet.set_free({"one": 3, "two": 5})
    before = await fleet.servers()
    placed = []
    for _ in range(3):
        site_id = await fleet.create_site()
        placed.append((site_id, (await fleet.site(site_id))["database_server"]))
    # Five free against three, four against three, then a tie, which goes to the first name.
    assert [server for _, server in placed] == ["two", "two", "one"]
    after = await fleet.servers()
    assert after["one"]["sites"] == before["one"]["sites"] + 1
    assert after["two"]["sites"] == before["two"]["sites"] + 2
    for site_id, server in placed:
        await fleet.until_status(site_id, "active")
        other = "one" if server == "two" else "two"
        assert await fleet.holds_database(server, site_id) and not await fleet.holds_database(other, site_id)

    gone, server = placed[0]
    answer = await fleet.api.delete(f"/sites/{gone}", headers=fleet.account_headers)
    assert answer.status_code == 202, answer.text
    await fleet.until_status(gone, "deleted")
    assert not await fleet.holds_database(server, gone)
    assert await fleet.holds_database(server, placed[1][0])


async def test_a_drained_or_down_server_takes_no_new_site_and_keeps_its_own(fleet: Fleet) -> None:
    await fleet.set_free({"one": 1, "two": 5})
    kept = await fleet.create_site()
    assert (await fleet.until_status(kept, "active"))["database_server"] == "two"
    assert (await fleet.patch("two", state="draining"))["state"] == "draining"
    site_id = await fleet.create_site()
    assert (await fleet.site(site_id))["database_server"] == "one"
    await fleet.until_status(site_id, "active")
    # `one` is full now, and `two` drained: no server has room, and the site fails saying so.
    refused = await fleet.create_site()
    site = await fleet.until_status(refused, "rolled_back")
    assert site["database_server"] is None
    assert site["error_code"] == "no_database_server"
    assert not await fleet.holds_database("one", refused) and not await fleet.holds_database("two", refused)
    # The drained server's site is still whole.
    assert (await fleet.site(kept))["status"] == "active" and await fleet.holds_database("two", kept)
    await fleet.patch("two", state="down")
    assert (await fleet.site(kept))["status"] == "active" and await fleet.holds_database("two", kept)
    await fleet.patch("two", state="active")


async def test_a_reset_after_placement_keeps_the_site_on_its_server(
    fleet: Fleet, temporal_client: Client, cli: AsyncCli
) -> None:
    await fleet.set_free({"one": 5, "two": 3})
    queue = own_queue(fleet.settings)
    site_id = await fleet.record_site()
    # The database step hangs on its first attempt, so the reset lands after the placement and before the database.
    async with own_worker(queue, temporal_client, faults="create_site_database=delay:60:1"):
        await start_creation(temporal_client, queue.site_task_queue, site_id)

        async def placed() -> str | None:
            server: str | None = (await fleet.site(site_id))["database_server"]
            return server

        server = await eventually(placed, "the site is placed")
    assert server == "one"
    # Were the site placed again, it would go to `two` now.
    await fleet.patch("one", state="draining")
    handle = temporal_client.get_workflow_handle(site_creation_id(site_id))
    first_run = (await handle.describe()).run_id
    await cli.run("workflow", "reset", "--workflow-id", handle.id, "--type", "FirstWorkflowTask", "--reason", "test")
    async with own_worker(queue, temporal_client):
        latest = temporal_client.get_workflow_handle(handle.id)
        assert (await latest.describe()).run_id != first_run
        assert (await latest.result())["status"] == "active"
    assert (await fleet.site(site_id))["database_server"] == "one"
    assert await fleet.holds_database("one", site_id) and not await fleet.holds_database("two", site_id)
