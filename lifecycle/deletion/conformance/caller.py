"""The workflows through which the kit calls a service: an activity or a Nexus operation can be called only from a
workflow. Each passes the request's payload on as it is and returns the answer's as it arrived, so the kit sees the
encoding the service chose. `ConformanceCall` calls the activity of the rpc's name on the service's task queue;
`ConformanceNexusCall` the operation of that name of the contract's Nexus service, through the service's endpoint."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RawValue, RetryPolicy

with workflow.unsafe.imports_passed_through():
    from lifecycle.deletion.nexus_service import OPERATIONS, DeletionNexusService

# A service's worker that does not take a call within this long is reported as not polling its queue.
TAKEN_WITHIN = timedelta(seconds=10)
# A call's bound: a slice returns within its max_duration_ms, which the kit keeps to seconds.
ANSWERED_WITHIN = timedelta(seconds=60)


@workflow.defn(name="ConformanceCall")
class ConformanceCall:
    @workflow.run
    async def run(self, service_queue: str, rpc: str, request: RawValue) -> RawValue:
        return await workflow.execute_activity(
            rpc,
            request,
            task_queue=service_queue,
            result_type=RawValue,
            schedule_to_start_timeout=TAKEN_WITHIN,
            start_to_close_timeout=ANSWERED_WITHIN,
            # One try: each call is a step of a check, and a failure is the service's answer to report.
            retry_policy=RetryPolicy(maximum_attempts=1),
        )


@workflow.defn(name="ConformanceNexusCall")
class ConformanceNexusCall:
    @workflow.run
    async def run(self, endpoint: str, rpc: str, request: RawValue) -> RawValue:
        nexus = workflow.create_nexus_client(endpoint=endpoint, service=DeletionNexusService)
        # Cancelling the run cancels the operation and waits for the handler to confirm it (WAIT_COMPLETED), as
        # the gateway's deletion does; a Nexus operation has no retry policy, its handler retries what it runs.
        return await nexus.execute_operation(
            OPERATIONS[rpc],
            request,
            output_type=RawValue,
            schedule_to_start_timeout=TAKEN_WITHIN,
            # Within the run's own timeout, so a call that outlives it reads as the operation's timeout.
            schedule_to_close_timeout=ANSWERED_WITHIN,
        )
