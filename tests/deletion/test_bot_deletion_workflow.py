"""Every branch of the bot deletion workflow on the time-skipping test server."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
import pytest_asyncio
from temporalio.api.enums.v1 import EventType
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.common import WorkerDeploymentVersion
from temporalio.exceptions import CancelledError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from lifecycle.deletion.contracts import BotDeletionInput, BotDeletionResult, DeletionStatus
from lifecycle.deletion.registry import DELETE_SUBJECT_DATA
from lifecycle.worker_deployment import deployment_config
from lifecycle.workflow_runner import workflow_runner
from tests.conftest import start_time_skipping
from tests.deletion.fakes import ROWS_PER_SERVICE, SERVICES, FakeBotServices
from tests.eventually import eventually
from workflows.deletion.bot import BotDeletionWorkflow


@dataclass
class Harness:
    client: Client
    services: FakeBotServices
    task_queue: str

    async def start(self, **overrides: object) -> WorkflowHandle[BotDeletionWorkflow, BotDeletionResult]:
        bot_id = str(uuid.uuid4())
        request = BotDeletionInput(bot_id=bot_id, account_id=str(uuid.uuid4()), **overrides)  # type: ignore[arg-type]
        return await self.client.start_workflow(
            BotDeletionWorkflow.run, request, id=f"bot-deletion-{bot_id}", task_queue=self.task_queue
        )


@pytest.fixture
def services() -> FakeBotServices:
    return FakeBotServices()


@contextlib.asynccontextmanager
async def _harness(env: WorkflowEnvironment, services: FakeBotServices) -> AsyncIterator[Harness]:
    task_queue = f"bot-deletion-{uuid.uuid4().hex[:8]}"
    async with (
        services.serving(env.client, task_queue),
        Worker(
            env.client,
            task_queue=task_queue,
            workflows=[BotDeletionWorkflow],
            workflow_runner=workflow_runner(),
            activities=services.activities(),
            # Versioned, as the SDK requires of a type that declares a versioning behaviour; the time-skipping
            # server dispatches to it without a current version.
            deployment_config=deployment_config(WorkerDeploymentVersion(task_queue, "time-skipping")),
            # Heartbeats reach the server at once, so a cancellation reaches a held deleter in moments rather than
            # at its next heartbeat after the SDK's throttle (8 s: 0.8 of the deleter's 10 s heartbeat timeout).
            max_heartbeat_throttle_interval=timedelta(milliseconds=100),
        ),
    ):
        yield Harness(env.client, services, task_queue)


@pytest_asyncio.fixture
async def harness(time_skipping_env: WorkflowEnvironment, services: FakeBotServices) -> AsyncIterator[Harness]:
    async with _harness(time_skipping_env, services) as started:
        yield started


async def _scheduled_calls_once_idle(handle: WorkflowHandle[Any, Any]) -> int | None:
    """How many DeleteSubjectData calls the run scheduled, once its last workflow task completed with every
    activity closed (so it decided, on everything that happened, to schedule nothing more); None until then."""
    history = (await handle.fetch_history()).events
    events = [event.event_type for event in history]
    scheduled = events.count(EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED)
    closed = sum(events.count(kind) for kind in _ACTIVITY_CLOSED)
    # A run that went on to the end is idle too: then what it scheduled is the answer.
    settled = (EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED)
    idle = events[-1] in settled and closed == scheduled
    deleter_calls = sum(
        1
        for event in history
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and event.activity_task_scheduled_event_attributes.activity_type.name == DELETE_SUBJECT_DATA
    )
    return deleter_calls if idle else None


_ACTIVITY_CLOSED = (
    EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED,
    EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED,
    EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT,
    EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED,
)


async def progress(handle: WorkflowHandle[BotDeletionWorkflow, BotDeletionResult]) -> DeletionStatus:
    return await handle.query(BotDeletionWorkflow.progress)


def all_deleted(result: BotDeletionResult) -> bool:
    return all(result.services[s].deleted == ROWS_PER_SERVICE == result.services[s].total for s in SERVICES)


async def test_happy_path_deletes_every_service_then_the_bot_row(harness: Harness) -> None:
    handle = await harness.start()
    result = await handle.result()
    assert all_deleted(result)
    assert [f.delete_bot_row for f in harness.services.finished] == [True]
    assert (await progress(handle)).status == "completed"
    # Each status the run entered is recorded (the API reads it there), the last one before the run closed.
    assert harness.services.statuses == ["running", "completed"]
    # Services run side by side; each one's slices resume from the cursor its previous slice returned.
    for service in SERVICES:
        cursors = [call.cursor for call in harness.services.calls_of(service)]
        assert cursors == [""] + [str(n * ROWS_PER_SERVICE // 4) for n in range(1, 4)]
    # Its own count is the receipt's check of each service.
    [receipt] = harness.services.receipts
    assert sorted((v.service, v.remaining_rows, v.remaining_files) for v in receipt.verified) == sorted(
        (service, 0, 0) for service in SERVICES
    )


async def test_pause_stops_after_the_current_call_and_resume_continues_with_a_new_batch_size(
    harness: Harness, services: FakeBotServices
) -> None:
    services.gate = asyncio.Event()
    handle = await harness.start()
    await eventually(lambda: services.calls, "the first service call starts")
    await handle.signal(BotDeletionWorkflow.pause)
    assert (await progress(handle)).status == "paused"
    services.gate.set()
    gated = services.calls[0].service
    await eventually(lambda: _slice_recorded(handle, gated), "the gated call finishes and its progress is recorded")
    calls_before_pause = len(services.calls)
    # Observed, not slept on: the run has answered every completed call and sits with nothing scheduled.
    scheduled = await eventually(lambda: _scheduled_calls_once_idle(handle), "the paused run goes idle")
    assert scheduled == calls_before_pause == len(services.calls), "a paused deletion must not start another call"
    assert services.statuses == ["running", "paused"]

    with pytest.raises(WorkflowUpdateFailedError) as rejected:
        await handle.execute_update(BotDeletionWorkflow.set_batch_size, 10)
    assert "between 100 and 100000" in str(rejected.value.cause)
    assert await handle.execute_update(BotDeletionWorkflow.set_batch_size, 1_000) == 1_000

    await handle.signal(BotDeletionWorkflow.resume)
    assert all_deleted(await handle.result())
    assert services.calls[0].request.batch_rows != 1_000
    assert {c.request.batch_rows for c in services.calls[calls_before_pause:]} == {1_000}
    assert services.statuses == ["running", "paused", "running", "completed"]


async def _slice_recorded(handle: WorkflowHandle[BotDeletionWorkflow, BotDeletionResult], service: str) -> bool:
    status = await progress(handle)
    return status.services[service].deleted > 0


async def test_poison_pill_alerts_waits_for_operator_then_retry_completes(
    harness: Harness, services: FakeBotServices
) -> None:
    services.failures = {"notes": 1}
    handle = await harness.start()
    status = await eventually(lambda: _waiting(handle), "the deletion waits for an operator")
    assert status.waiting_on == "notes"
    # The run shows it waits before the alert goes out (workflows/deletion/operator_gate.py).
    alerts = await eventually(lambda: [a.subject for a in services.alerts], "the operator is alerted")
    assert alerts == ["bot deletion stuck on notes"]

    await handle.signal(BotDeletionWorkflow.retry)
    result = await handle.result()
    assert all_deleted(result)
    assert [f.delete_bot_row for f in services.finished] == [True]
    # The receipt is asked for once, last, and records what the operator did.
    [receipt] = services.receipts
    assert [(a.action, a.target) for a in receipt.operator_actions] == [("retry", "notes")]


async def test_repeated_failures_become_a_poison_pill_and_skip_leaves_the_bot_row(
    harness: Harness, services: FakeBotServices, time_skipping_env: WorkflowEnvironment
) -> None:
    services.failures = {"notes": -1}
    services.non_retryable = False
    handle = await harness.start()

    async def waiting_after_a_skip() -> DeletionStatus | None:
        # The retries' backoffs (1, 2, 4 and 8 s) pass in skipped time: each look first skips a second.
        await time_skipping_env.sleep(timedelta(seconds=1))
        return await _waiting(handle)

    await eventually(waiting_after_a_skip, "the deletion waits for an operator")
    # Five attempts (the retry policy's cap), then the operator path: no endless silent retries.
    assert len(services.calls_of("notes")) == 5
    await eventually(lambda: services.alerts, "the operator is alerted")

    await handle.signal(BotDeletionWorkflow.skip)
    result = await handle.result()
    assert result.services["notes"].skipped
    assert result.services["files"].deleted == ROWS_PER_SERVICE
    assert [f.delete_bot_row for f in services.finished] == [False]
    assert len(services.alerts) == 1
    assert services.statuses == ["running", "waiting_for_operator", "running", "incomplete"]
    # An incomplete deletion gets its receipt too: it will say what remains.
    [receipt] = services.receipts
    assert [(a.action, a.target) for a in receipt.operator_actions] == [("skip", "notes")]


async def _waiting(handle: WorkflowHandle[BotDeletionWorkflow, BotDeletionResult]) -> DeletionStatus | None:
    status = await progress(handle)
    return status if status.status == "waiting_for_operator" else None


async def test_cancellation_stops_the_running_service_call(services: FakeBotServices) -> None:
    # A test server of its own: the run closes while its deleter still runs (see the time_skipping_env fixture).
    env = await start_time_skipping()
    try:
        async with _harness(env, services) as harness:
            services.gate = asyncio.Event()
            handle = await harness.start()
            await eventually(lambda: services.calls, "the first service call starts")
            await handle.cancel()
            with pytest.raises(WorkflowFailureError) as failure:
                await handle.result()
            assert isinstance(failure.value.cause, CancelledError)
            await eventually(lambda: services.cancelled, "the service call sees the cancellation")
            assert services.finished == []
            # Recorded by the run itself, before it closed.
            assert services.statuses == ["running", "cancelled"]
    finally:
        await env.shutdown()


async def test_long_deletion_continues_as_new_and_keeps_its_progress(
    harness: Harness, services: FakeBotServices
) -> None:
    services.rows_per_call = 50  # 20 calls per service, 60 in all: far past the limit below
    handle = await harness.start(continue_as_new_after_events=40, batch_size=700)
    await handle.signal(BotDeletionWorkflow.pause)
    await handle.signal(BotDeletionWorkflow.resume)
    result = await handle.result()
    assert all_deleted(result)
    final_run = await handle.describe()
    assert final_run.run_id != handle.first_execution_run_id
    assert len(services.calls) == 60, "no slice is repeated across runs"
    assert {c.request.batch_rows for c in services.calls} == {700}
    # The operator's actions travel with the runs, and the receipt's key is the chain's first run.
    [receipt] = services.receipts
    assert [a.action for a in receipt.operator_actions] == ["pause", "resume"]
    assert receipt.first_run_id == handle.first_execution_run_id != receipt.run_id


async def test_the_registry_is_read_once_and_carried_across_continue_as_new(
    harness: Harness, services: FakeBotServices
) -> None:
    """A registered service's slices resume from its own cursor in every run, and only the first run reads the
    registry: later runs (and replays) call the same services."""
    services.rows_per_call = 100
    handle = await harness.start(continue_as_new_after_events=40)
    result = await handle.result()
    assert (await handle.describe()).run_id != handle.first_execution_run_id
    assert services.registry_reads == 1
    for service in SERVICES:
        assert [call.cursor for call in services.calls_of(service)] == [""] + [str(n * 100) for n in range(1, 10)]
        assert result.services[service].deleted == ROWS_PER_SERVICE == result.services[service].total
    assert all(record.progress.done for record in services.service_records[-len(SERVICES) :])


async def test_rows_that_reappear_after_a_service_is_done_are_deleted_again(
    harness: Harness, services: FakeBotServices
) -> None:
    services.reappearing = 1
    result = await (await harness.start()).result()
    assert result.status == "completed"
    # The bot row goes once, after every service's own count found nothing.
    assert [f.delete_bot_row for f in services.finished] == [True]
    # The second round called the raced service again, and only that one, from the cursor it last answered
    # (where it goes from is its own business); what it deleted then is counted on top.
    assert [c.service for c in services.calls[-1:]] == ["notes"]
    assert services.calls[-1].request.cursor == str(ROWS_PER_SERVICE)
    assert result.services["notes"].deleted == ROWS_PER_SERVICE + 1
    assert services.alerts == []


async def test_rows_that_keep_reappearing_go_to_an_operator_and_skip_ends_incomplete(
    harness: Harness, services: FakeBotServices
) -> None:
    services.reappearing = 100
    handle = await harness.start()
    status = await eventually(lambda: _waiting(handle), "the deletion waits for an operator")
    assert status.waiting_on == "notes"
    # The run shows it waits as it sends the alert: the alert may land a moment after the status.

    async def alerted() -> list[str]:
        return [a.subject for a in services.alerts]

    assert await eventually(alerted, "the operator is alerted", until=bool) == ["bot deletion: rows keep arriving"]
    assert await handle.execute_update("skip", result_type=str) == "skipping notes; its rows and the bot row stay"
    result = await handle.result()
    assert result.status == "incomplete"
    assert result.services["notes"].skipped
    assert services.finished[-1].delete_bot_row is False
    assert services.finished[-1].skipped_services == ["notes"]


async def test_operator_updates_are_refused_while_nothing_waits_and_signals_are_shown_as_ignored(
    harness: Harness, services: FakeBotServices
) -> None:
    services.gate = asyncio.Event()
    handle = await harness.start()
    await eventually(lambda: services.calls, "the first service call starts")
    for name in ("retry", "skip"):
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await handle.execute_update(name, result_type=str)
        assert f"nothing is waiting for an operator: {name} refused" in str(refused.value.cause)
    await handle.signal(BotDeletionWorkflow.skip)
    status = await eventually(lambda: _ignored(handle), "the ignored signal shows in the progress")
    assert status.ignored_message == "nothing is waiting for an operator: skip refused"
    # What the UI shows as the run's current details (the built-in metadata query).
    metadata = await handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
    assert "skip refused" in metadata.current_details
    services.gate.set()
    result = await handle.result()
    assert all_deleted(result) and not any(p.skipped for p in result.services.values())


async def _ignored(handle: WorkflowHandle[BotDeletionWorkflow, BotDeletionResult]) -> DeletionStatus | None:
    status = await progress(handle)
    return status if status.ignored_message else None


async def test_a_failing_alert_still_reaches_the_operator(harness: Harness, services: FakeBotServices) -> None:
    services.failures = {"notes": 1}
    services.alerts_fail = True
    handle = await harness.start()
    status = await eventually(lambda: _waiting(handle), "the deletion waits for an operator")
    assert status.waiting_on == "notes"
    await eventually(lambda: services.alerts, "the alert was attempted")
    assert await handle.execute_update("retry", result_type=str) == "retrying notes"
    assert all_deleted(await handle.result())
