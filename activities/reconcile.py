"""The reconciler's one step: start a deletion for every row marked for deletion that lacks one."""

from __future__ import annotations

from sqlalchemy import text
from temporalio import activity
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from activities.resources import ActivityResources
from lifecycle.contracts import ReconcileResult
from lifecycle.deletion_starts import start_account_deletion, start_bot_deletion
from lifecycle.workflow_ids import account_deletion_id, bot_deletion_id

# Rows per run; a larger backlog is taken by the next scheduled runs.
_MAX_ROWS_PER_RUN = 1_000


async def _missing(client: Client, workflow_id: str) -> bool:
    """True when no execution ever had this id: the API wrote the row but crashed before starting."""
    try:
        await client.get_workflow_handle(workflow_id).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return True
        raise
    return False


class Reconciler:
    def __init__(self, resources: ActivityResources) -> None:
        self._resources = resources

    @activity.defn(name="reconcile_deletions")
    async def reconcile_deletions(self) -> ReconcileResult:
        client, queue = self._resources.client, self._resources.settings.task_queue
        async with self._resources.engine.connect() as conn:
            bots = (
                await conn.execute(
                    text("SELECT id, account_id FROM bots WHERE deletion_requested_at IS NOT NULL LIMIT :n"),
                    {"n": _MAX_ROWS_PER_RUN},
                )
            ).all()
            accounts = (
                await conn.execute(
                    text("SELECT id FROM accounts WHERE deletion_requested_at IS NOT NULL LIMIT :n"),
                    {"n": _MAX_ROWS_PER_RUN},
                )
            ).all()
        result = ReconcileResult()
        for bot_id, account_id in bots:
            if await _missing(client, bot_deletion_id(bot_id)):
                await start_bot_deletion(client, queue, bot_id=str(bot_id), account_id=str(account_id))
                result.bot_deletions_started += 1
            activity.heartbeat()
        for (account_id,) in accounts:
            if await _missing(client, account_deletion_id(account_id)):
                await start_account_deletion(client, queue, account_id=str(account_id))
                result.account_deletions_started += 1
            activity.heartbeat()
        if result.bot_deletions_started or result.account_deletions_started:
            activity.logger.warning("reconciler started missing deletions: %s", result)
        return result
