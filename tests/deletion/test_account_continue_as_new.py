"""An account deletion with many bots continues as new between waves of bot deletions: the operator's pause and
the counts go with it, and a new run deletes a wave before it may continue as new again."""

from __future__ import annotations

import asyncio
from email import message_from_bytes

import httpx
import pytest
from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError
from temporalio.worker import Replayer

from devstack.seed import rows_per_service, seed
from devstack.smtp_sink import SmtpSink
from lifecycle.data_converter import DATA_CONVERTER
from lifecycle.deletion.contracts import DeletionStatus
from lifecycle.deletion.workflow_types import bot_deletion_id
from lifecycle.settings import Settings
from lifecycle.workflow_runner import workflow_runner
from tests.conftest import ADMIN_HEADERS
from tests.db import fetchval
from tests.deletion.helpers import remaining_rows, start_paused_account_deletion
from tests.eventually import eventually
from worker import LifecycleWorkers
from workflows.registry import WORKFLOWS

ROWS = 30


async def _status(handle: WorkflowHandle) -> str | None:
    try:
        return (await handle.query("progress", result_type=DeletionStatus)).status
    except RPCError:  # not started yet, or closed
        return None


@pytest.mark.long
async def test_a_paused_account_deletion_stays_paused_across_continue_as_new(
    settings: Settings,
    temporal_client: Client,
    worker: LifecycleWorkers,
    smtp_sink: SmtpSink,
    api: httpx.AsyncClient,
) -> None:
    seeded = await seed(settings, bots=2, rows=ROWS)
    address = await fetchval(settings.database_url, "SELECT email FROM accounts WHERE id = $1::uuid", seeded.account_id)
    # One bot per wave, and a history always "long": it continues as new after every wave.
    account = await start_paused_account_deletion(
        temporal_client, settings, seeded.account_id, max_concurrent_bots=1, continue_as_new_after_events=1
    )
    # The admin's re-drive joins it, and marks and records the account (the confirmation's address) as the API does.
    joined = await api.post(f"/accounts/{seeded.account_id}/deletion", headers=ADMIN_HEADERS)
    assert joined.status_code == 202, joined.text
    bots = {bot_id: temporal_client.get_workflow_handle(bot_deletion_id(bot_id)) for bot_id in seeded.bot_ids}

    async def first_wave() -> str | None:
        for bot_id, handle in bots.items():
            if await _status(handle) == "paused":
                return bot_id
        return None

    first = await eventually(first_wave, "the first wave's bot deletion starts paused, as the account is")
    (second,) = set(bots) - {first}
    first_run = (await account.describe()).run_id
    # An operator lets that one bot deletion go; the account itself stays paused.
    await bots[first].signal("resume")

    async def next_run_waits_paused() -> bool:
        return await _status(bots[second]) == "paused" and await _status(account) == "paused"

    await eventually(next_run_waits_paused, "the next run holds the pause: its bot deletion starts paused")
    assert (await account.describe()).run_id != first_run
    assert set((await remaining_rows(settings.database_url, second)).values()) != {0}

    await account.signal("resume")
    result = await asyncio.wait_for(account.result(), timeout=90)
    assert result.status == "completed" and result.account_row_deleted and result.bots_deleted == 2
    # The counts went across: every row of both bots, once.
    expected = rows_per_service(ROWS)
    assert {name: p.deleted for name, p in result.services.items() if name in expected} == {
        name: 2 * n for name, n in expected.items()
    }
    runs = [run async for run in temporal_client.list_workflows(f'WorkflowId = "{account.id}"')]
    assert len(runs) == 2
    # The run that continued as new (after its handlers finished) replays against the code.
    history = await temporal_client.get_workflow_handle(account.id, run_id=first_run).fetch_history()
    await Replayer(
        workflows=WORKFLOWS, workflow_runner=workflow_runner(), data_converter=DATA_CONVERTER
    ).replay_workflow(history)
    mails = [message_from_bytes(path.read_bytes()) for path in smtp_sink.messages()]
    assert len([m for m in mails if m["To"] == address]) == 1
