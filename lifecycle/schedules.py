"""The Temporal Schedules the workers keep, created at a worker's start or brought up to date with its code: the
deletion reconciler on the background queue, the site-database servers' health check on the sites queue."""

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

from lifecycle.workflow_types import RECONCILER_WORKFLOW, SITE_SERVER_HEALTH_CHECK_WORKFLOW

RECONCILER_SCHEDULE_ID = "deletion-reconciler"
# Recovery within minutes, not a day; a consistent database makes each run one cheap query.
RECONCILER_EVERY = timedelta(minutes=5)

HEALTH_CHECK_SCHEDULE_ID = "site-db-server-health-check"
# A dead server is out of placement after two failed checks (activities/sites/health_check.py), 15 to 30 s; each
# run is one activity that connects to every server once.
HEALTH_CHECK_EVERY = timedelta(seconds=15)


def _schedule(workflow: str, run_id: str, task_queue: str, every: timedelta, summary: str) -> Schedule:
    return Schedule(
        action=ScheduleActionStartWorkflow(workflow, id=run_id, task_queue=task_queue, static_summary=summary),
        spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=every)]),
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


async def _ensure(client: Client, schedule_id: str, schedule: Schedule) -> None:
    """Create the schedule, or bring an existing one's action, spec and policy to this code's, if they differ.

    Its state stays as it is: a schedule an operator paused (`temporal schedule toggle --pause`) stays paused,
    with its note, across every worker's start; an unchanged one is not written at all.
    """
    try:
        await client.create_schedule(schedule_id, schedule)
    except ScheduleAlreadyRunningError:

        def bring_up_to_date(current: ScheduleUpdateInput) -> ScheduleUpdate | None:
            existing = current.description.schedule
            if _set_by_code(existing, client) == _set_by_code(schedule, client):
                return None
            return ScheduleUpdate(schedule=dataclasses.replace(schedule, state=existing.state))

        await client.get_schedule_handle(schedule_id).update(bring_up_to_date)


async def ensure_reconciler_schedule(client: Client, task_queue: str) -> None:
    summary = "Start deletions marked in the database but missing in Temporal"
    schedule = _schedule(RECONCILER_WORKFLOW, "deletion-reconciler-run", task_queue, RECONCILER_EVERY, summary)
    await _ensure(client, RECONCILER_SCHEDULE_ID, schedule)


async def ensure_health_check_schedule(client: Client, task_queue: str) -> None:
    summary = "Connect to every site-database server: mark down the ones that do not answer, active again the rest"
    run_id = "site-db-server-health-check-run"
    schedule = _schedule(SITE_SERVER_HEALTH_CHECK_WORKFLOW, run_id, task_queue, HEALTH_CHECK_EVERY, summary)
    await _ensure(client, HEALTH_CHECK_SCHEDULE_ID, schedule)
