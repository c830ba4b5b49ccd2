"""How the kit reaches a service: the contract's three calls, each given the request as the payload the kit
encoded (wire.py) and returning the service's answer as it arrived. A transport is all the kit knows of where the
service runs. `TaskQueueTransport` calls the activity types on the service's own task queue, in the namespace the
service's worker polls; `NexusTransport` calls the contract's Nexus operations through the service's endpoint, from
any namespace (the gateway's), as the gateway does."""

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

from lifecycle.deletion.conformance.caller import (
    ANSWERED_WITHIN,
    TAKEN_WITHIN,
    ConformanceCall,
    ConformanceNexusCall,
)
from lifecycle.worker_deployment import PROJECT_ROOT, source_build_id


class CallFailed(Exception):
    """The service refused a call, failed it, or never took it."""


class Transport(Protocol):
    def describe(self) -> str: ...

    async def delete_subject_data(self, request: Payload) -> Payload: ...

    async def verify_subject_erased(self, request: Payload) -> Payload: ...

    async def export_subject_data(self, request: Payload) -> Payload: ...


class _CallerTransport:
    """Each call a run of `caller` (caller.py) on a queue of the kit's own, in the client's namespace, given where
    the service answers, the rpc's name and the request."""

    def __init__(self, client: Client, caller: str, where: str, caller_queue: str) -> None:
        self._client = client
        self._caller = caller
        self._where = where
        self._caller_queue = caller_queue

    async def delete_subject_data(self, request: Payload) -> Payload:
        return await self._call("DeleteSubjectData", request)

    async def verify_subject_erased(self, request: Payload) -> Payload:
        return await self._call("VerifySubjectErased", request)

    async def export_subject_data(self, request: Payload) -> Payload:
        return await self._call("ExportSubjectData", request)

    async def _call(self, rpc: str, request: Payload) -> Payload:
        handle = await self._client.start_workflow(
            self._caller,
            args=[self._where, rpc, RawValue(request)],
            id=f"conformance-call-{uuid.uuid4()}",
            task_queue=self._caller_queue,
            execution_timeout=TAKEN_WITHIN + ANSWERED_WITHIN,
            result_type=RawValue,
        )
        try:
            answer = await handle.result()
        except WorkflowFailureError as failed:
            raise CallFailed(f"{rpc} failed: {_cause(failed)}") from None
        except asyncio.CancelledError:
            # The kit abandons the call (the interrupted check): the caller's run is cancelled, and with it the
            # activity or the operation, which a service that does not heartbeat never hears of and finishes
            # unanswered.
            await asyncio.shield(handle.cancel())
            raise
        return answer.payload


class TaskQueueTransport(_CallerTransport):
    """The activity types of the rpcs' names on `service_queue`, called from ConformanceCall runs."""

    def __init__(self, client: Client, service_queue: str, caller_queue: str) -> None:
        super().__init__(client, "ConformanceCall", service_queue, caller_queue)

    def describe(self) -> str:
        return f"task queue {self._where!r} in namespace {self._client.namespace!r}"


class NexusTransport(_CallerTransport):
    """The contract's Nexus operations through `endpoint`, called from ConformanceNexusCall runs."""

    def __init__(self, client: Client, endpoint: str, caller_queue: str) -> None:
        super().__init__(client, "ConformanceNexusCall", endpoint, caller_queue)

    def describe(self) -> str:
        return f"Nexus endpoint {self._where!r}, called from namespace {self._client.namespace!r}"


def _cause(failed: BaseException) -> str:
    """The innermost cause's message: the service's own error, or the timeout that stood for no answer."""
    while failed.__cause__ is not None:
        failed = failed.__cause__
    if isinstance(failed, TimeoutError) and failed.type == TimeoutType.SCHEDULE_TO_START:
        return f"no worker took the call within {TAKEN_WITHIN.seconds} s: is the service polling its queue?"
    return str(failed) or type(failed).__name__


@contextlib.asynccontextmanager
async def _caller_queue(client: Client) -> AsyncIterator[str]:
    """A queue of the kit's own, its caller runs' worker polling it for as long as the block runs."""
    queue = f"conformance-{uuid.uuid4().hex[:12]}"
    worker = Worker(
        client,
        task_queue=queue,
        build_id=source_build_id(PROJECT_ROOT / "lifecycle"),
        workflows=[ConformanceCall, ConformanceNexusCall],
    )
    async with worker:
        yield queue


@contextlib.asynccontextmanager
async def task_queue_transport(client: Client, service_queue: str) -> AsyncIterator[TaskQueueTransport]:
    """The transport to the service's task queue in the client's namespace."""
    async with _caller_queue(client) as caller_queue:
        yield TaskQueueTransport(client, service_queue, caller_queue)


@contextlib.asynccontextmanager
async def nexus_transport(client: Client, endpoint: str) -> AsyncIterator[NexusTransport]:
    """The transport through the service's Nexus endpoint, from the client's namespace."""
    async with _caller_queue(client) as caller_queue:
        yield NexusTransport(client, endpoint, caller_queue)
