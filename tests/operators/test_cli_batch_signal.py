"""A batch signal by visibility query: every paused deletion of an account resumes with one command."""

from __future__ import annotations

import asyncio

from temporalio.client import Client

from devstack.seed import seed
from lifecycle.settings import Settings
from tests.deletion.helpers import remaining_rows
from tests.eventually import eventually
from tests.operators.cli import AsyncCli
from tests.operators.starts import start_bot_deletion
from tests.workers import own_queue, own_worker


async def test_resume_every_paused_deletion_of_an_account(
    cli: AsyncCli, temporal_client: Client, settings: Settings, task_queue: str
) -> None:
    seeded = await seed(settings, bots=2, rows=200)
    handles = [
        await start_bot_deletion(temporal_client, task_queue, bot_id=bot_id, account_id=seeded.account_id, paused=True)
        for bot_id in seeded.bot_ids
    ]
    query = f'AccountId="{seeded.account_id}" AND LifecycleStatus="paused"'
    async with own_worker(own_queue(settings, task_queue), temporal_client):

        async def all_paused() -> bool:
            return await cli.workflow_ids(query) == {h.id for h in handles}

        # The batch acts on what visibility lists, so wait until it lists both.
        await eventually(all_paused, "both deletions are listed as paused")
        await cli.run("workflow", "signal", "--query", query, "--name", "resume", "--yes", "--reason", "test")
        results = await asyncio.gather(*(h.result() for h in handles))

    assert all(p.done for result in results for p in result.services.values())
    for bot_id in seeded.bot_ids:
        assert set((await remaining_rows(settings.database_url, bot_id)).values()) == {0}
