"""How the workflows call a registered service, wherever it answers: the registry says (RegisteredService), and this
is the only place that reads it. A service on a task queue of the gateway's namespace gets an activity of the rpc's
name there; one behind a Nexus endpoint gets the operation of that name of the contract's Nexus service
(lifecycle/deletion/nexus_service.py), in its own namespace. Both answer the same messages, and their failures read
the same (cause_of), so the deletion, the preview and the export decide alike over either."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable
from datetime import timedelta
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.exceptions import ActivityError, FailureError, NexusOperationError, TimeoutType
from temporalio.exceptions import TimeoutError as CallTimeoutError

with workflow.unsafe.imports_passed_through():
    import workflows.activity_presets as presets
    from activities.deletion.services import RegisteredServices
    from lifecycle.deletion.contracts import RegisteredService
    from lifecycle.deletion.nexus_service import OPERATIONS, DeletionNexusService

# A failed call of a service, on either transport.
ServiceCallError = (ActivityError, NexusOperationError)
# While a service's endpoint does not exist, it is asked about again this often: as often as a call on a queue
# nobody polls waits for a worker (SERVICE_CALL's schedule-to-start timeout).
ENDPOINT_RECHECK = timedelta(seconds=10)

Answer = TypeVar("Answer")


class EndpointMissing(Exception):
    """The service's Nexus endpoint does not exist (not created yet, or deleted): no call can reach it."""


def cause_of(err: FailureError) -> BaseException | None:
    """Why a service's call failed, alike over both transports: an activity's cause; through Nexus, the cause the
    handler's activity failed with (its workflow runs it), or the operation's own (a timeout, a cancel)."""
    cause = err.cause
    if isinstance(err, NexusOperationError) and isinstance(cause, ActivityError):
        return cause.cause
    return cause


def no_worker_took_it(err: FailureError) -> bool:
    """A call that waited out its schedule-to-start timeout: no worker of the service takes its calls."""
    cause = cause_of(err)
    return isinstance(cause, CallTimeoutError) and cause.type == TimeoutType.SCHEDULE_TO_START


async def side_by_side(calls: Iterable[Awaitable[Answer]]) -> list[Answer]:
    """Every call at once, returning once every one has settled, also when the run is cancelled: a call through
    Nexus then waits for its operation's cancellation (WAIT_COMPLETED), and the run must not close before it, or the
    server drops the cancel and the service's workflow runs on (a plain gather gives up at the first call that
    ends, such as an activity cancelled at once). The first failure, if any, is raised then."""
    settled = await asyncio.gather(*calls, return_exceptions=True)
    answers: list[Answer] = []
    for outcome in settled:
        if isinstance(outcome, BaseException):
            raise outcome
        answers.append(outcome)
    return answers


async def call_service(
    service: RegisteredService,
    call: str,
    request: Any,
    result_type: type[Answer],
    *,
    on_queue: presets.ActivityPreset,
    through_nexus: presets.NexusPreset,
    summary: str,
) -> Answer:
    """The contract's `call` (DeleteSubjectData, ...) of the service, where the registry says it answers; raises
    a ServiceCallError, or EndpointMissing."""
    if not service.nexus_endpoint:
        answer: Answer = await workflow.execute_activity(
            call, request, task_queue=service.task_queue, result_type=result_type, **on_queue, summary=summary
        )
        return answer
    exists = await workflow.execute_local_activity_method(
        RegisteredServices.nexus_endpoint_exists,
        service.nexus_endpoint,
        **presets.ENDPOINT_CHECK,
        summary=f"does endpoint {service.nexus_endpoint} exist",
    )
    if not exists:
        raise EndpointMissing(service.nexus_endpoint)
    nexus = workflow.create_nexus_client(endpoint=service.nexus_endpoint, service=DeletionNexusService)
    # The start in a task of its own, which the run's cancel never reaches: the SDK gives up a start that a cancel
    # interrupts, even one the same activation reports started, and the run would close with the operation open.
    starting = asyncio.ensure_future(
        nexus.start_operation(OPERATIONS[call], request, output_type=result_type, **through_nexus, summary=summary)
    )
    try:
        operation = await asyncio.shield(starting)
    except asyncio.CancelledError:
        # Cancelled while it started: once it has, it is cancelled (WAIT_COMPLETED) and waited for.
        operation = await starting
        operation.cancel()
    answered: Answer = await operation
    return answered
