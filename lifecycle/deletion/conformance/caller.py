"""The workflow through which the kit calls a service on its task queue: an activity can be called only from a
workflow. It passes the request's payload on as it is and returns the answer's as the service wrote it, so the kit
sees the encoding the service chose."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RawValue, RetryPolicy

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
