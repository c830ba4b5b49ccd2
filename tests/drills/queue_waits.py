"""How long a run's tasks waited in one task queue, scheduled but not started: the wait that fairness keys order.
Its activities there and its workflow tasks there (a run's first, and any not sent to a worker's sticky queue,
which is first in, first out). The history gives the tasks started; for a run still going, its description adds
what the tasks not started yet have waited so far (a lower bound of their wait)."""

from __future__ import annotations

import time

from temporalio.api.enums.v1 import EventType, PendingActivityState, PendingWorkflowTaskState
from temporalio.client import Client


async def queue_wait(client: Client, workflow_id: str, task_queue: str) -> float:
    handle = client.get_workflow_handle(workflow_id)
    described = await handle.describe()
    history = await handle.fetch_history()
    now = time.time()
    scheduled: dict[int, float] = {}  # scheduled event id -> when, for the tasks in `task_queue`
    activities: dict[str, float] = {}  # activity id -> when scheduled, for those in `task_queue`
    last_workflow_task_here = False
    waited = 0.0
    for event in history.events:
        when = event.event_time.ToDatetime().timestamp()
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            attributes = event.activity_task_scheduled_event_attributes
            if attributes.task_queue.name == task_queue:
                scheduled[event.event_id] = activities[attributes.activity_id] = when
        elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
            last_workflow_task_here = event.workflow_task_scheduled_event_attributes.task_queue.name == task_queue
            if last_workflow_task_here:
                scheduled[event.event_id] = when
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            since = scheduled.get(event.activity_task_started_event_attributes.scheduled_event_id)
            waited += 0.0 if since is None else when - since
        elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED:
            since = scheduled.get(event.workflow_task_started_event_attributes.scheduled_event_id)
            waited += 0.0 if since is None else when - since
    if described.close_time is not None:
        return waited
    pending = described.raw_description
    for activity in pending.pending_activities:
        # A first attempt not started yet; a retry's backoff is no wait in the queue.
        if activity.state == PendingActivityState.PENDING_ACTIVITY_STATE_SCHEDULED and activity.attempt == 1:
            since = activities.get(activity.activity_id)
            waited += 0.0 if since is None else now - since
    task = pending.pending_workflow_task
    if last_workflow_task_here and task.state == PendingWorkflowTaskState.PENDING_WORKFLOW_TASK_STATE_SCHEDULED:
        waited += now - task.scheduled_time.ToDatetime().timestamp()
    return waited
