"""The creation saga on the time-skipping server, with the real activities and PostgreSQL; failures come
from the fault-injection interceptor."""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from lifecycle.settings import Settings
from lifecycle.sites.contracts import SiteProgress
from lifecycle.stuck import RunKind
from tests.eventually import eventually
from tests.sites.helpers import scheduled_activities, site_state, start_creation, undos_run
from tests.stuck import assert_alerts_once_stuck
from tests.workers import own_queue, own_worker

FORWARD = ["save_site_metadata", "create_site_filesystem", "create_site_database", "bootstrap_site"]
STEP_ACTIVITIES = dict(zip(["metadata", "filesystem", "database", "bootstrap"], FORWARD, strict=True))
ALL_UNDOS = ["drop_site_tables", "drop_site_database", "remove_site_filesystem", "release_site_domain"]


async def test_happy_path(time_skipping_env: WorkflowEnvironment, settings: Settings, site_id: str) -> None:
    async with own_worker(own_queue(settings), time_skipping_env.client) as worker:
        handle = await start_creation(time_skipping_env.client, worker.task_queue, site_id)
        progress = await handle.result()
        assert progress.status == "active"
        assert await scheduled_activities(handle) == [*FORWARD, "activate_site", "send_site_ready_email"]
    state = await site_state(settings, site_id)
    assert state.status == "active"
    assert state.steps == dict.fromkeys(["metadata", "filesystem", "database", "bootstrap"], "done")
    assert state.database and state.role and state.directory
    assert state.options["blogname"] == "My blog"


@pytest.mark.parametrize(
    ("failing", "expected_undos"),
    [
        ("save_site_metadata", ["release_site_domain"]),
        # Both parallel steps registered their undo before the failure; both are undone.
        ("create_site_filesystem", ["drop_site_database", "remove_site_filesystem", "release_site_domain"]),
        ("create_site_database", ["drop_site_database", "remove_site_filesystem", "release_site_domain"]),
        ("bootstrap_site", ALL_UNDOS),
    ],
)
async def test_permanent_failure_rolls_back_in_reverse(
    time_skipping_env: WorkflowEnvironment,
    settings: Settings,
    site_id: str,
    failing: str,
    expected_undos: list[str],
) -> None:
    async with own_worker(own_queue(settings), time_skipping_env.client, f"{failing}=permanent") as worker:
        handle = await start_creation(time_skipping_env.client, worker.task_queue, site_id)
        with pytest.raises(WorkflowFailureError):
            await handle.result()
        assert await undos_run(handle) == expected_undos
        # The operator's view keeps the cause; the site row, which the customer sees, only the failed step's code.
        assert "injected permanent fault" in ((await handle.query("progress", result_type=SiteProgress)).error or "")
    state = await site_state(settings, site_id)
    assert state.status == "rolled_back"
    step = next(step for step, activity in STEP_ACTIVITIES.items() if activity == failing)
    assert state.error == f"{step}_failed"
    assert not (state.database or state.role or state.directory)


async def test_transient_failure_then_success(
    time_skipping_env: WorkflowEnvironment, settings: Settings, site_id: str
) -> None:
    async with own_worker(own_queue(settings), time_skipping_env.client, "create_site_database=transient:3") as worker:
        handle = await start_creation(time_skipping_env.client, worker.task_queue, site_id)
        assert (await handle.result()).status == "active"
        assert await undos_run(handle) == []
    assert (await site_state(settings, site_id)).database


async def test_retry_budget_spent_rolls_back(
    time_skipping_env: WorkflowEnvironment, settings: Settings, site_id: str
) -> None:
    async with own_worker(own_queue(settings), time_skipping_env.client, "bootstrap_site=transient:99") as worker:
        handle = await start_creation(time_skipping_env.client, worker.task_queue, site_id)
        with pytest.raises(WorkflowFailureError):
            await handle.result()
        assert await undos_run(handle) == ALL_UNDOS
    assert (await site_state(settings, site_id)).status == "rolled_back"


async def step_attempt(handle: WorkflowHandle[Any, Any]) -> int:
    """The attempt the step in flight is at."""
    pending = (await handle.describe()).raw_description.pending_activities
    return max((activity.attempt for activity in pending), default=0)


@pytest.mark.parametrize(
    ("step", "expected_undos"),
    [
        ("metadata", ["release_site_domain"]),
        ("database", ["drop_site_database", "remove_site_filesystem", "release_site_domain"]),
        ("filesystem", ["drop_site_database", "remove_site_filesystem", "release_site_domain"]),
        ("bootstrap", ALL_UNDOS),
    ],
)
async def test_cancellation_during_a_step_rolls_back(
    temporal_client: Client,
    settings: Settings,
    site_id: str,
    step: str,
    expected_undos: list[str],
) -> None:
    """On the real server: the time-skipping test server skips the step's retry backoff, so its last failure can
    land in the workflow task that cancels it, and that server then refuses the task for good ("ACTIVITY_UNKNOWN
    for scheduledEventId", temporalio/sdk-java#2391; it hung this test once). The real server accepts it."""
    activity = STEP_ACTIVITIES[step]
    # The step keeps failing and retrying, so the cancellation lands while it is in flight.
    async with own_worker(own_queue(settings), temporal_client, f"{activity}=transient:99") as worker:
        handle = await start_creation(temporal_client, worker.task_queue, site_id)
        await eventually(
            lambda: handle.query("progress", result_type=SiteProgress),
            f"the {step} step is running",
            until=lambda progress: progress.steps[step] == "running",
        )
        # Retried without end, the step moves nothing: the creation is stuck, and its attempts are not progress.
        attempt = await step_attempt(handle)
        await assert_alerts_once_stuck(
            settings,
            temporal_client,
            RunKind.SITE_CREATION,
            site_id,
            meanwhile=lambda: eventually(lambda: step_attempt(handle), "a retry", until=lambda now: now > attempt),
        )
        await handle.cancel()
        with pytest.raises(WorkflowFailureError):
            await handle.result()
        assert await undos_run(handle) == expected_undos
    state = await site_state(settings, site_id)
    assert (state.status, state.error) == ("rolled_back", "cancelled")
    assert not (state.database or state.role or state.directory)


async def test_cancellation_before_the_first_step_rolls_back(
    temporal_client: Client, settings: Settings, site_id: str
) -> None:
    """On the real server, cancelled right after the start, usually before the first workflow task: the
    rollback still runs to the end and frees the domain (a parallel first step once left it `rolling_back`,
    docs/benchmarks.md)."""
    async with own_worker(own_queue(settings), temporal_client, "save_site_metadata=transient:99") as worker:
        handle = await start_creation(temporal_client, worker.task_queue, site_id)
        await handle.cancel()
        with pytest.raises(WorkflowFailureError):
            await handle.result()
        assert (await undos_run(handle))[-1] == "release_site_domain"
    state = await site_state(settings, site_id)
    # The reason is "cancelled", or the step's failure when the cancellation found it waiting to retry.
    assert state.status == "rolled_back"
    assert not (state.database or state.role or state.directory)


async def test_undo_failing_transiently_still_completes(
    time_skipping_env: WorkflowEnvironment, settings: Settings, site_id: str
) -> None:
    faults = "bootstrap_site=permanent,drop_site_database=transient:4"
    async with own_worker(own_queue(settings), time_skipping_env.client, faults) as worker:
        handle = await start_creation(time_skipping_env.client, worker.task_queue, site_id)
        with pytest.raises(WorkflowFailureError):
            await handle.result()
        assert await undos_run(handle) == ALL_UNDOS
    state = await site_state(settings, site_id)
    assert state.status == "rolled_back"
    assert not (state.database or state.role or state.directory)
