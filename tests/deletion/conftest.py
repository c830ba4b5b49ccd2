"""Fixtures of the deletion tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest_asyncio
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from activities.resources import ActivityResources
from devstack.seed import asyncpg_dsn
from lifecycle import search_attributes
from lifecycle.settings import Settings


@pytest_asyncio.fixture
async def time_skipping_env(time_skipping_env: WorkflowEnvironment) -> WorkflowEnvironment:
    """The shared time-skipping server, plus the custom search attributes the workflows upsert.

    The test server lacks ListSearchAttributes, so `search_attributes.register` cannot run there; adding
    them directly works.
    """
    client = time_skipping_env.client
    await client.operator_service.add_search_attributes(
        AddSearchAttributesRequest(
            namespace=client.namespace,
            search_attributes={key.name: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD for key in search_attributes.ALL},
        )
    )
    return time_skipping_env


@pytest_asyncio.fixture
async def resources(settings: Settings, temporal_client: Client) -> AsyncIterator[ActivityResources]:
    """What a worker's activities share, for calling one directly in an ActivityEnvironment."""
    created = ActivityResources.create(settings, temporal_client)
    try:
        yield created
    finally:
        await created.engine.dispose()


@pytest_asyncio.fixture
async def conn(settings: Settings) -> AsyncIterator[asyncpg.Connection]:
    """A plain connection to the test database, to arrange rows and read what an activity left."""
    connection = await asyncpg.connect(asyncpg_dsn(settings.database_url))
    try:
        yield connection
    finally:
        await connection.close()
