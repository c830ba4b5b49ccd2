"""Starting runs the way the API does (each feature's workflow_types.py: same ids, policies, search attributes
and summaries), with operator knobs the API does not offer: started paused, or with another batch size."""

from __future__ import annotations

from typing import Any

from temporalio.client import Client, WorkflowHandle

from lifecycle.deletion.contracts import DEFAULT_BATCH_SIZE, BotDeletionInput, BotDeletionResult
from lifecycle.deletion.workflow_types import bot_deletion_options


async def start_bot_deletion(
    client: Client,
    task_queue: str,
    *,
    bot_id: str,
    account_id: str,
    paused: bool = False,
    batch_size: int = DEFAULT_BATCH_SIZE,
) -> WorkflowHandle[Any, BotDeletionResult]:
    return await bot_deletion_options(bot_id, account_id).start(
        client,
        BotDeletionInput(bot_id=bot_id, account_id=account_id, paused=paused, batch_size=batch_size),
        task_queue=task_queue,
        result_type=BotDeletionResult,
    )
