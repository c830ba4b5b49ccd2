"""Reading a deletion's status from Temporal: the `progress` query while it runs, the result once done."""

from __future__ import annotations

from dataclasses import dataclass, field

from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from lifecycle.contracts import BotDeletionResult, DeletionStatus, ServiceProgress


@dataclass(frozen=True)
class StatusView:
    status: str
    services: dict[str, ServiceProgress] = field(default_factory=dict)


async def bot_deletion_status(client: Client, workflow_id: str) -> StatusView:
    handle = client.get_workflow_handle(workflow_id, result_type=BotDeletionResult)
    try:
        description = await handle.describe()
    except RPCError as err:
        if err.status != RPCStatusCode.NOT_FOUND:
            raise
        # Recorded but not started yet (the reconciler starts it): it is as good as running.
        return StatusView("running")
    if description.status == WorkflowExecutionStatus.COMPLETED:
        result = await handle.result()
        return StatusView("completed", result.services)
    if description.status == WorkflowExecutionStatus.RUNNING:
        progress = await handle.query("progress", result_type=DeletionStatus)
        return StatusView(progress.status, progress.services)
    # Cancelled or terminated by an operator: shown as such rather than dressed up as running.
    assert description.status is not None
    return StatusView(description.status.name.lower())
