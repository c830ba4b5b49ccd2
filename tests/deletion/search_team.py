"""The search index (examples/search_index) as a test runs it: its worker process, and the index run as its own team
runs it, in the team's namespace behind a Nexus endpoint an operator creates with the real CLI."""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

import httpx
from temporalio.client import Client, WorkflowExecutionStatus

from devstack.search_team import SERVICE_NAMESPACE, create_nexus_endpoint
from examples.search_index.store import SearchIndex
from lifecycle.data_converter import DATA_CONVERTER
from lifecycle.deletion.workflow_types import bot_deletion_id
from tests.conftest import ADMIN_HEADERS
from tests.processes import ChildProcess


@dataclass
class RegisteredIndex:
    name: str
    task_queue: str
    index: SearchIndex
    process: ChildProcess
    # The Nexus endpoint into its team's namespace it is registered with; empty on a task queue.
    endpoint: str = ""

    def start(self) -> None:
        self.process.start()

    def stop(self) -> None:
        if self.process.process is not None and self.process.process.poll() is None:
            self.process.terminate()


def index_process(client: Client, queue: str, store: Path, *options: str, **env: str) -> ChildProcess:
    """The search index's worker process, on `queue`, keeping its store in `store`."""
    address = client.service_client.config.target_host
    arguments = ["--address", address, "--task-queue", queue, "--store", str(store), *options]
    return ChildProcess(
        [sys.executable, "-m", "examples.search_index", *arguments],
        env={**os.environ, **env},
        log_path=store.parent / f"{store.name}-{queue}.log",
    )


async def behind_an_endpoint(
    api: httpx.AsyncClient,
    client: Client,
    name: str,
    store: Path,
    *,
    endpoint_created: bool = True,
    env: dict[str, str] | None = None,
) -> RegisteredIndex:
    """The search index as its own team runs it: its worker process (not started yet) polls a queue of the team's
    namespace and is given nothing of the gateway's namespace; the service is registered by a Nexus endpoint to that
    queue alone, which the operator creates with the real CLI (create_endpoint), first unless told not to."""
    suffix = uuid.uuid4().hex[:8]
    queue, endpoint = f"team-queue-{suffix}", f"team-endpoint-{suffix}"
    process = index_process(client, queue, store, "--name", name, "--namespace", SERVICE_NAMESPACE, **(env or {}))
    service = RegisteredIndex(name, queue, SearchIndex(store), process, endpoint)
    if endpoint_created:
        await create_endpoint(client, service)
    await register_by_endpoint(api, service)
    return service


async def register_by_endpoint(api: httpx.AsyncClient, service: RegisteredIndex) -> None:
    """The service registered by its Nexus endpoint, as an admin does."""
    answer = await api.put(
        f"/deletion-services/{service.name}",
        json={"nexus_endpoint": service.endpoint, "contract": "lifecycle.deletion.v1"},
        headers=ADMIN_HEADERS,
    )
    assert answer.status_code in (200, 201), answer.text


async def create_endpoint(client: Client, service: RegisteredIndex) -> None:
    address = client.service_client.config.target_host
    await asyncio.to_thread(create_nexus_endpoint, address, service.endpoint, SERVICE_NAMESPACE, service.task_queue)


async def team_client(client: Client) -> Client:
    """A client of the team's namespace on the same server: what the team sees of its own workflows."""
    address = client.service_client.config.target_host
    return await Client.connect(address, namespace=SERVICE_NAMESPACE, data_converter=DATA_CONVERTER)


async def slice_statuses(team: Client, bot_id: str) -> list[WorkflowExecutionStatus | None]:
    """The statuses of the slice workflows the bot's deletion started in the team's namespace."""
    slices = (
        'WorkflowType = "DeleteSubjectDataOperation"'
        f' AND WorkflowId STARTS_WITH "delete-slice-{bot_deletion_id(bot_id)}-"'
    )
    return [execution.status async for execution in team.list_workflows(slices)]
