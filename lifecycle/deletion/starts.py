"""Starting deletion workflows so that duplicates collapse: shared by the API and the reconciler.

A deletion run is started only while its bot or account row exists (DELETION_REUSE, workflow_types.py).
The hard case is a run's end: its last step deletes the row, then the run completes, and DELETION_REUSE allows a
new run after any closing. A request that saw the row, and whose start reached Temporal just after that completion,
began a second run (the flood drill saw it; tests/deletion/test_start_racing_completion.py shows it).

That used to be prevented by a key-share lock on the row, held until the start returned, so the run's last step
waited for the start in flight. No database lock is held across a Temporal call any more; Temporal decides instead:

1. The start asks with ALLOW_DUPLICATE_FAILED_ONLY. Temporal checks a reuse policy against the latest run
   atomically with its own record of how that run closed, so however late the start arrives it joins an open
   run, starts a new run after a cancel, a terminate, a failure or a timeout, and is refused after a completion.
2. Only when it is refused (the last run completed) is the row read again, with nothing else held: gone, and the
   deletion is done, so nothing starts; still there, and the last run completed with data left (an operator's
   skip, or a restore in the grace period), so the start is made again with DELETION_REUSE and begins a new run.

A start that lands just after a real completion thus finds it in step 1 and starts nothing. What step 2 cannot
rule out alone: after a skip, two requests both find the completed run; the first one's new run then starts,
deletes everything and completes before the second one's start (a database read and one call later) arrives.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, Literal

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from temporalio.client import Client
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError

from lifecycle.deletion.contracts import REGISTRY_SETTLE_SECONDS, AccountDeletionInput, BotDeletionInput
from lifecycle.deletion.workflow_types import account_deletion_options, bot_deletion_options
from lifecycle.start_options import StartOptions

# Step 1's question to Temporal: a new run unless the last one completed (then WorkflowAlreadyStartedError).
_UNLESS_COMPLETED = WorkflowIDReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY

# Whether the bot or account row still exists: asked in step 2 only, after a completed run.
RowCheck = Callable[[], Awaitable[bool]]
_ROW_EXISTS = {
    "bots": text("SELECT EXISTS (SELECT FROM bots WHERE id = :id)"),
    "accounts": text("SELECT EXISTS (SELECT FROM accounts WHERE id = :id)"),
}


def row_check(engine: AsyncEngine, table: Literal["bots", "accounts"], row_id: uuid.UUID | str) -> RowCheck:
    """A RowCheck on its own short-lived connection from `engine`'s pool."""

    async def exists() -> bool:
        async with engine.connect() as conn:
            return bool((await conn.execute(_ROW_EXISTS[table], {"id": str(row_id)})).scalar_one())

    return exists


async def _start_unless_done(
    options: StartOptions, client: Client, arg: Any, task_queue: str, row_exists: RowCheck
) -> bool:
    """Steps 1 and 2 above; False if nothing was started or joined (the deletion is done)."""
    try:
        await replace(options, id_reuse_policy=_UNLESS_COMPLETED).start(client, arg, task_queue=task_queue)
        return True
    except WorkflowAlreadyStartedError:
        pass
    if not await row_exists():
        return False
    await options.start(client, arg, task_queue=task_queue)
    return True


async def start_bot_deletion(
    client: Client,
    task_queue: str,
    *,
    bot_id: str,
    account_id: str,
    row_exists: RowCheck,
    reapplies: str | None = None,
    registry_settle_seconds: int = REGISTRY_SETTLE_SECONDS,
) -> bool:
    """Start the bot's deletion, or join the open run; False if it is done (its bot row is gone).

    Call it only once the bot row was seen: `row_exists` is asked only after a completed run. `reapplies`: the
    receipt of the deletion made again after a restore (lifecycle/deletion/after_restore.py).
    """
    return await _start_unless_done(
        bot_deletion_options(bot_id, account_id, reapplies=reapplies),
        client,
        BotDeletionInput(bot_id=bot_id, account_id=account_id, registry_settle_seconds=registry_settle_seconds),
        task_queue,
        row_exists,
    )


async def start_account_deletion(
    client: Client,
    task_queue: str,
    *,
    account_id: str,
    site_task_queue: str,
    row_exists: RowCheck,
    deletes_at: datetime | None = None,
    reapplies: str | None = None,
    registry_settle_seconds: int = REGISTRY_SETTLE_SECONDS,
) -> bool:
    """Start the account's deletion, or join the open run; False if it is done (its account row is gone).

    Call it only once the account row was seen. `deletes_at` is the end of its grace period
    (deletion_requests.deletes_at): a run deletes nothing before it. `reapplies`: the receipt of the deletion made
    again after a restore (lifecycle/deletion/after_restore.py), which has no grace period.
    """
    if deletes_at is not None:
        # Once the grace is over (it ran out, or an operator expedited it) a run deletes at once.
        deletes_at = deletes_at.astimezone(UTC) if deletes_at > datetime.now(UTC) else None
    return await _start_unless_done(
        account_deletion_options(account_id, deletes_at=deletes_at, reapplies=reapplies),
        client,
        AccountDeletionInput(
            account_id=account_id,
            site_task_queue=site_task_queue,
            deletes_at=deletes_at.isoformat() if deletes_at is not None else None,
            registry_settle_seconds=registry_settle_seconds,
        ),
        task_queue,
        row_exists,
    )
