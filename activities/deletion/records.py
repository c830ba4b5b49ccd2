"""Database bookkeeping around deletions: listing an account's bots, recording each status change, removing the
emptied rows."""

from __future__ import annotations

from sqlalchemy import text
from temporalio import activity
from temporalio.client import WorkflowExecutionStatus
from temporalio.exceptions import ApplicationError

from activities.heartbeat import heartbeats
from activities.polling import raise_if_running
from activities.resources import ActivityResources
from activities.step_log import step_skipped
from lifecycle.deletion.contracts import (
    AwaitBotDeletionInput,
    BotDeletionResult,
    FinishAccountDeletionInput,
    FinishBotDeletionInput,
    FinishBotDeletionResult,
)
from lifecycle.deletion.workflow_types import bot_deletion_id
from lifecycle.shared_contracts import DeletionStatusChange
from lifecycle.statuses import TOMBSTONE_SITE_STATUSES

# The ApplicationError type await_bot_deletion raises when the run it waited for closed without completing
# (cancelled, terminated, failed): the account deletion then re-drives the bot's deletion.
BOT_DELETION_NOT_COMPLETED = "BotDeletionNotCompleted"

# Idempotent: a retry or a reset keeps the first completion time.
_MARK_COMPLETED = text(
    "UPDATE deletion_requests SET completed_at = coalesce(completed_at, now()) WHERE workflow_id = :workflow_id"
)
# One statement, so its own transaction with the event the trigger appends (migration 0009) when the status
# changes. Idempotent: a retry, or a replay after a reset, that finds the status already recorded by this run
# changes only when it was last confirmed, and appends no event; a new run recording the status its predecessor
# left takes it over.
_RECORD_STATUS = text(
    "UPDATE deletion_requests SET status = :status, status_reason = :reason, status_run_id = :run_id,"
    " status_confirmed_at = now() WHERE workflow_id = :workflow_id"
)
_RECORD_SKIP = text(
    "INSERT INTO deletion_progress (workflow_id, service, done, skipped) VALUES (:workflow_id, :service, true, true)"
    " ON CONFLICT (workflow_id, service) DO UPDATE SET done = true, skipped = true, updated_at = now(),"
    " progressed_at = now()"
)


class DeletionRecords:
    def __init__(self, resources: ActivityResources) -> None:
        self._resources = resources

    @activity.defn(name="list_account_bots")
    @heartbeats
    async def list_account_bots(self, account_id: str) -> list[str]:
        """The account's bots, each recorded as a requested deletion, so the account's status adds them up."""
        async with self._resources.engine.begin() as conn:
            rows = await conn.execute(
                text("SELECT id FROM bots WHERE account_id = :account ORDER BY id"), {"account": account_id}
            )
            bot_ids = [str(bot_id) for (bot_id,) in rows]
            due = self._resources.settings.erasure_due_within
            if bot_ids:
                await conn.execute(
                    text(
                        "INSERT INTO deletion_requests (workflow_id, kind, account_id, bot_id, due_at)"
                        " VALUES (:workflow_id, 'bot', :account, :bot, now() + :due_within)"
                        " ON CONFLICT (workflow_id) DO NOTHING"
                    ),
                    [
                        {"workflow_id": bot_deletion_id(bot), "account": account_id, "bot": bot, "due_within": due}
                        for bot in bot_ids
                    ],
                )
            return bot_ids

    @activity.defn(name="record_deletion_status")
    async def record_deletion_status(self, change: DeletionStatusChange) -> None:
        """Record the status a run entered, with its reason (None clears the last one): the API and the streams
        read it from here, never from Temporal.

        A deletion with no record (a run started by hand, without the API) has nothing to update.
        """
        async with self._resources.engine.connect() as conn:
            autocommit = await conn.execution_options(isolation_level="AUTOCOMMIT")
            await autocommit.execute(
                _RECORD_STATUS,
                {
                    "workflow_id": change.workflow_id,
                    "status": str(change.status),
                    "reason": change.reason,
                    "run_id": activity.info().workflow_run_id,
                },
            )

    @activity.defn(name="finish_bot_deletion")
    @heartbeats
    async def finish_bot_deletion(self, request: FinishBotDeletionInput) -> FinishBotDeletionResult:
        """Remove the bot row and record completion, unless an operator skipped a service.

        Idempotent. The services own their data in stores of their own, so no foreign key can prove that nothing
        of the bot remains there: the workflow calls this only once every service's own count
        (VerifySubjectErased) found nothing left of the bot.
        """
        async with self._resources.engine.begin() as conn:
            for service in request.skipped_services:
                await conn.execute(_RECORD_SKIP, {"workflow_id": request.workflow_id, "service": service})
        if not request.delete_bot_row:
            return FinishBotDeletionResult()
        async with self._resources.engine.begin() as conn:
            deleted = await conn.execute(text("DELETE FROM bots WHERE id = :bot"), {"bot": request.bot_id})
            await conn.execute(_MARK_COMPLETED, {"workflow_id": request.workflow_id})
        if not deleted.rowcount:
            step_skipped("the bot row is already deleted")
        return FinishBotDeletionResult(bot_row_deleted=True)

    @activity.defn(name="finish_account_deletion")
    @heartbeats
    async def finish_account_deletion(self, request: FinishAccountDeletionInput) -> bool:
        """Delete the keys and the account row once no bot or site remains; return whether it is gone.

        Only then is the deletion recorded as completed: the caller sends the confirmation only on True.
        """
        async with self._resources.engine.begin() as conn:
            # Sites leave tombstones once torn down or rolled back; those go with the account.
            await conn.execute(
                text("DELETE FROM sites WHERE account_id = :account AND status = ANY(:tombstones)"),
                {"account": request.account_id, "tombstones": [status.value for status in TOMBSTONE_SITE_STATUSES]},
            )
            # Locks the account row first, so a bot inserted meanwhile (its foreign key takes a share lock
            # on the row) either commits before the count below or fails.
            account = await conn.execute(
                text("SELECT id FROM accounts WHERE id = :account FOR UPDATE"), {"account": request.account_id}
            )
            exists = account.first() is not None
            remaining = await conn.execute(
                text(
                    "SELECT (SELECT count(*) FROM bots WHERE account_id = :account)"
                    " + (SELECT count(*) FROM sites WHERE account_id = :account)"
                ),
                {"account": request.account_id},
            )
            if remaining.scalar_one() > 0:
                return False
            if exists:
                await conn.execute(
                    text("DELETE FROM api_keys WHERE account_id = :account"), {"account": request.account_id}
                )
                await conn.execute(text("DELETE FROM accounts WHERE id = :account"), {"account": request.account_id})
            else:
                step_skipped("the account row is already deleted")
            await conn.execute(_MARK_COMPLETED, {"workflow_id": request.workflow_id})
            return True

    @activity.defn(name="await_bot_deletion")
    @heartbeats
    async def await_bot_deletion(self, request: AwaitBotDeletionInput) -> BotDeletionResult:
        """The result of a bot deletion another request started, once it closes; workflows cannot await a
        non-child. Each attempt looks once and fails as StillRunning while the run is open (activities/polling.py).
        A run that closed without completing raises BotDeletionNotCompleted, and the account re-drives it."""
        client = self._resources.client
        description = await raise_if_running(client, request.workflow_id)
        if description is None or description.status != WorkflowExecutionStatus.COMPLETED:
            closing = "never started" if description is None else str(description.status)
            raise ApplicationError(
                f"{request.workflow_id} closed without completing: {closing}",
                type=BOT_DELETION_NOT_COMPLETED,
                non_retryable=True,
            )
        return await client.get_workflow_handle(request.workflow_id, result_type=BotDeletionResult).result()
