"""The workflow sandbox every worker and replayer runs the workflows in, without the trips into it that a data
converter which takes no context does not need.

For every payload of every activation and completion, the SDK (temporalio 1.35) asks the run's instance which
serialization context and which external-store context the payload belongs to, up to six times a payload. The
sandbox answers each question from inside the sandbox: an `exec` with its import hooks applied, about 0.35 ms of
CPU. Only a data converter that uses the answer needs it: external storage, or a payload converter, codec or
failure converter that takes a context. The project's converter (lifecycle/data_converter.py) has none of them, so
for it the answer changes nothing: the SDK then uses the converter it was given either way. `ContextFreeRunner`
gives that answer without entering the sandbox, and only for such a converter (`takes_context`); for any other
it asks the sandbox as the SDK does. The workflow code itself runs in the sandbox as before, with its
restrictions and its fresh modules per run.

Replaying the committed histories (40 runs of each, CPU per run, docs/testing.md): a bot deletion 83 to 99 ms
with the SDK's runner against 55 ms with this one, an account deletion 94 against 65 to 73 ms, a site creation 36
against 27 to 29 ms.
"""

from __future__ import annotations

from collections.abc import Sequence

import temporalio.workflow
from temporalio.bridge.proto.workflow_activation import WorkflowActivation
from temporalio.bridge.proto.workflow_completion import WorkflowActivationCompletion
from temporalio.converter import (
    ActivitySerializationContext,
    DataConverter,
    SerializationContext,
    StorageDriverStoreContext,
    WorkflowSerializationContext,
)
from temporalio.worker import WorkflowInstance, WorkflowInstanceDetails, WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from lifecycle.data_converter import DATA_CONVERTER

# One context of each kind a workflow's payloads can carry here (activities, local ones too, and child workflows).
_PROBES: tuple[SerializationContext, ...] = (
    WorkflowSerializationContext(namespace="probe", workflow_id="probe"),
    ActivitySerializationContext(
        namespace="probe",
        activity_id="probe",
        activity_type="probe",
        activity_task_queue="probe",
        workflow_id="probe",
        workflow_type="probe",
        is_local=False,
    ),
)


def takes_context(converter: DataConverter) -> bool:
    """Whether a payload's contexts can change what `converter` does: it stores payloads externally, or one of
    its parts takes a serialization context (the SDK's `with_context` then answers another converter)."""
    if converter.external_storage is not None:
        return True
    return any(converter.with_context(probe) is not converter for probe in _PROBES)


class _ContextFreeInstance(WorkflowInstance):
    """A sandboxed run whose payloads need no context: every question but those goes to the sandbox."""

    def __init__(self, sandboxed: WorkflowInstance) -> None:
        self._sandboxed = sandboxed

    def activate(self, act: WorkflowActivation) -> WorkflowActivationCompletion:
        return self._sandboxed.activate(act)

    def get_serialization_context(self, command_info: object) -> SerializationContext | None:
        # None: the SDK uses the worker's own converter, which is what any context would have given it.
        return None

    def get_external_store_context(self, command_info: object) -> StorageDriverStoreContext:
        return StorageDriverStoreContext(target=None)

    def get_info(self) -> temporalio.workflow.Info:
        return self._sandboxed.get_info()

    def get_thread_id(self) -> int | None:
        # The deadlock detector reads the stuck thread's frames with it.
        return self._sandboxed.get_thread_id()


class ContextFreeRunner(WorkflowRunner):
    """The SDK's sandboxed runner; for a data converter that takes no context, its instances answer the
    payloads' context questions themselves."""

    def __init__(self, converter: DataConverter, sandboxed: WorkflowRunner | None = None) -> None:
        self._sandboxed = sandboxed or SandboxedWorkflowRunner()
        self._context_free = not takes_context(converter)

    def prepare_workflow(self, defn: temporalio.workflow._Definition) -> None:
        self._sandboxed.prepare_workflow(defn)

    def create_instance(self, det: WorkflowInstanceDetails) -> WorkflowInstance:
        instance = self._sandboxed.create_instance(det)
        return _ContextFreeInstance(instance) if self._context_free else instance

    def set_worker_level_failure_exception_types(self, types: Sequence[type[BaseException]]) -> None:
        self._sandboxed.set_worker_level_failure_exception_types(types)


def workflow_runner() -> WorkflowRunner:
    """The runner of every worker and replayer that runs the project's workflows, for DATA_CONVERTER."""
    return ContextFreeRunner(DATA_CONVERTER)
