"""Fixtures of the deletion tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest
import pytest_asyncio
from temporalio.client import Client

from activities.resources import ActivityResources
from devstack.seed import asyncpg_dsn
from lifecycle.settings import Settings
from tests.conftest import ContractServices


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


@pytest.fixture(scope="session", autouse=True)
def _services_running(contract_services: ContractServices) -> ContractServices:
    """Every deletion test runs with the project's services registered and polling, also those that run their own
    gateway worker (own_worker) rather than the session's."""
    return contract_services
