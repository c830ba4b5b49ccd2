"""The steps' lines (activities/step_log.py) as a worker writes them: a start and an end for each attempt, with the
run's ids, the attempt and the step's counts, and nothing of what the step read or was told."""

from __future__ import annotations

import contextlib
import io
import json
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow

# The sandbox re-imports this module to run StepLogWorkflow: everything else passes through untouched.
with workflow.unsafe.imports_passed_through():
    from temporalio.client import Client
    from temporalio.common import RetryPolicy
    from temporalio.exceptions import ActivityError, ApplicationError
    from temporalio.worker import Worker

    from activities.step_log import StepLogInterceptor, step_counts, step_skipped
    from lifecycle.logging_setup import configure_logging
    from tests.test_logging import restore_loggers  # noqa: F401 (an autouse fixture)

EMAIL = "someone@example.com"
STEP_TIMEOUT = timedelta(seconds=30)


@dataclass
class Tally:
    rows: int
    done: bool
    address: str


@activity.defn
async def counting_step() -> Tally:
    step_counts(files=2)
    return Tally(rows=3, done=True, address=EMAIL)


@activity.defn
async def skipping_step() -> None:
    step_skipped("already done")


@activity.defn
async def failing_step() -> None:
    raise ApplicationError(f"cannot reach {EMAIL}", type="Unreachable", non_retryable=True)


@workflow.defn(name="StepLogWorkflow")
class StepLogWorkflow:
    @workflow.run
    async def run(self) -> None:
        await workflow.execute_activity(counting_step, start_to_close_timeout=STEP_TIMEOUT)
        await workflow.execute_local_activity(skipping_step, start_to_close_timeout=STEP_TIMEOUT)
        with contextlib.suppress(ActivityError):
            await workflow.execute_activity(
                failing_step, start_to_close_timeout=STEP_TIMEOUT, retry_policy=RetryPolicy(maximum_attempts=1)
            )


async def test_each_attempt_says_it_started_and_how_it_ended(temporal_client: Client) -> None:
    out = io.StringIO()
    configure_logging("worker", form="json", stream=out)
    queue = f"step-log-{uuid.uuid4().hex[:8]}"
    async with Worker(
        temporal_client,
        task_queue=queue,
        workflows=[StepLogWorkflow],
        activities=[counting_step, skipping_step, failing_step],
        interceptors=[StepLogInterceptor()],
    ):
        handle = await temporal_client.start_workflow(StepLogWorkflow.run, id=queue, task_queue=queue)
        await handle.result()
    lines = [json.loads(text) for text in out.getvalue().splitlines()]
    steps = [line for line in lines if line.get("logger") == "activities.step_log"]
    assert {(line["workflow_id"], line["workflow_run_id"], line["workflow_type"]) for line in steps} == {
        (queue, handle.result_run_id, "StepLogWorkflow")
    }
    assert all(line["activity_id"] for line in steps)

    def shown(line: dict[str, Any]) -> dict[str, Any]:
        return {key: value for key, value in line.items() if key not in HIDDEN}

    assert [shown(line) for line in steps] == [
        _line("counting_step", "started"),
        _line("counting_step", "finished", rows=3, done=True, files=2),
        _line("skipping_step", "started"),
        _line("skipping_step", "skipped", reason="already done"),
        _line("failing_step", "started"),
        _line("failing_step", "failed", level="warning", error="Unreachable"),
    ]
    assert EMAIL not in json.dumps(steps)


# Checked above on their own, or the same on every line.
HIDDEN = ("ts", "logger", "component", "workflow_id", "workflow_run_id", "workflow_type", "activity_id")


def _line(step: str, outcome: str, level: str = "info", **fields: Any) -> dict[str, Any]:
    return {
        "event": f"step {outcome}",
        "level": level,
        "activity_type": step,
        "attempt": 1,
        "outcome": outcome,
        **fields,
    }
