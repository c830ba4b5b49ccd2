"""A caller of the deletion contract, as the gateway's deletion will be: a workflow that calls the activity type
DeleteSubjectData on a service's own task queue and returns what it read of the response."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from lifecycle.deletion.v1.service_pb2 import DeleteRequest, DeleteResponse


@workflow.defn(name="ContractCaller")
class ContractCaller:
    @workflow.run
    async def run(self, service_queue: str, request: DeleteRequest) -> DeleteResponse:
        return await workflow.execute_activity(
            "DeleteSubjectData",
            request,
            task_queue=service_queue,
            result_type=DeleteResponse,
            start_to_close_timeout=timedelta(seconds=30),
            # One try: a service that cannot read the request fails the call at once, for the test to see.
            retry_policy=RetryPolicy(maximum_attempts=1),
        )
