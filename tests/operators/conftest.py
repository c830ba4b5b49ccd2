"""Operator tests: the `temporal` CLI against the session dev server, plus workers on queues of their own
(tests/workers.py)."""

from __future__ import annotations

import uuid

import pytest
from temporalio.client import Client

from tests.conftest import ContractServices
from tests.operators.cli import AsyncCli

# A site row as the API records it, for runs started directly.
from tests.sites.conftest import site_id  # noqa: F401


@pytest.fixture(scope="session")
def cli(temporal_client: Client) -> AsyncCli:
    return AsyncCli(temporal_client.service_client.config.target_host)


@pytest.fixture
def task_queue() -> str:
    """A queue nobody polls until the test starts own_worker on it: runs wait there for the operator."""
    return f"ops-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="session", autouse=True)
def _services_running(contract_services: ContractServices) -> ContractServices:
    """The operator's paths run with the project's services registered and polling, also beside their own
    gateway worker (own_worker)."""
    return contract_services
