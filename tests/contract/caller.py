"""A caller of the deletion contract, as the gateway's deletion is: a workflow that calls DeleteSubjectData, as the
activity type on a service's own task queue or as the operation of the contract's Nexus service through an
endpoint, and returns what it read of the response."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from lifecycle.deletion.nexus_service import NEXUS_SERVICE_NAME
    from lifecycle.deletion.registry import DELETE_SUBJECT_DATA
    from lifecycle.deletion.v1.service_pb2 import DeleteRequest, DeleteResponse

ONE_TRY = timedelta(seconds=30)


@workflow.defn(name="ContractCaller")
class ContractCaller:
    @workflow.run
    async def run(self, service_queue: str, request: DeleteRequest, endpoint: str = "") -> DeleteResponse:
        if endpoint:
            nexus = workflow.create_nexus_client(endpoint=endpoint, service=NEXUS_SERVICE_NAME)
            return await nexus.execute_operation(
                DELETE_SUBJECT_DATA, request, output_type=DeleteResponse, schedule_to_close_timeout=ONE_TRY
            )
        return await workflow.execute_activity(
            DELETE_SUBJECT_DATA,
            request,
            task_queue=service_queue,
            result_type=DeleteResponse,
            start_to_close_timeout=ONE_TRY,
            # One try: a service that cannot read the request fails the call at once, for the test to see.
            retry_policy=RetryPolicy(maximum_attempts=1),
        )
