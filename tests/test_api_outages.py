"""The API as a real process survives its dependencies' outages: it starts while Temporal or PostgreSQL is down,
answers 503 problem details with Retry-After meanwhile, /readyz saying only "not ready" (the missing dependency
and why go to the log), and recovers
by itself, without a restart, once the dependency is back. Oversized bodies, chunked ones included, get 413.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio

from devstack.ports import free_port
from devstack.postgres import PostgresServer
from devstack.temporal_server import TemporalDevServer
from lifecycle.migrate import upgrade_async
from lifecycle.settings import Settings
from tests.conftest import ADMIN_HEADERS
from tests.eventually import eventually
from tests.processes import ApiProcess

# How long a recovered dependency may take to be noticed: the API retries Temporal every second, and the
# pool's checkout drops connections that PostgreSQL closed (lifecycle/db/engine.py).
RECOVERY_LIMIT_SECONDS = 30.0


@pytest.fixture(scope="module")
def own_postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostgresServer]:
    """A PostgreSQL of this module's own, so that stopping it disturbs no other test."""
    server = PostgresServer(tmp_path_factory.mktemp("outage-postgres"), free_port(), durable=False)
    server.start()
    server.create_database("lifecycle")
    yield server
    server.stop()


@pytest_asyncio.fixture(scope="module")
async def outage_settings(own_postgres: PostgresServer, settings: Settings) -> Settings:
    database_url = own_postgres.url("lifecycle")
    await upgrade_async(database_url)
    return settings.model_copy(update={"database_url": database_url})


@pytest_asyncio.fixture
async def api_process(tmp_path: Path) -> AsyncIterator[Callable[[Settings], ApiProcess]]:
    started: list[ApiProcess] = []

    def start(settings: Settings) -> ApiProcess:
        process = ApiProcess(settings, tmp_path / f"api-{len(started)}.log")
        process.start()
        started.append(process)
        return process

    yield start
    for process in started:
        process.terminate()


def assert_not_ready(ready: httpx.Response, api: ApiProcess, down: str, up: str) -> None:
    """/readyz tells anyone only that it is not ready; the log names the dependency and the driver's error."""
    assert_unavailable(ready)
    assert ready.json()["detail"] == "not ready"
    assert down not in ready.text and "Error" not in ready.text
    reasons = [line for line in api.log().splitlines() if "not ready:" in line]
    assert reasons, api.log()[-2000:]
    assert f"{down} unavailable: " in reasons[-1] and up not in reasons[-1]


def assert_unavailable(response: httpx.Response) -> None:
    assert response.status_code == 503, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert int(response.headers["retry-after"]) > 0
    assert response.json()["status"] == 503


async def answers(probe: Callable[[], Awaitable[httpx.Response]], status: int, what: str) -> httpx.Response:
    def got(response: httpx.Response) -> bool:
        return response.status_code == status

    return await eventually(probe, what, until=got, within=RECOVERY_LIMIT_SECONDS)


@pytest.mark.long
async def test_starts_while_temporal_is_down_and_reconnects_once_it_is_up(
    outage_settings: Settings, api_process: Callable[[Settings], ApiProcess], tmp_path: Path
) -> None:
    temporal = TemporalDevServer(None, port=free_port(), ui_port=None, log_path=tmp_path / "temporal.log")
    # Nothing listens on the port yet: the API starts all the same.
    api = api_process(outage_settings.model_copy(update={"temporal_address": temporal.address}))
    async with httpx.AsyncClient(base_url=api.url, timeout=30) as http:
        created = await http.post("/accounts", json={"name": "Ada", "email": "ada@example.com"}, headers=ADMIN_HEADERS)
        assert created.status_code == 201, created.text  # PostgreSQL alone is enough for this one
        headers = {"Authorization": f"Bearer {created.json()['api_key']}"}
        bot = (await http.post("/bots", json={"name": "doomed"}, headers=headers)).json()
        later = (await http.post("/bots", json={"name": "doomed later"}, headers=headers)).json()

        assert_unavailable(await http.delete(f"/bots/{bot['id']}", headers=headers))
        assert_unavailable(await http.delete(f"/bots/{bot['id']}", headers=headers))  # a retry, not a cached 500
        assert_not_ready(await http.get("/readyz"), api, down="temporal", up="postgres")

        temporal.start()
        try:
            accepted = await answers(
                lambda: http.delete(f"/bots/{bot['id']}", headers=headers), 202, "bot deletion after Temporal is up"
            )
            assert accepted.json()["status"] == "accepted"
            await answers(lambda: http.get("/readyz"), 200, "ready after Temporal is up")
        finally:
            temporal.stop()
        # And down again: the connected client reports UNAVAILABLE, still a 503, and the status still answers,
        # as recorded in PostgreSQL: requested, and no worker ever ran it.
        assert_unavailable(await http.delete(f"/bots/{later['id']}", headers=headers))
        status = await http.get(f"/bots/{bot['id']}/deletion", headers=headers)
        assert status.status_code == 200, status.text
        assert status.json()["status"] == "accepted"


async def test_starts_while_postgres_is_down_and_reconnects_once_it_is_up(
    outage_settings: Settings, own_postgres: PostgresServer, api_process: Callable[[Settings], ApiProcess]
) -> None:
    own_postgres.stop()
    try:
        api = api_process(outage_settings)
        async with httpx.AsyncClient(base_url=api.url, timeout=30) as http:
            assert_unavailable(
                await http.post("/accounts", json={"name": "Bo", "email": "bo@example.com"}, headers=ADMIN_HEADERS)
            )
            assert_unavailable(await http.get("/account", headers={"Authorization": "Bearer lk_whatever"}))
            assert_not_ready(await http.get("/readyz"), api, down="postgres", up="temporal")
    finally:
        own_postgres.start()
    async with httpx.AsyncClient(base_url=api.url, timeout=30) as http:
        created = await answers(
            lambda: http.post("/accounts", json={"name": "Bo", "email": "bo@example.com"}, headers=ADMIN_HEADERS),
            201,
            "account creation after PostgreSQL is up",
        )
        headers = {"Authorization": f"Bearer {created.json()['api_key']}"}
        assert (await http.get("/account", headers=headers)).status_code == 200
        assert (await http.get("/readyz")).status_code == 200


async def test_oversized_bodies_get_413_chunked_or_not(
    outage_settings: Settings, api_process: Callable[[Settings], ApiProcess]
) -> None:
    api = api_process(outage_settings)
    oversized = b'{"name": "' + b"x" * (outage_settings.max_request_body_bytes + 1) + b'", "email": "a@example.com"}'

    async def chunked() -> AsyncIterator[bytes]:
        for start in range(0, len(oversized), 8192):
            yield oversized[start : start + 8192]

    async with httpx.AsyncClient(base_url=api.url, timeout=30) as http:
        headers = {**ADMIN_HEADERS, "content-type": "application/json"}
        declared = await http.post("/accounts", content=oversized, headers=headers)
        streamed = await http.post("/accounts", content=chunked(), headers=headers)
        small = await http.post("/accounts", json={"name": "Cy", "email": "cy@example.com"}, headers=ADMIN_HEADERS)
    for response in (declared, streamed):
        assert response.status_code == 413, response.text
        assert response.headers["content-type"] == "application/problem+json"
    assert streamed.request.headers["transfer-encoding"] == "chunked"
    assert small.status_code == 201, small.text
