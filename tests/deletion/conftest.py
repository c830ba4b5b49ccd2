"""Fixtures of the deletion tests."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

import asyncpg
import httpx
import pytest
import pytest_asyncio
from temporalio.client import Client

from activities.resources import ActivityResources
from devstack.seed import asyncpg_dsn
from lifecycle.settings import Settings
from tests.conftest import ADMIN_HEADERS, ContractServices
from tests.deletion.processor_servers import ProcessorServer, Registered, processor_server

# register(kind) -> (name, task queue) of a deletion service it registered.
Register = Callable[[str], Awaitable[tuple[str, str]]]


@pytest_asyncio.fixture
async def resources(settings: Settings, temporal_client: Client) -> AsyncIterator[ActivityResources]:
    """What a worker's activities share, for calling one directly in an ActivityEnvironment."""
    created = ActivityResources.create(settings, temporal_client)
    try:
        yield created
    finally:
        await created.close()


@pytest_asyncio.fixture
async def conn(settings: Settings) -> AsyncIterator[asyncpg.Connection]:
    """A plain connection to the test database, to arrange rows and read what an activity left."""
    connection = await asyncpg.connect(asyncpg_dsn(settings.database_url))
    try:
        yield connection
    finally:
        await connection.close()


@pytest_asyncio.fixture
async def register(api: httpx.AsyncClient) -> AsyncIterator[Register]:
    """Registers a service through the API under a name and a task queue of its own: (name, queue). Each is
    retired afterwards, so no later deletion of the session calls it."""
    names: list[str] = []

    async def registered(kind: str) -> tuple[str, str]:
        suffix = uuid.uuid4().hex[:8]
        name, queue = f"{kind}-{suffix}", f"{kind}-queue-{suffix}"
        answer = await api.put(
            f"/deletion-services/{name}",
            json={"task_queue": queue, "contract": "lifecycle.deletion.v1"},
            headers=ADMIN_HEADERS,
        )
        assert answer.status_code == 201, answer.text
        names.append(name)
        return name, queue

    yield registered
    for name in names:
        assert (await api.delete(f"/deletion-services/{name}", headers=ADMIN_HEADERS)).status_code == 204


@pytest.fixture(scope="session", autouse=True)
def _services_running(contract_services: ContractServices) -> ContractServices:
    """Every deletion test runs with the project's services registered and polling, also those that run their own
    gateway worker (own_worker) rather than the session's."""
    return contract_services


@pytest_asyncio.fixture(scope="session")
async def processors_http() -> AsyncIterator[ProcessorServer]:
    """The processors that answer from the start, one path each, for the whole session."""
    async with processor_server() as server:
        yield server


@pytest_asyncio.fixture
async def registered(api: httpx.AsyncClient) -> AsyncIterator[Registered]:
    registry = Registered(api)
    yield registry
    for name in registry.names:
        assert (await api.delete(f"/processors/{name}", headers=ADMIN_HEADERS)).status_code == 204
