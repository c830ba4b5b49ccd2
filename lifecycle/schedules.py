"""The Temporal Schedules the workers keep, created or updated on every worker start: the deletion reconciler on
the background queue, the site-database servers' health check on the sites queue."""

from __future__ import annotations

from datetime import timedelta

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


async def _ensure(client: Client, schedule_id: str, schedule: Schedule) -> None:
    try:
        await client.create_schedule(schedule_id, schedule)
    except ScheduleAlreadyRunningError:

        def replace_schedule(_: ScheduleUpdateInput) -> ScheduleUpdate:
            return ScheduleUpdate(schedule=schedule)

        await client.get_schedule_handle(schedule_id).update(replace_schedule)


async def ensure_reconciler_schedule(client: Client, task_queue: str) -> None:
    summary = "Start deletions marked in the database but missing in Temporal"
    schedule = _schedule(RECONCILER_WORKFLOW, "deletion-reconciler-run", task_queue, RECONCILER_EVERY, summary)
    await _ensure(client, RECONCILER_SCHEDULE_ID, schedule)


async def ensure_health_check_schedule(client: Client, task_queue: str) -> None:
    summary = "Connect to every site-database server: mark down the ones that do not answer, active again the rest"
    run_id = "site-db-server-health-check-run"
    schedule = _schedule(SITE_SERVER_HEALTH_CHECK_WORKFLOW, run_id, task_queue, HEALTH_CHECK_EVERY, summary)
    await _ensure(client, HEALTH_CHECK_SCHEDULE_ID, schedule)
