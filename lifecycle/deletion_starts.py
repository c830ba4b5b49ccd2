"""Starting deletion workflows so that duplicates collapse: shared by the API and the reconciler."""

from __future__ import annotations

from temporalio.client import Client
from temporalio.common import (
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from temporalio.exceptions import WorkflowAlreadyStartedError

from lifecycle.contracts import AccountDeletionInput, BotDeletionInput
from lifecycle.priorities import deletion_priority
from lifecycle.search_attributes import ACCOUNT_ID, BOT_ID, LIFECYCLE_STATUS
from lifecycle.workflow_ids import account_deletion_id, bot_deletion_id
from lifecycle.workflow_types import ACCOUNT_DELETION_WORKFLOW, BOT_DELETION_WORKFLOW

# A running deletion absorbs repeats (USE_EXISTING); a finished one is never run again (REJECT_DUPLICATE),
# and its WorkflowAlreadyStartedError means "already done".
ON_CONFLICT = WorkflowIDConflictPolicy.USE_EXISTING
ON_REUSE = WorkflowIDReusePolicy.REJECT_DUPLICATE


def deletion_search_attributes(account_id: str, bot_id: str | None = None) -> TypedSearchAttributes:
    """Ids and the starting status only: operators find runs by these, and no PII goes in."""
    pairs = [SearchAttributePair(ACCOUNT_ID, account_id), SearchAttributePair(LIFECYCLE_STATUS, "running")]
    if bot_id is not None:
        pairs.append(SearchAttributePair(BOT_ID, bot_id))
    return TypedSearchAttributes(pairs)


async def start_bot_deletion(client: Client, task_queue: str, *, bot_id: str, account_id: str) -> bool:
    """Start (or join) the bot's deletion. False when it already finished: an answer, not an error."""
    try:
        await client.start_workflow(
            BOT_DELETION_WORKFLOW,
            BotDeletionInput(bot_id=bot_id, account_id=account_id),
            id=bot_deletion_id(bot_id),
            task_queue=task_queue,
            id_conflict_policy=ON_CONFLICT,
            id_reuse_policy=ON_REUSE,
            search_attributes=deletion_search_attributes(account_id, bot_id),
            priority=deletion_priority(account_id),
            static_summary=f"Delete bot {bot_id}",
            static_details=f"Deletes every row and file of bot {bot_id} (account {account_id}), by service.",
        )
    except WorkflowAlreadyStartedError:
        return False
    return True


async def start_account_deletion(client: Client, task_queue: str, *, account_id: str) -> bool:
    """Start (or join) the account's deletion; False when it already finished."""
    try:
        await client.start_workflow(
            ACCOUNT_DELETION_WORKFLOW,
            AccountDeletionInput(account_id=account_id),
            id=account_deletion_id(account_id),
            task_queue=task_queue,
            id_conflict_policy=ON_CONFLICT,
            id_reuse_policy=ON_REUSE,
            search_attributes=deletion_search_attributes(account_id),
            priority=deletion_priority(account_id),
            static_summary=f"Delete account {account_id}",
            static_details=(
                f"Deletes every bot of account {account_id} (child workflows), then the account row, "
                "then emails the confirmation once."
            ),
        )
    except WorkflowAlreadyStartedError:
        return False
    return True
