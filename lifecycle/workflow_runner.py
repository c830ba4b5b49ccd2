"""The workflow sandbox every worker and replayer runs the project's workflows in: the SDK's sandboxed runner,
configured through its public restrictions, whose runs answer the payloads' context questions without entering
the sandbox when the data converter cannot use the answer.

Each run imports its own workflow module afresh; everything else a workflow uses is passed through, each module
saying so at its imports (`workflow.unsafe.imports_passed_through`, tests/replay/test_sandbox_imports.py).

For every payload of every activation and completion, the SDK asks the run which serialization context and which
external-store context the payload belongs to, several times a payload, and the sandbox answers each question
from inside itself: an `exec` with its import hooks applied. Only a data converter that uses the answer needs it:
external storage, or a payload converter, codec or failure converter that takes a context. The project's
converter (lifecycle/data_converter.py) has none, so `ContextFreeRunner` answers for such a converter itself, and
any other converter gets the SDK's runner as it is. The workflow code itself runs in the sandbox either way. It
stays under the rule for optimisations (docs/benchmarks.md): the worker's CPU per replayed run is about a third
lower with it, and it uses only the SDK's public runner and instance interfaces.
"""

from __future__ import annotations

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
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions
from temporalio.workflow import Info

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

    def get_info(self) -> Info:
        return self._sandboxed.get_info()

    def get_thread_id(self) -> int | None:
        # The deadlock detector reads the stuck thread's frames with it.
        return self._sandboxed.get_thread_id()


class ContextFreeRunner(SandboxedWorkflowRunner):
    """The SDK's sandboxed runner, whose runs answer their payloads' context questions themselves: only for a
    data converter that takes no context (`takes_context`)."""

    def create_instance(self, det: WorkflowInstanceDetails) -> WorkflowInstance:
        return _ContextFreeInstance(super().create_instance(det))


def workflow_runner(converter: DataConverter = DATA_CONVERTER) -> WorkflowRunner:
    """The runner of every worker and replayer that runs the project's workflows with `converter`."""
    if takes_context(converter):
        return SandboxedWorkflowRunner(restrictions=SandboxRestrictions.default)
    return ContextFreeRunner(restrictions=SandboxRestrictions.default)
