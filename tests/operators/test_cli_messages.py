"""Signals, queries, updates and search-attribute lists on a bot deletion, through the real `temporal` CLI."""

from __future__ import annotations

from typing import Any

from temporalio.client import Client

from devstack.seed import rows_per_service, seed
from lifecycle.deletion.contracts import DEFAULT_BATCH_SIZE, MAX_BATCH_SIZE, MIN_BATCH_SIZE
from lifecycle.settings import Settings
from tests.deletion.helpers import remaining_rows
from tests.eventually import eventually
from tests.operators.cli import AsyncCli
from tests.operators.starts import start_bot_deletion
from tests.workers import own_queue, own_worker

ROWS = 300


async def test_pause_query_update_list_resume(
    cli: AsyncCli, temporal_client: Client, settings: Settings, task_queue: str
) -> None:
    seeded = await seed(settings, bots=1, rows=ROWS)
    bot_id = seeded.bot_ids[0]
    account_id = seeded.account_id
    handle = await start_bot_deletion(temporal_client, task_queue, bot_id=bot_id, account_id=account_id)
    wid = handle.id
    # No worker polls yet, so the pause lands before the first slice could delete anything.
    await cli.run("workflow", "signal", "--workflow-id", wid, "--name", "pause")

    async with own_worker(own_queue(settings, task_queue), temporal_client):

        async def paused() -> dict[str, Any] | None:
            answer = await cli.json("workflow", "query", "--workflow-id", wid, "--name", "progress")
            progress: dict[str, Any] = answer["queryResult"][0]
            return progress if progress["status"] == "paused" else None

        progress = await eventually(paused, "the query reports the deletion paused")
        assert progress["batch_size"] == DEFAULT_BATCH_SIZE
        assert await remaining_rows(settings.database_url, bot_id) == rows_per_service(ROWS)

        assert await cli.workflow_ids(f'BotId="{bot_id}"') == {wid}

        async def listed_as_paused() -> bool:
            return wid in await cli.workflow_ids(f'LifecycleStatus="paused" AND AccountId="{account_id}"')

        await eventually(listed_as_paused, "the run is listed by LifecycleStatus=paused")

        update = ("workflow", "update", "execute", "--workflow-id", wid, "--name", "set_batch_size")
        accepted = await cli.json(*update, "--input", "2000")
        assert accepted["result"] == 2000
        rejected = await cli.run(*update, "--input", "5", check=False)
        assert rejected.returncode != 0
        expected = f"batch size must be between {MIN_BATCH_SIZE} and {MAX_BATCH_SIZE}, got 5"
        assert expected in rejected.stderr + rejected.stdout
        answer = await cli.json("workflow", "query", "--workflow-id", wid, "--name", "progress")
        assert answer["queryResult"][0]["batch_size"] == 2000

        # `retry` and `skip` as updates answer; with nothing waiting for an operator, the validator refuses.
        for name in ("retry", "skip"):
            refused = await cli.run("workflow", "update", "execute", "--workflow-id", wid, "--name", name, check=False)
            assert refused.returncode != 0
            assert f"nothing is waiting for an operator: {name} refused" in refused.stderr + refused.stdout
        # The signal of the same name is taken, logged and shown as ignored.
        await cli.run("workflow", "signal", "--workflow-id", wid, "--name", "retry")

        async def shown_as_ignored() -> bool:
            answer = await cli.json("workflow", "query", "--workflow-id", wid, "--name", "progress")
            return answer["queryResult"][0]["ignored_message"] == "nothing is waiting for an operator: retry refused"

        await eventually(shown_as_ignored, "the ignored signal shows in the progress")

        await cli.run("workflow", "signal", "--workflow-id", wid, "--name", "resume")
        result = await handle.result()

    assert all(p.done and not p.skipped for p in result.services.values())
    assert set((await remaining_rows(settings.database_url, bot_id)).values()) == {0}

    async def listed_as_completed() -> bool:
        return wid in await cli.workflow_ids(f'LifecycleStatus="completed" AND BotId="{bot_id}"')

    await eventually(listed_as_completed, "the run is listed by LifecycleStatus=completed")
