"""Starting runs the way the API does (same ids, search attributes and summaries), with operator knobs."""

from __future__ import annotations

from typing import Any

from temporalio.client import Client, WorkflowHandle

from lifecycle.contracts import DEFAULT_BATCH_SIZE, BotDeletionInput, BotDeletionResult
from lifecycle.deletion_starts import BOT_DELETION_WORKFLOW, deletion_search_attributes
from lifecycle.workflow_ids import bot_deletion_id


async def start_bot_deletion(
    client: Client,
    task_queue: str,
    *,
    bot_id: str,
    account_id: str,
    paused: bool = False,
    batch_size: int = DEFAULT_BATCH_SIZE,
) -> WorkflowHandle[Any, BotDeletionResult]:
    return await client.start_workflow(
        BOT_DELETION_WORKFLOW,
        BotDeletionInput(bot_id=bot_id, account_id=account_id, paused=paused, batch_size=batch_size),
        id=bot_deletion_id(bot_id),
        task_queue=task_queue,
        result_type=BotDeletionResult,
        search_attributes=deletion_search_attributes(account_id, bot_id),
        static_summary=f"Delete bot {bot_id}",
        static_details=f"Deletes every row and file of bot {bot_id} (account {account_id}), by service.",
    )
