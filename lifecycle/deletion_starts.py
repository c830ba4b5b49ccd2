"""Starting deletion workflows so that duplicates collapse: shared by the API and the reconciler."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Literal, cast

import asyncpg
from sqlalchemy.ext.asyncio import AsyncConnection
from temporalio.client import Client
from temporalio.common import (
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)

from lifecycle.contracts import AccountDeletionInput, BotDeletionInput
from lifecycle.priorities import deletion_priority
from lifecycle.search_attributes import ACCOUNT_ID, BOT_ID, LIFECYCLE_STATUS
from lifecycle.statuses import DeletionState
from lifecycle.workflow_ids import account_deletion_id, bot_deletion_id
from lifecycle.workflow_types import ACCOUNT_DELETION_WORKFLOW, BOT_DELETION_WORKFLOW

# A running deletion absorbs repeats (USE_EXISTING).
ON_CONFLICT = WorkflowIDConflictPolicy.USE_EXISTING
# A closed one may be followed by a new run, whatever way it closed. The gate is the bot or account row, not
# the run: the row is deleted only once none of its data remains, and callers start a run only while the row
# exists. So a repeat after a cancel, a terminate, a failure, or a completion whose services an operator
# skipped starts a run that finishes from wherever the data stands (the deleters count on from
# deletion_progress), while a repeat after a real completion finds no row and starts nothing.
# REJECT_DUPLICATE (the old policy) left such rows behind for good; ALLOW_DUPLICATE_FAILED_ONLY would still
# refuse after an operator's skip, which completes the run with data left.
ON_REUSE = WorkflowIDReusePolicy.ALLOW_DUPLICATE

# "Only while the row exists" is checked and the start made under a key-share lock on the row, held until the
# start has returned. A run's last step deletes that row (finish_bot_deletion; finish_account_deletion locks it
# FOR UPDATE first), so it waits for the start, which finds the run still open and joins it. Without the lock,
# a run that deleted the row and completed between the caller's check and its start was followed by a second
# run (ON_REUSE): the flood drill saw it, tests/deletion/test_start_racing_completion.py shows it.
# On the driver's connection, as DELETE /bots/{id}'s own statement: through SQLAlchemy the lock cost the API
# about 1 ms more CPU per request (bench.api, docs/benchmarks.md).
_HOLD_ROW = {
    "bots": "SELECT FROM bots WHERE id = $1::uuid FOR KEY SHARE",
    "accounts": "SELECT FROM accounts WHERE id = $1::uuid FOR KEY SHARE",
}


async def driver_connection(conn: AsyncConnection) -> asyncpg.Connection:
    """`conn`'s asyncpg connection. Use it only while SQLAlchemy has run nothing in `conn`'s transaction: then
    SQLAlchemy has sent no BEGIN (its asyncpg adapter begins lazily, at the first statement it runs)."""
    raw = await conn.get_raw_connection()
    driver = raw.driver_connection
    assert driver is not None, "a pooled connection always has its driver connection"
    return cast(asyncpg.Connection, driver)


async def while_row_exists(
    driver: asyncpg.Connection,
    table: Literal["bots", "accounts"],
    row_id: uuid.UUID | str,
    start: Callable[[], Awaitable[None]],
) -> bool:
    """Run `start` under a key-share lock on the row; False (nothing started) if the row is gone."""
    async with driver.transaction():
        if await driver.fetchrow(_HOLD_ROW[table], row_id) is None:
            return False
        await start()
    return True


def deletion_search_attributes(
    account_id: str, bot_id: str | None = None, status: DeletionState = DeletionState.RUNNING
) -> TypedSearchAttributes:
    """Ids and the starting status only: operators find runs by these, and no PII goes in."""
    pairs = [
        SearchAttributePair(ACCOUNT_ID, account_id),
        SearchAttributePair(LIFECYCLE_STATUS, status.value),
    ]
    if bot_id is not None:
        pairs.append(SearchAttributePair(BOT_ID, bot_id))
    return TypedSearchAttributes(pairs)


async def start_bot_deletion_while_row_exists(
    driver: asyncpg.Connection, client: Client, task_queue: str, *, bot_id: str, account_id: str
) -> bool:
    """Start the bot's deletion, or join the open run; False if the bot row is gone (its deletion completed)."""

    async def start() -> None:
        await start_bot_deletion(client, task_queue, bot_id=bot_id, account_id=account_id)

    return await while_row_exists(driver, "bots", bot_id, start)


async def start_account_deletion_while_row_exists(
    driver: asyncpg.Connection,
    client: Client,
    task_queue: str,
    *,
    account_id: str,
    site_task_queue: str,
    deletes_at: datetime | None = None,
) -> bool:
    """Start the account's deletion, or join the open run; False if the account row is gone (deleted)."""

    async def start() -> None:
        await start_account_deletion(
            client, task_queue, account_id=account_id, site_task_queue=site_task_queue, deletes_at=deletes_at
        )

    return await while_row_exists(driver, "accounts", account_id, start)


async def start_bot_deletion(client: Client, task_queue: str, *, bot_id: str, account_id: str) -> None:
    """Start the bot's deletion, or join the open run. Only through start_bot_deletion_while_row_exists (see
    ON_REUSE), but for the benches' raw side, which measures the start alone."""
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


async def start_account_deletion(
    client: Client, task_queue: str, *, account_id: str, site_task_queue: str, deletes_at: datetime | None = None
) -> None:
    """Start the account's deletion, or join the open run. Only through start_account_deletion_while_row_exists.

    `deletes_at` is the end of its grace period (deletion_requests.deletes_at): a run deletes nothing before it.
    """
    if deletes_at is not None:
        # Once the grace is over (it ran out, or an operator expedited it) a run deletes at once.
        deletes_at = deletes_at.astimezone(UTC) if deletes_at > datetime.now(UTC) else None
    await client.start_workflow(
        ACCOUNT_DELETION_WORKFLOW,
        AccountDeletionInput(
            account_id=account_id,
            site_task_queue=site_task_queue,
            deletes_at=deletes_at.isoformat() if deletes_at is not None else None,
        ),
        id=account_deletion_id(account_id),
        task_queue=task_queue,
        id_conflict_policy=ON_CONFLICT,
        id_reuse_policy=ON_REUSE,
        search_attributes=deletion_search_attributes(
            account_id, status=DeletionState.SCHEDULED if deletes_at else DeletionState.RUNNING
        ),
        priority=deletion_priority(account_id),
        static_summary=f"Delete account {account_id}"
        + (f" after {deletes_at:%Y-%m-%d %H:%M:%S} UTC" if deletes_at else ""),
        static_details=(
            f"Deletes every bot of account {account_id} (child workflows), then the account row once "
            "nothing of it remains, then emails the confirmation once."
        ),
    )
