"""The site steps' first try inside the workflow task (workflows/sites/first_try.py), on the time-skipping server
with the real activities and PostgreSQL; failures come from the fault-injection interceptor."""

from __future__ import annotations

from temporalio.testing import WorkflowEnvironment

from lifecycle.settings import Settings
from tests.sites.helpers import (
    regular_activities,
    site_state,
    start_creation,
    undos_run,
    workflow_tasks_until_active,
)
from tests.workers import own_queue, own_worker


async def test_steps_that_work_at_once_make_the_site_active_in_one_workflow_task(
    time_skipping_env: WorkflowEnvironment, settings: Settings, site_id: str
) -> None:
    async with own_worker(own_queue(settings), time_skipping_env.client) as worker:
        handle = await start_creation(time_skipping_env.client, worker.task_queue, site_id)
        assert (await handle.result()).status == "active"
        assert await regular_activities(handle) == []
        assert await workflow_tasks_until_active(handle) == 1


async def test_a_failed_first_try_gives_way_to_the_step_as_a_regular_activity(
    time_skipping_env: WorkflowEnvironment, settings: Settings, site_id: str
) -> None:
    async with own_worker(own_queue(settings), time_skipping_env.client, "create_site_database=transient:1") as worker:
        handle = await start_creation(time_skipping_env.client, worker.task_queue, site_id)
        assert (await handle.result()).status == "active"
        assert await regular_activities(handle) == ["create_site_database"]
        assert await undos_run(handle) == []
    state = await site_state(settings, site_id)
    assert state.status == "active" and state.database and state.role and state.directory


async def test_a_failed_first_try_of_the_email_gives_way_to_its_activity_and_the_site_stays(
    time_skipping_env: WorkflowEnvironment, settings: Settings, site_id: str
) -> None:
    faults = "send_site_ready_email=transient:1"
    async with own_worker(own_queue(settings), time_skipping_env.client, faults) as worker:
        handle = await start_creation(time_skipping_env.client, worker.task_queue, site_id)
        assert (await handle.result()).status == "active"
        assert await regular_activities(handle) == ["send_site_ready_email"]
    assert (await site_state(settings, site_id)).status == "active"
