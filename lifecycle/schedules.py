"""The Temporal Schedules the workers keep, created at a worker's start or brought up to date with its code: the
deletion reconciler on the background queue, the site-database servers' health check on the sites queue. What each
starts, and how often, is its ScheduledStart in its feature's workflow_types.py."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from temporalio.api.common.v1 import Payload
from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleUpdate,
    ScheduleUpdateInput,
)

from lifecycle.deletion.workflow_types import RECONCILER_SCHEDULE
from lifecycle.sites.workflow_types import HEALTH_CHECK_SCHEDULE
from lifecycle.start_options import ScheduledStart


def _schedule(scheduled: ScheduledStart, task_queue: str) -> Schedule:
    return Schedule(
        action=ScheduleActionStartWorkflow(
            scheduled.workflow_type, id=scheduled.id, task_queue=task_queue, static_summary=scheduled.static_summary
        ),
        spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=scheduled.every)]),
        # One run at a time: a slow run makes the next one unnecessary.
        policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP),
    )


def _set_by_code(schedule: Schedule, client: Client) -> tuple[object, ...]:
    """What a worker's start sets on a schedule: the workflow it starts and where, its summary, when, and the
    overlap policy. A schedule read back from the server carries its summary as a payload."""
    action = schedule.action
    if not isinstance(action, ScheduleActionStartWorkflow):
        return (action,)
    summary = action.static_summary
    if isinstance(summary, Payload):
        summary = client.data_converter.payload_converter.from_payload(summary, str)
    intervals = [(interval.every, interval.offset or timedelta(0)) for interval in schedule.spec.intervals]
    return action.workflow, action.id, action.task_queue, summary, intervals, schedule.policy.overlap


async def _ensure(client: Client, scheduled: ScheduledStart, task_queue: str) -> None:
    """Create the schedule, or bring an existing one's action, spec and policy to this code's, if they differ.

    Its state stays as it is: a schedule an operator paused (`temporal schedule toggle --pause`) stays paused,
    with its note, across every worker's start; an unchanged one is not written at all.
    """
    schedule = _schedule(scheduled, task_queue)
    try:
        await client.create_schedule(scheduled.schedule_id, schedule)
    except ScheduleAlreadyRunningError:

        def bring_up_to_date(current: ScheduleUpdateInput) -> ScheduleUpdate | None:
            existing = current.description.schedule
            if _set_by_code(existing, client) == _set_by_code(schedule, client):
                return None
            return ScheduleUpdate(schedule=dataclasses.replace(schedule, state=existing.state))

        await client.get_schedule_handle(scheduled.schedule_id).update(bring_up_to_date)


async def ensure_reconciler_schedule(client: Client, task_queue: str) -> None:
    await _ensure(client, RECONCILER_SCHEDULE, task_queue)


async def ensure_health_check_schedule(client: Client, task_queue: str) -> None:
    await _ensure(client, HEALTH_CHECK_SCHEDULE, task_queue)
