"""An account deletion forwards an operator's pause and resume to its bot deletions one at a time, in order.

Two signals in flight to one run may be delivered in either order; the operator matrix once saw a `resume`
overtake a `pause` and leave the bot deletion paused under a running account, for good.
"""

from __future__ import annotations

import asyncio
import json

import asyncpg
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from devstack.seed import asyncpg_dsn, seed
from lifecycle.deletion.contracts import DeletionStatus
from lifecycle.deletion.workflow_types import bot_deletion_id
from lifecycle.settings import Settings
from tests.deletion.helpers import start_paused_account_deletion
from tests.eventually import eventually
from tests.workers import own_queue, own_worker

_SENT = EventType.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED
_SETTLED = {
    EventType.EVENT_TYPE_EXTERNAL_WORKFLOW_EXECUTION_SIGNALED,
    EventType.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_FAILED,
}


async def test_messages_that_arrive_together_reach_the_bot_deletion_one_at_a_time(
    settings: Settings, temporal_client: Client
) -> None:
    seeded = await seed(settings, bots=1, rows=30)
    own = own_queue(settings)
    account = await start_paused_account_deletion(temporal_client, own, seeded.account_id)
    bot = temporal_client.get_workflow_handle(bot_deletion_id(seeded.bot_ids[0]))

    async def bot_paused() -> bool:
        try:
            return (await bot.query("progress", result_type=DeletionStatus)).status == "paused"
        except Exception:  # not started yet
            return False

    async with own_worker(own, temporal_client):
        await eventually(bot_paused, "the account's bot deletion starts paused")
    # With no worker polling, the operator's messages queue up, and one workflow task takes them all at once.
    for message in ("resume", "pause", "resume"):
        await account.signal(message)
    async with own_worker(own, temporal_client):
        # The last message was `resume`: the bot deletion runs, and so the account's deletion ends.
        result = await asyncio.wait_for(account.result(), timeout=90)
    assert result.status == "completed" and result.account_row_deleted

    in_flight = 0
    sent = 0
    async for event in account.fetch_history_events():
        if event.event_type == _SENT:
            assert in_flight == 0, f"event {event.event_id}: a message was sent while another was in flight"
            in_flight += 1
            sent += 1
        elif event.event_type in _SETTLED:
            in_flight -= 1
    # Each of the three was forwarded (the first two may carry the same state as the last).
    assert sent == 3

    # The account's receipt lists what reached its bot deletion, naming the bot.
    conn = await asyncpg.connect(asyncpg_dsn(settings.database_url))
    try:
        canonical = await conn.fetchval(
            "SELECT canonical FROM deletion_receipts WHERE subject_kind = 'account' AND subject_id = $1::uuid",
            seeded.account_id,
        )
    finally:
        await conn.close()
    actions = json.loads(canonical)["operator_actions"]
    assert {action["action"] for action in actions if action.get("bot") == seeded.bot_ids[0]} >= {"resume"}
