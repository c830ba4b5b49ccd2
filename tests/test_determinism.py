"""The real worker's sandbox catches non-deterministic calls: `datetime.now()` in workflow code fails the
workflow task (not the run), the history says why, and the run stays open until the code is fixed.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from temporalio import workflow
from temporalio.common import VersioningBehavior

# The sandbox re-imports this module to run ClockReadingWorkflow: everything else passes through untouched.
with workflow.unsafe.imports_passed_through():
    import pytest
    from temporalio.api.enums.v1 import EventType
    from temporalio.client import Client, WorkflowExecutionStatus

    import worker as worker_module
    from lifecycle.settings import Settings
    from tests.eventually import eventually
    from tests.workers import own_queue, own_worker
    from workflows.registry import WORKFLOWS


# A versioned worker (as every worker is) refuses a workflow type that declares no versioning behaviour.
@workflow.defn(name="ClockReadingWorkflow", versioning_behavior=VersioningBehavior.PINNED)
class ClockReadingWorkflow:
    @workflow.run
    async def run(self) -> str:
        # The mistake under test: the wall clock instead of workflow.now().
        return datetime.now().isoformat()


async def test_datetime_now_fails_the_workflow_task_on_the_real_worker(
    settings: Settings, temporal_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The worker exactly as worker.py builds it (same runner and interceptors), plus the faulty workflow.
    monkeypatch.setattr(worker_module, "WORKFLOWS", [*WORKFLOWS, ClockReadingWorkflow])
    async with own_worker(own_queue(settings), temporal_client) as running:
        handle = await temporal_client.start_workflow(
            "ClockReadingWorkflow", id=f"clock-{uuid.uuid4()}", task_queue=running.task_queue
        )

        async def task_failure() -> str | None:
            async for event in handle.fetch_history_events():
                if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
                    return str(event.workflow_task_failed_event_attributes.failure.message)
            return None

        message = await eventually(task_failure, "the workflow task fails")
        description = await handle.describe()
        await handle.terminate("test over")

    assert "Cannot access datetime.datetime.now" in message, message
    # The task fails and is retried; the run itself neither completes nor fails.
    assert description.status == WorkflowExecutionStatus.RUNNING
