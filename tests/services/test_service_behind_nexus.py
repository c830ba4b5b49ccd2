"""A project service started with `--namespace` serves the deletion contract from that namespace alone, through the
Nexus endpoint an operator creates to its queue with the CLI: a slice deleted by the operation's workflow there,
and the count answered synchronously, called from a workflow of the gateway's namespace; the gateway's namespace
sees no poller of the service's queue."""

from __future__ import annotations

import asyncio
import sys
import uuid
from datetime import timedelta
from pathlib import Path

from temporalio import workflow
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client
from temporalio.worker import Worker

with workflow.unsafe.imports_passed_through():
    from devstack.postgres import PostgresServer
    from devstack.search_team import SERVICE_NAMESPACE, create_nexus_endpoint
    from lifecycle.deletion.nexus_service import DeletionNexusService
    from lifecycle.deletion.v1.service_pb2 import DeleteRequest, Subject, VerifyRequest
    from lifecycle.settings import Settings
    from services.integrations import INTEGRATIONS
    from services.runtime.database import database_url_variable
    from services.runtime.seeding import seed_rows
    from tests.eventually import eventually
    from tests.processes import ChildProcess, settings_environment
    from tests.services.own_database import own_service_database

ROWS = 40  # per table


@workflow.defn(name="DeleteThroughEndpoint")
class DeleteThroughEndpoint:
    """A slice through the endpoint, then the count: (rows deleted, done, rows left)."""

    @workflow.run
    async def run(self, endpoint: str, bot_id: str) -> tuple[int, bool, int]:
        nexus = workflow.create_nexus_client(endpoint=endpoint, service=DeletionNexusService)
        subject = Subject(kind=Subject.KIND_BOT, id=bot_id)
        deleted = await nexus.execute_operation(
            DeletionNexusService.delete_subject_data,
            DeleteRequest(deletion_id=workflow.info().workflow_id, subject=subject),
            schedule_to_close_timeout=timedelta(minutes=1),
        )
        left = await nexus.execute_operation(
            DeletionNexusService.verify_subject_erased,
            VerifyRequest(deletion_id=workflow.info().workflow_id, subject=subject),
            schedule_to_close_timeout=timedelta(minutes=1),
        )
        return deleted.rows_deleted, deleted.done, left.remaining_rows


async def test_a_service_in_a_namespace_of_its_own_serves_the_contract_through_nexus(
    settings: Settings, temporal_client: Client, postgres_server: PostgresServer, tmp_path: Path
) -> None:
    suffix = uuid.uuid4().hex[:8]
    url = await own_service_database(postgres_server, INTEGRATIONS, "own_namespace")
    bot_id = str(uuid.uuid4())
    await seed_rows(INTEGRATIONS, url, [bot_id], dict.fromkeys(INTEGRATIONS.seeds, ROWS))
    queue, caller_queue = f"integrations-{suffix}", f"nexus-caller-{suffix}"
    address = temporal_client.service_client.config.target_host
    await asyncio.to_thread(create_nexus_endpoint, address, f"integrations-{suffix}", SERVICE_NAMESPACE, queue)
    service = ChildProcess(
        [sys.executable, "-m", "services.integrations", "--task-queue", queue, "--namespace", SERVICE_NAMESPACE],
        settings_environment(settings, **{database_url_variable(INTEGRATIONS.name): url}),
        tmp_path / "integrations.log",
    )
    service.start()
    try:
        await eventually(lambda: f"serving {queue} in {SERVICE_NAMESPACE}" in service.log(), "the service polls")
        async with Worker(temporal_client, task_queue=caller_queue, workflows=[DeleteThroughEndpoint]):
            answer = await temporal_client.execute_workflow(
                DeleteThroughEndpoint.run,
                args=[f"integrations-{suffix}", bot_id],
                id=f"delete-through-endpoint-{suffix}",
                task_queue=caller_queue,
            )
        in_gateway_namespace = await temporal_client.workflow_service.describe_task_queue(
            DescribeTaskQueueRequest(
                namespace=temporal_client.namespace,
                task_queue=TaskQueue(name=queue),
                task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
            )
        )
    finally:
        service.kill()

    assert list(answer) == [ROWS * len(INTEGRATIONS.seeds), True, 0]
    assert list(in_gateway_namespace.pollers) == []
