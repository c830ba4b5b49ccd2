"""The deletion contract served through Nexus by a Python service, in its own namespace, from the same activities
it serves on a task queue: one implementation answers both transports.

- `VerifySubjectErased` is synchronous: the handler calls the service's count directly, which answers well within
  Nexus's 10 s deadline (an exact count of what is left after a deletion, or an estimate in a preview).
- `DeleteSubjectData` and `ExportSubjectData` are asynchronous: each starts a workflow in the service's namespace
  that runs the service's activity of the rpc's name on the worker's own task queue, with the retries the gateway
  gives a call on a task queue. A slice may outlast the deadline (paced to its budget, waiting on locks, retried),
  an export takes hours, and cancelling the gateway's deletion cancels the operation, hence that workflow and its
  activity (which hears it at its next heartbeat).

A service's worker registers `DeletionNexusHandler(verify)` as a Nexus service handler and `OPERATION_WORKFLOWS`
beside its activities (examples/search_index). `verify` is its count as a plain coroutine: the handler calls it
outside any activity, so it may not heartbeat. `slice_bound` replaces SLICE_BOUND for a service whose slices and
retries fit a shorter bound, so a slice lost with every worker closes sooner.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    import nexusrpc
    from temporalio import nexus

    from lifecycle.deletion.nexus_service import DeletionNexusService
    from lifecycle.deletion.registry import DELETE_SUBJECT_DATA, EXPORT_SUBJECT_DATA
    from lifecycle.deletion.v1.service_pb2 import (
        DeleteRequest,
        DeleteResponse,
        ExportRequest,
        ExportResponse,
        VerifyRequest,
        VerifyResponse,
    )

# As the gateway retries a call on a task queue (SERVICE_CALL, SERVICE_EXPORT in workflows/activity_presets.py):
# doubling from 1 s to a minute, 5 attempts, then the operation fails with the activity's last error, which the
# gateway reads as it reads an activity's (transient, or a poison pill for an operator).
_RETRIES = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(minutes=1),
    maximum_attempts=5,
)

# How long a slice's workflow may run, its retries included. With every worker of the service gone (killed
# mid-slice, say), nothing runs that workflow: neither a heartbeat timeout nor a schedule-to-start timeout of its
# activity can end it, as only a worker would act on them. Its own timeout the server enforces alone, so the
# operation fails with a timeout, the gateway calls again as after a worker killed mid-call on a task queue, and that
# call, taken by no worker within its schedule-to-start timeout, shows the service `waiting`, as on a queue. Its
# closing also leaves nothing of the lost slice to run once a worker is back: the gateway's next call, from the same
# cursor, is the only one. Long enough for a slice (DeleteRequest.max_duration_ms, 5 s) and for the whole backoff of
# a call that keeps failing fast (a poison pill reaches the gateway as on a queue); a slice stuck beyond it is a
# timeout, called again, as a call that outlives SERVICE_CALL's start_to_close is.
SLICE_BOUND = timedelta(seconds=30)
# As SERVICE_CALL's: a worker of the service takes a slice within 10 s, or none is there to take it.
_TAKEN_WITHIN = timedelta(seconds=10)


@workflow.defn(name="DeleteSubjectDataOperation")
class DeleteSubjectDataOperation:
    """One slice of a deletion, asked for through Nexus: the service's DeleteSubjectData activity."""

    @workflow.run
    async def run(self, request: DeleteRequest) -> DeleteResponse:
        return await workflow.execute_activity(
            DELETE_SUBJECT_DATA,
            request,
            result_type=DeleteResponse,
            schedule_to_start_timeout=_TAKEN_WITHIN,
            start_to_close_timeout=timedelta(minutes=1),
            retry_policy=_RETRIES,
            summary=f"delete a slice for {request.deletion_id}",
        )


@workflow.defn(name="ExportSubjectDataOperation")
class ExportSubjectDataOperation:
    """An account's part of an export, asked for through Nexus: the service's ExportSubjectData activity, which
    heartbeats at least every minute as the contract asks."""

    @workflow.run
    async def run(self, request: ExportRequest) -> ExportResponse:
        return await workflow.execute_activity(
            EXPORT_SUBJECT_DATA,
            request,
            result_type=ExportResponse,
            start_to_close_timeout=timedelta(hours=12),
            heartbeat_timeout=timedelta(minutes=1),
            retry_policy=_RETRIES,
            summary=f"export the part of {request.export_id}",
        )


OPERATION_WORKFLOWS = [DeleteSubjectDataOperation, ExportSubjectDataOperation]

Count = Callable[[VerifyRequest], Awaitable[VerifyResponse]]


@nexusrpc.handler.service_handler(service=DeletionNexusService)
class DeletionNexusHandler:
    def __init__(self, verify: Count, slice_bound: timedelta = SLICE_BOUND) -> None:
        self._verify = verify
        self._slice_bound = slice_bound

    @nexus.workflow_run_operation
    async def delete_subject_data(
        self, ctx: nexus.WorkflowRunOperationContext, request: DeleteRequest
    ) -> nexus.WorkflowHandle[DeleteResponse]:
        # The Nexus request id makes a repeated start of the same operation find the workflow it started.
        return await ctx.start_workflow(
            DeleteSubjectDataOperation.run,
            request,
            id=f"delete-slice-{request.deletion_id}-{ctx.request_id}",
            execution_timeout=self._slice_bound,
        )

    @nexusrpc.handler.sync_operation
    async def verify_subject_erased(
        self, ctx: nexusrpc.handler.StartOperationContext, request: VerifyRequest
    ) -> VerifyResponse:
        return await self._verify(request)

    @nexus.workflow_run_operation
    async def export_subject_data(
        self, ctx: nexus.WorkflowRunOperationContext, request: ExportRequest
    ) -> nexus.WorkflowHandle[ExportResponse]:
        return await ctx.start_workflow(
            ExportSubjectDataOperation.run, request, id=f"export-part-{request.export_id}-{ctx.request_id}"
        )
