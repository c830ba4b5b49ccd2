"""Waiting for another workflow without holding a worker slot.

An activity that slept until another run closed would hold one of its queue's few activity slots the whole
time; enough of them at once (accounts joining bot deletions that `DELETE /bots` started) would take every
slot, and the runs they wait for could never get one. Instead each attempt looks once: a run still open fails
the attempt with a retryable, benign `StillRunning`, and the activity's retry timer, held by the Temporal
server, does the waiting. Benign errors are logged at DEBUG and kept out of failure metrics.
"""

from __future__ import annotations

from temporalio.client import Client, WorkflowExecutionDescription, WorkflowExecutionStatus
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory
from temporalio.service import RPCError, RPCStatusCode

STILL_RUNNING = "StillRunning"


def still_running(workflow_id: str) -> ApplicationError:
    return ApplicationError(
        f"{workflow_id} is still running; looking again later",
        type=STILL_RUNNING,
        category=ApplicationErrorCategory.BENIGN,
    )


async def describe_or_none(client: Client, workflow_id: str) -> WorkflowExecutionDescription | None:
    """The latest run under this id, or None if there never was one."""
    try:
        return await client.get_workflow_handle(workflow_id).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return None
        raise


async def raise_if_running(client: Client, workflow_id: str) -> WorkflowExecutionDescription | None:
    """Return the closed run's description (None if none ever existed); raise StillRunning while it is open."""
    description = await describe_or_none(client, workflow_id)
    if description is not None and description.status == WorkflowExecutionStatus.RUNNING:
        raise still_running(workflow_id)
    return description
