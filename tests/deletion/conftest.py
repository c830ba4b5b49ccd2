"""Fixtures of the deletion tests."""

from __future__ import annotations

import pytest_asyncio
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.testing import WorkflowEnvironment

from lifecycle import search_attributes


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
