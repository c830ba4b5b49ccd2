"""The workflow runner (lifecycle/workflow_runner.py): the sandbox is asked for a payload's serialization context
only when the data converter can use one, and a converter that uses one still gets every context."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow

# The sandbox re-imports this module to run ContextProbe: everything else passes through untouched.
with workflow.unsafe.imports_passed_through():
    from temporalio.api.common.v1 import Payload
    from temporalio.bridge.proto.workflow_activation import WorkflowActivation
    from temporalio.bridge.proto.workflow_completion import WorkflowActivationCompletion
    from temporalio.client import Client
    from temporalio.converter import (
        ActivitySerializationContext,
        DataConverter,
        PayloadCodec,
        SerializationContext,
        StorageDriverStoreContext,
        WithSerializationContext,
    )
    from temporalio.worker import Worker, WorkflowInstance, WorkflowInstanceDetails
    from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

    from lifecycle.data_converter import DATA_CONVERTER
    from lifecycle.workflow_runner import ContextFreeRunner, takes_context, workflow_runner


@activity.defn(name="echo")
async def echo(text: str) -> str:
    return text


@workflow.defn(name="ContextProbe")
class ContextProbe:
    @workflow.run
    async def run(self, text: str) -> list[str]:
        timeout = timedelta(seconds=10)
        remote = await workflow.execute_activity(echo, text, start_to_close_timeout=timeout)
        local = await workflow.execute_local_activity(echo, text, start_to_close_timeout=timeout)
        return [remote, local]


class RecordingCodec(PayloadCodec, WithSerializationContext):
    """Changes no payload; records the context of each one it is given."""

    def __init__(self, seen: list[SerializationContext | None], context: SerializationContext | None = None) -> None:
        self.seen = seen
        self.context = context

    def with_context(self, context: SerializationContext) -> RecordingCodec:
        return RecordingCodec(self.seen, context)

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        self.seen.append(self.context)
        return list(payloads)

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        self.seen.append(self.context)
        return list(payloads)


class _Counted(WorkflowInstance):
    def __init__(self, inner: WorkflowInstance, asked: list[str]) -> None:
        self.inner, self.asked = inner, asked

    def activate(self, act: WorkflowActivation) -> WorkflowActivationCompletion:
        return self.inner.activate(act)

    def get_serialization_context(self, command_info: Any) -> SerializationContext | None:
        self.asked.append("serialization")
        return self.inner.get_serialization_context(command_info)

    def get_external_store_context(self, command_info: Any) -> StorageDriverStoreContext:
        self.asked.append("store")
        return self.inner.get_external_store_context(command_info)

    def get_info(self) -> workflow.Info:
        return self.inner.get_info()


class CountingSandbox(SandboxedWorkflowRunner):
    """The SDK's sandboxed runner, counting the questions its runs are asked about payloads."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[str] = []

    def create_instance(self, det: WorkflowInstanceDetails) -> WorkflowInstance:
        return _Counted(super().create_instance(det), self.asked)


class CountedContextFree(ContextFreeRunner, CountingSandbox):
    """ContextFreeRunner over the counting sandbox: what it asks the sandbox is counted."""


async def _probe(client: Client, converter: DataConverter, runner: CountingSandbox) -> list[str]:
    client = Client(client.service_client, namespace=client.namespace, data_converter=converter)
    queue = f"context-probe-{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue=queue, workflows=[ContextProbe], activities=[echo], workflow_runner=runner):
        result: list[str] = await client.execute_workflow(ContextProbe.run, "hello", id=queue, task_queue=queue)
    return result


def test_only_a_converter_that_takes_no_context_gets_the_context_free_runner() -> None:
    seen: list[SerializationContext | None] = []
    context_taking = DataConverter(payload_codec=RecordingCodec(seen))
    assert not takes_context(DATA_CONVERTER)
    assert takes_context(context_taking)
    assert isinstance(workflow_runner(), ContextFreeRunner)
    assert not isinstance(workflow_runner(context_taking), ContextFreeRunner)


async def test_a_context_free_converter_never_asks_the_sandbox(temporal_client: Client) -> None:
    runner = CountedContextFree()
    assert await _probe(temporal_client, DATA_CONVERTER, runner) == ["hello", "hello"]
    assert runner.asked == []


async def test_a_converter_that_takes_a_context_still_gets_each_one(temporal_client: Client) -> None:
    seen: list[SerializationContext | None] = []
    runner = CountingSandbox()
    converter = DataConverter(payload_codec=RecordingCodec(seen))
    assert await _probe(temporal_client, converter, runner) == ["hello", "hello"]
    assert "serialization" in runner.asked
    # The workflow's activity payloads were encoded and decoded with their activities' contexts, as the SDK's own
    # runner gives them: the regular one and the local one.
    activity_contexts = {
        (context.activity_type, context.is_local)
        for context in seen
        if isinstance(context, ActivitySerializationContext) and context.workflow_id is not None
    }
    assert activity_contexts == {("echo", False), ("echo", True)}
