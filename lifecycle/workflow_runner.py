"""The workflow sandbox every worker and replayer runs the project's workflows in: the SDK's own sandboxed runner,
configured through its public restrictions.

Each run imports its own workflow module afresh; everything else a workflow uses is passed through, each module
saying so at its imports (`workflow.unsafe.imports_passed_through`, tests/replay/test_sandbox_imports.py).
"""

from __future__ import annotations

from temporalio.worker import WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions


def workflow_runner() -> WorkflowRunner:
    """The runner of every worker and replayer that runs the project's workflows."""
    return SandboxedWorkflowRunner(restrictions=SandboxRestrictions.default)
