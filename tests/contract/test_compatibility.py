"""Both directions of the deletion contract's compatibility, through a real Temporal server: the current caller
(ContractCaller, on the session's client and so the project's data converter) and stand-in services built from
the previous and the next version of the .proto, each a process of its own (versioned_service.py).

- A newer service answers a DeleteResponse with a field this caller does not know: the caller reads the rest.
- An older service, built without DeleteRequest.rows_per_second and DeleteResponse.measured_rows_per_second,
  reads the current request (ignoring the field it does not know) and its answer reads as the default 0.

Both hold on either transport: the service's own task queue, or the contract's Nexus service, the stand-in running
in a namespace of its own behind an endpoint the operator's CLI created.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle
from temporalio.worker import Worker

from devstack.proto_codegen import compile_protos
from devstack.search_team import SERVICE_NAMESPACE, create_nexus_endpoint
from lifecycle.deletion.v1.service_pb2 import DeleteRequest, DeleteResponse, Subject
from tests.contract.caller import ContractCaller
from tests.contract.versioned_service import BYTES_FREED, MEASURED_ROWS_PER_SECOND
from tests.eventually import eventually
from tests.processes import ChildProcess

TEST_PROTOS = Path(__file__).parent / "protos"
CLOSED = {
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED,
}


@dataclass(frozen=True)
class Service:
    task_queue: str
    process: ChildProcess
    # The Nexus endpoint to its queue in its own namespace; empty when it answers on a queue of the caller's.
    endpoint: str = ""


@pytest.fixture
def service(
    request: pytest.FixtureRequest, temporal_client: Client, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Service]:
    """A stand-in service built from tests/contract/protos/<version>, polling a task queue of its own; with
    `nexus`, in the team's namespace, behind an endpoint to that queue."""
    version, transport = request.param
    generated = tmp_path_factory.mktemp(f"contract-{version}")
    compile_protos(generated, TEST_PROTOS / version)
    suffix = uuid.uuid4().hex[:8]
    queue, endpoint = f"contract-{version}-{suffix}", ""
    address = temporal_client.service_client.config.target_host
    module = f"contract_{version}_pb2"
    arguments = [address, queue, str(generated), module]
    if transport == "nexus":
        endpoint = f"contract-{version}-{suffix}"
        create_nexus_endpoint(address, endpoint, SERVICE_NAMESPACE, queue)
        arguments.append(SERVICE_NAMESPACE)
    process = ChildProcess(
        [sys.executable, "-m", "tests.contract.versioned_service", *arguments],
        env=dict(os.environ),
        log_path=generated / "service.log",
        forked=False,
    )
    process.start()
    yield Service(queue, process, endpoint)
    process.terminate()


def current_request() -> DeleteRequest:
    """Every field set, rows_per_second included: JSON protobuf leaves out fields at their default."""
    return DeleteRequest(
        deletion_id=f"bot-deletion-{uuid.uuid4()}",
        subject=Subject(kind=Subject.KIND_BOT, id=str(uuid.uuid4())),
        cursor="resume-here",
        max_rows=1234,
        rows_per_second=500,
        max_duration_ms=5000,
    )


async def call(temporal_client: Client, service: Service, request: DeleteRequest) -> DeleteResponse:
    """The caller's answer; a failed workflow task (a response it could not read) fails the test at once rather
    than being retried until the test's time runs out."""
    queue = f"contract-caller-{uuid.uuid4().hex[:8]}"
    async with Worker(temporal_client, task_queue=queue, workflows=[ContractCaller]):
        handle: WorkflowHandle[ContractCaller, DeleteResponse] = await temporal_client.start_workflow(
            ContractCaller.run,
            args=[service.task_queue, request, service.endpoint],
            id=f"contract-caller-{uuid.uuid4()}",
            task_queue=queue,
        )

        async def outcome() -> str | None:
            assert service.process.process and service.process.process.poll() is None, service.process.log()
            async for event in handle.fetch_history_events():
                if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
                    failure = event.workflow_task_failed_event_attributes.failure
                    return f"workflow task failed: {failure.message}: {failure.cause.message}"
                if event.event_type in CLOSED:
                    return "closed"
            return None

        assert await eventually(outcome, "the caller's run to close or fail a workflow task") == "closed"
        return await handle.result()


def expected(request: DeleteRequest, measured_rows_per_second: float = 0.0) -> DeleteResponse:
    """What the stand-in answers: the request's max_rows, deletion id, subject id and cursor echoed back."""
    cursor = f"{request.deletion_id}/{request.subject.id}/{request.cursor}"
    return DeleteResponse(
        rows_deleted=request.max_rows, cursor=cursor, done=True, measured_rows_per_second=measured_rows_per_second
    )


@pytest.mark.parametrize("service", [("next", "queue"), ("next", "nexus")], indirect=True, ids=["queue", "nexus"])
async def test_the_caller_reads_a_newer_services_response(temporal_client: Client, service: Service) -> None:
    request = current_request()
    response = await call(temporal_client, service, request)
    assert response == expected(request, measured_rows_per_second=MEASURED_ROWS_PER_SECOND)
    # The newer field was sent, and dropped by the reader that does not know it.
    assert BYTES_FREED and "bytes_freed" not in DeleteResponse.DESCRIPTOR.fields_by_name


@pytest.mark.parametrize(
    "service", [("previous", "queue"), ("previous", "nexus")], indirect=True, ids=["queue", "nexus"]
)
async def test_an_older_service_reads_the_current_request_and_its_answer_reads_as_defaults(
    temporal_client: Client, service: Service
) -> None:
    request = current_request()
    response = await call(temporal_client, service, request)
    # rows_per_second reached a service that does not know it and did not stop it; measured_rows_per_second,
    # which that service cannot send, reads as its default.
    assert response == expected(request)
    assert response.measured_rows_per_second == 0
