"""How long a run's activities waited in one task queue, scheduled but not started: the wait that fairness keys
order. Read from Temporal: the history for the activities started, the run's pending activities for those still
waiting when it is asked (a run still going gets a lower bound)."""

from __future__ import annotations

import time

from temporalio.api.enums.v1 import EventType, PendingActivityState
from temporalio.client import Client


async def activity_queue_wait(client: Client, workflow_id: str, task_queue: str) -> float:
    handle = client.get_workflow_handle(workflow_id)
    described = await handle.describe()
    history = await handle.fetch_history()
    now = time.time()
    scheduled: dict[int, float] = {}  # scheduled event id -> when, for the activities on `task_queue`
    scheduled_by_activity: dict[str, float] = {}
    waited = 0.0
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            attributes = event.activity_task_scheduled_event_attributes
            if attributes.task_queue.name == task_queue:
                scheduled[event.event_id] = event.event_time.ToDatetime().timestamp()
                scheduled_by_activity[attributes.activity_id] = scheduled[event.event_id]
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            since = scheduled.get(event.activity_task_started_event_attributes.scheduled_event_id)
            if since is not None:
                waited += event.event_time.ToDatetime().timestamp() - since
    if described.close_time is None:
        for pending in described.raw_description.pending_activities:
            # Started ones are not counted (a lower bound); a retry's backoff is not waiting in the queue.
            waiting = pending.state == PendingActivityState.PENDING_ACTIVITY_STATE_SCHEDULED and pending.attempt == 1
            if waiting and pending.activity_id in scheduled_by_activity:
                waited += now - scheduled_by_activity[pending.activity_id]
    return waited
