"""`temporal workflow cancel` on a site creation mid-flight: the saga undoes what it built."""

from __future__ import annotations

import pytest
from temporalio.client import Client, WorkflowFailureError

from lifecycle.settings import Settings
from tests.eventually import eventually
from tests.operators.cli import AsyncCli
from tests.sites.helpers import site_state, start_creation, undos_run
from tests.workers import own_queue, own_worker

# Bootstrap keeps failing (retryably) so the creation stays in flight with files and database made.
STUCK_BOOTSTRAP = "bootstrap_site=transient:1000"


async def test_cancel_rolls_the_site_back(
    cli: AsyncCli,
    temporal_client: Client,
    settings: Settings,
    task_queue: str,
    site_id: str,
) -> None:
    async with own_worker(own_queue(settings, task_queue), temporal_client, STUCK_BOOTSTRAP):
        handle = await start_creation(temporal_client, task_queue, site_id)

        async def bootstrapping() -> bool:
            answer = await cli.json("workflow", "query", "--workflow-id", handle.id, "--name", "progress")
            return bool(answer["queryResult"][0]["steps"]["bootstrap"] == "running")

        await eventually(bootstrapping, "the creation reaches the bootstrap step")
        assert (await site_state(settings, site_id)).database
        await cli.run("workflow", "cancel", "--workflow-id", handle.id)
        with pytest.raises(WorkflowFailureError):
            await handle.result()
        assert await undos_run(handle) == [
            "drop_site_tables",
            "drop_site_database",
            "remove_site_filesystem",
            "release_site_domain",
        ]

    state = await site_state(settings, site_id)
    assert state.status == "rolled_back"
    assert not (state.database or state.role or state.directory)

    async def listed() -> bool:
        query = f'WorkflowId="{handle.id}" AND LifecycleStatus="rolled_back"'
        return handle.id in await cli.workflow_ids(query)

    await eventually(listed, "the run is listed by LifecycleStatus=rolled_back")
