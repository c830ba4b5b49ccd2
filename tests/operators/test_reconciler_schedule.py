"""The reconciler's Temporal Schedule as worker.py keeps it: made at a worker's start, fired by an operator's
`temporal schedule trigger`, one run at a time, and left as an operator set it by every later start."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from pathlib import Path

from temporalio.client import (
    Client,
    ScheduleActionExecution,
    ScheduleActionExecutionStartWorkflow,
    ScheduleDescription,
    ScheduleOverlapPolicy,
)
from temporalio.service import RPCError, RPCStatusCode

from lifecycle.deletion.workflow_types import RECONCILER_SCHEDULE
from lifecycle.schedules import ensure_reconciler_schedule
from lifecycle.settings import Settings
from lifecycle.shared_contracts import ReconcileResult
from tests.eventually import eventually
from tests.operators.cli import AsyncCli
from tests.processes import ChildProcess, worker_process

SCHEDULE_ID = RECONCILER_SCHEDULE.schedule_id


def _worker(settings: Settings, queue: str, log: Path) -> ChildProcess:
    # Only the deletions role, on a queue of its own: it keeps only the reconciler's schedule, takes no work from
    # the suite's worker, and starts no site pools. Its site queue is one nobody polls.
    return worker_process(settings, log, TASK_QUEUE=queue, SITE_TASK_QUEUE=f"{queue}-sites", WORKER_ROLES="deletions")


async def _description(client: Client) -> ScheduleDescription | None:
    try:
        return await client.get_schedule_handle(SCHEDULE_ID).describe()
    except RPCError as err:
        if err.status is RPCStatusCode.NOT_FOUND:
            return None
        raise


def _runs(actions: Sequence[ScheduleActionExecution]) -> list[ScheduleActionExecutionStartWorkflow]:
    started = [action for action in actions if isinstance(action, ScheduleActionExecutionStartWorkflow)]
    assert len(started) == len(actions), actions
    return started


async def _schedule_ids(cli: AsyncCli) -> list[str]:
    return [entry["scheduleId"] for entry in await cli.jsonl("schedule", "list")]


async def test_the_schedule_is_made_fires_skips_an_overlap_and_survives_a_second_start(
    settings: Settings, temporal_client: Client, cli: AsyncCli, tmp_path: Path
) -> None:
    handle = temporal_client.get_schedule_handle(SCHEDULE_ID)
    # Another test's worker process may have made it already: this test sees it made by its own worker.
    if await _description(temporal_client) is not None:
        await handle.delete()
    queue = f"schedule-{uuid.uuid4().hex[:8]}"
    first = _worker(settings, queue, tmp_path / "first.log")
    first.start()
    try:
        made = await eventually(lambda: _description(temporal_client), "the worker's start makes the schedule")
        await eventually(lambda: "polling task queues" in first.log(), "the first worker polls")
        # The operator pauses it: no run starts by itself from now on, and one that did before ends on this worker.
        await cli.run("schedule", "toggle", "--schedule-id", SCHEDULE_ID, "--pause", "--reason", "held")
        await eventually(
            handle.describe,
            "no run of the schedule is running",
            until=lambda description: not description.info.running_actions,
        )
    finally:
        # Not asserted on here: an assertion in `finally` would replace the body's own failure.
        first_exit = first.terminate()
    assert first_exit == 0, first.log()[-2000:]
    assert made.schedule.policy.overlap is ScheduleOverlapPolicy.SKIP
    assert getattr(made.schedule.action, "task_queue", None) == queue

    # A trigger runs a paused schedule. With no worker polling now, the triggered run waits on its queue, still
    # running: the second trigger, with the schedule's own overlap policy (the SDK's trigger names none), overlaps it.
    before = (await handle.describe()).info
    await cli.run("schedule", "trigger", "--schedule-id", SCHEDULE_ID)
    running = await eventually(
        handle.describe,
        "the triggered run is running",
        until=lambda description: len(description.info.running_actions) == 1,
    )
    await handle.trigger()
    skipped = await eventually(
        handle.describe,
        "the overlapping trigger is skipped",
        until=lambda description: description.info.num_actions_skipped_overlap > before.num_actions_skipped_overlap,
    )
    assert skipped.info.num_actions_skipped_overlap == before.num_actions_skipped_overlap + 1
    assert skipped.info.num_actions == before.num_actions + 1
    (run,) = _runs(running.info.running_actions)
    assert _runs(skipped.info.running_actions) == [run]

    # A second worker's start leaves the schedule as the operator set it, and runs the waiting run to its end.
    second = _worker(settings, queue, tmp_path / "second.log")
    second.start()
    try:
        result = await temporal_client.get_workflow_handle(
            run.workflow_id, run_id=run.first_execution_run_id, result_type=ReconcileResult
        ).result()
        after = await handle.describe()
    finally:
        second_exit = second.terminate()
    assert second_exit == 0, second.log()[-2000:]
    assert isinstance(result, ReconcileResult)
    assert after.schedule.state.paused and after.schedule.state.note == "held"
    assert after.info.created_at == made.info.created_at
    assert after.info.last_updated_at == skipped.info.last_updated_at
    assert after.info.num_actions == before.num_actions + 1
    assert after.info.running_actions == []
    assert _runs([action.action for action in after.info.recent_actions])[-1:] == [run]
    assert (await _schedule_ids(cli)).count(SCHEDULE_ID) == 1

    # A start with other settings (a new queue) changes the action, and still keeps the operator's pause.
    await ensure_reconciler_schedule(temporal_client, f"{queue}-moved")
    moved = await handle.describe()
    assert getattr(moved.schedule.action, "task_queue", None) == f"{queue}-moved"
    assert moved.schedule.state.paused and moved.schedule.state.note == "held"
    assert moved.info.created_at == made.info.created_at
    await handle.delete()
