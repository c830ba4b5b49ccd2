"""How the kit reaches a service: the contract's three calls, each given the request as the payload the kit
encoded (wire.py) and returning the service's answer as it arrived. A transport is all the kit knows of where the
service runs; `TaskQueueTransport` calls the activity types on the service's own task queue."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Protocol

from temporalio.api.common.v1 import Payload
from temporalio.client import Client, WorkflowFailureError
from temporalio.common import RawValue
from temporalio.exceptions import TimeoutError, TimeoutType
from temporalio.worker import Worker

from lifecycle.deletion.conformance.caller import ANSWERED_WITHIN, TAKEN_WITHIN, ConformanceCall


class CallFailed(Exception):
    """The service refused a call, failed it, or never took it."""


class Transport(Protocol):
    def describe(self) -> str: ...

    async def delete_subject_data(self, request: Payload) -> Payload: ...

    async def verify_subject_erased(self, request: Payload) -> Payload: ...

    async def export_subject_data(self, request: Payload) -> Payload: ...


class TaskQueueTransport:
    """The activity types of the rpcs' names on `service_queue`, called from ConformanceCall runs on a queue of
    the kit's own, in the client's namespace."""

    def __init__(self, client: Client, service_queue: str, caller_queue: str) -> None:
        self._client = client
        self._service_queue = service_queue
        self._caller_queue = caller_queue

    def describe(self) -> str:
        return f"task queue {self._service_queue!r} in namespace {self._client.namespace!r}"

    async def delete_subject_data(self, request: Payload) -> Payload:
        return await self._call("DeleteSubjectData", request)

    async def verify_subject_erased(self, request: Payload) -> Payload:
        return await self._call("VerifySubjectErased", request)

    async def export_subject_data(self, request: Payload) -> Payload:
        return await self._call("ExportSubjectData", request)

    async def _call(self, rpc: str, request: Payload) -> Payload:
        handle = await self._client.start_workflow(
            ConformanceCall.run,
            args=[self._service_queue, rpc, RawValue(request)],
            id=f"conformance-call-{uuid.uuid4()}",
            task_queue=self._caller_queue,
            execution_timeout=TAKEN_WITHIN + ANSWERED_WITHIN,
        )
        try:
            answer = await handle.result()
        except WorkflowFailureError as failed:
            raise CallFailed(f"{rpc} failed: {_cause(failed)}") from None
        except asyncio.CancelledError:
            # The kit abandons the call (the interrupted check): the caller's run is cancelled, and with it the
            # activity, which a service that does not heartbeat never hears of and finishes unanswered.
            await asyncio.shield(handle.cancel())
            raise
        return answer.payload


def _cause(failed: BaseException) -> str:
    """The innermost cause's message: the service's own error, or the timeout that stood for no answer."""
    while failed.__cause__ is not None:
        failed = failed.__cause__
    if isinstance(failed, TimeoutError) and failed.type == TimeoutType.SCHEDULE_TO_START:
        return f"no worker took the call within {TAKEN_WITHIN.seconds} s: is the service polling its queue?"
    return str(failed) or type(failed).__name__


@contextlib.asynccontextmanager
async def task_queue_transport(client: Client, service_queue: str) -> AsyncIterator[TaskQueueTransport]:
    """The transport, with the worker of the kit's own caller runs polling for as long as the block runs."""
    caller_queue = f"conformance-{uuid.uuid4().hex[:12]}"
    async with Worker(client, task_queue=caller_queue, workflows=[ConformanceCall]):
        yield TaskQueueTransport(client, service_queue, caller_queue)
