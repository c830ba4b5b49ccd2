"""A caller of any of the deletion contract's calls, for tests that reach a service directly rather than through a
deletion: a workflow that calls one activity type on a service's own task queue and returns the service's answer
as the payload it wrote, so a test sees the encoding and the message type a service chose."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RawValue, RetryPolicy


@workflow.defn(name="ContractCall")
class ContractCall:
    @workflow.run
    async def run(self, service_queue: str, activity: str, request: RawValue) -> RawValue:
        return await workflow.execute_activity(
            activity,
            request,
            task_queue=service_queue,
            result_type=RawValue,
            start_to_close_timeout=timedelta(seconds=30),
            # One try: a service that cannot read the request fails the call at once, for the test to see.
            retry_policy=RetryPolicy(maximum_attempts=1),
        )
