"""A caller of ExportSubjectData alone, for a test that kills the service mid-call: a workflow that calls it on the
service's own queue with a short heartbeat timeout, so the attempt a kill cut short is retried within seconds."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from lifecycle.deletion.registry import EXPORT_SUBJECT_DATA
    from lifecycle.deletion.v1.service_pb2 import ExportRequest, ExportResponse

# The gateway allows a minute (SERVICE_EXPORT); a test waits for less. The services beat every second.
HEARTBEAT_TIMEOUT = timedelta(seconds=3)


@workflow.defn(name="ExportCall")
class ExportCall:
    @workflow.run
    async def run(self, service_queue: str, request: ExportRequest) -> ExportResponse:
        return await workflow.execute_activity(
            EXPORT_SUBJECT_DATA,
            request,
            task_queue=service_queue,
            result_type=ExportResponse,
            start_to_close_timeout=timedelta(minutes=5),
            heartbeat_timeout=HEARTBEAT_TIMEOUT,
            retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_attempts=5),
        )
