"""Operator tests: the `temporal` CLI against the session dev server, plus workers on queues of their own."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import pytest
from temporalio.client import Client

from activities.resources import ActivityResources
from lifecycle.settings import Settings
from tests.operators.cli import AsyncCli

# A site row as the API records it, for runs started directly.
from tests.sites.conftest import site_id  # noqa: F401
from worker import LifecycleWorkers, build_worker

QueueWorker = Callable[..., AbstractAsyncContextManager[LifecycleWorkers]]


@pytest.fixture(scope="session")
def cli(temporal_client: Client) -> AsyncCli:
    return AsyncCli(temporal_client.service_client.config.target_host)


@pytest.fixture
def task_queue() -> str:
    """A queue nobody polls until the test starts `queue_worker`: runs wait there for the operator."""
    return f"ops-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def queue_worker(settings: Settings, temporal_client: Client, task_queue: str) -> QueueWorker:
    """`async with queue_worker("x=permanent")`: a real worker on `task_queue`, optionally with faults."""

    @asynccontextmanager
    async def start(faults: str | None = None) -> AsyncIterator[LifecycleWorkers]:
        own = settings.model_copy(
            update={"fault_injection": faults, "task_queue": task_queue, "site_task_queue": task_queue}
        )
        resources = ActivityResources.create(own, temporal_client)
        try:
            async with build_worker(temporal_client, resources, own) as running:
                yield running
        finally:
            await resources.engine.dispose()

    return start
