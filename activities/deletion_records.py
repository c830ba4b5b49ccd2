"""Database bookkeeping around deletions: listing an account's bots, removing the emptied rows."""

from __future__ import annotations

import asyncio
import contextlib
import os

from sqlalchemy import text
from temporalio import activity

from activities.resources import ActivityResources
from lifecycle.contracts import (
    AwaitBotDeletionInput,
    BotDeletionResult,
    FinishAccountDeletionInput,
    FinishBotDeletionInput,
)

# Idempotent: a retry or a reset keeps the first completion time.
_MARK_COMPLETED = text(
    "UPDATE deletion_requests SET completed_at = coalesce(completed_at, now()) WHERE workflow_id = :workflow_id"
)

# How often a waiting activity says it is alive while another run deletes a bot.
_AWAIT_HEARTBEAT_SECONDS = 10


class DeletionRecords:
    def __init__(self, resources: ActivityResources) -> None:
        self._resources = resources

    @activity.defn(name="list_account_bots")
    async def list_account_bots(self, account_id: str) -> list[str]:
        async with self._resources.engine.connect() as conn:
            rows = await conn.execute(
                text("SELECT id FROM bots WHERE account_id = :account ORDER BY id"), {"account": account_id}
            )
            return [str(bot_id) for (bot_id,) in rows]

    @activity.defn(name="finish_bot_deletion")
    async def finish_bot_deletion(self, request: FinishBotDeletionInput) -> None:
        """Remove the bot row (if its data is all gone) and record completion; idempotent."""
        if request.delete_bot_row:
            # The documents' files are gone by now; their directory goes too (kept if anything is left in it).
            with contextlib.suppress(OSError):
                await asyncio.to_thread(os.rmdir, self._resources.settings.storage_path / request.bot_id)
        async with self._resources.engine.begin() as conn:
            if request.delete_bot_row:
                await conn.execute(text("DELETE FROM bots WHERE id = :bot"), {"bot": request.bot_id})
            await conn.execute(_MARK_COMPLETED, {"workflow_id": request.workflow_id})

    @activity.defn(name="finish_account_deletion")
    async def finish_account_deletion(self, request: FinishAccountDeletionInput) -> bool:
        """Delete the keys and the account row once no bot or live site remains; return whether it is gone."""
        async with self._resources.engine.begin() as conn:
            # Sites leave tombstones once torn down or rolled back; those go with the account.
            await conn.execute(
                text("DELETE FROM sites WHERE account_id = :account AND status IN ('deleted', 'rolled_back')"),
                {"account": request.account_id},
            )
            remaining = await conn.execute(
                text(
                    "SELECT (SELECT count(*) FROM bots WHERE account_id = :account)"
                    " + (SELECT count(*) FROM sites WHERE account_id = :account)"
                ),
                {"account": request.account_id},
            )
            if remaining.scalar_one() > 0:
                return False
            await conn.execute(
                text("DELETE FROM api_keys WHERE account_id = :account"), {"account": request.account_id}
            )
            await conn.execute(text("DELETE FROM accounts WHERE id = :account"), {"account": request.account_id})
            await conn.execute(_MARK_COMPLETED, {"workflow_id": request.workflow_id})
            return True

    @activity.defn(name="await_bot_deletion")
    async def await_bot_deletion(self, request: AwaitBotDeletionInput) -> BotDeletionResult:
        """Wait for a bot deletion that another request started; workflows cannot await a non-child."""
        handle = self._resources.client.get_workflow_handle(request.workflow_id, result_type=BotDeletionResult)
        waiting = asyncio.ensure_future(handle.result())
        try:
            while True:
                done, _ = await asyncio.wait({waiting}, timeout=_AWAIT_HEARTBEAT_SECONDS)
                if done:
                    return waiting.result()
                activity.heartbeat()
        finally:
            waiting.cancel()
