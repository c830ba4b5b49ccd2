"""The Temporal Schedule that runs the deletion reconciler, created or updated on every worker start."""

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

from lifecycle.workflow_types import RECONCILER_WORKFLOW

RECONCILER_SCHEDULE_ID = "deletion-reconciler"
# Recovery within minutes, not a day; a consistent database makes each run one cheap query.
RECONCILER_EVERY = timedelta(minutes=5)


def _schedule(task_queue: str) -> Schedule:
    return Schedule(
        action=ScheduleActionStartWorkflow(
            RECONCILER_WORKFLOW,
            id="deletion-reconciler-run",
            task_queue=task_queue,
            static_summary="Start deletions marked in the database but missing in Temporal",
        ),
        spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=RECONCILER_EVERY)]),
        # One reconciler at a time: a slow run makes the next one unnecessary.
        policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP),
    )


async def ensure_reconciler_schedule(client: Client, task_queue: str) -> None:
    schedule = _schedule(task_queue)
    try:
        await client.create_schedule(RECONCILER_SCHEDULE_ID, schedule)
    except ScheduleAlreadyRunningError:

        def replace_schedule(_: ScheduleUpdateInput) -> ScheduleUpdate:
            return ScheduleUpdate(schedule=schedule)

        await client.get_schedule_handle(RECONCILER_SCHEDULE_ID).update(replace_schedule)
