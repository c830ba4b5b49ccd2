"""Restoring an account during its deletion's grace period: the workflow decides, then the account is usable.

The account deletion workflow takes a `restore` update only while it is `scheduled` (nothing deleted yet); once
its grace ran out or an operator expedited it, the update is refused. So the decision is atomic with the timer:
an accepted restore always means nothing was deleted. Only then is the account unmarked and a new key issued.

Without an open run, the last run's closing says whether restoring is still lossless:
- terminated or cancelled while `scheduled` (an operator stopped it during the grace): nothing was deleted, and
  the reconciler never restarts an operator's stop, so the account is restored without a run;
- completed `restored` (a restore the workflow accepted, whose database half did not commit): finished now.
Anything else (deleting began, or a failed run the reconciler is about to restart) is refused.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from sqlalchemy import func, update
from sqlalchemy.ext.asyncio import AsyncSession
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowUpdateFailedError
from temporalio.service import RPCError, RPCStatusCode

from lifecycle.db.models import Account, ApiKey
from lifecycle.deletion.workflow_types import account_deletion_id
from lifecycle.search_attributes import LIFECYCLE_STATUS
from lifecycle.statuses import DeletionState

# The account deletion workflow's update (workflows/deletion/account.py, AccountDeletionWorkflow.restore).
RESTORE_UPDATE = "restore"

# Closings of the last run after which the account is restored without one (see the module's docstring).
_STOPPED_IN_GRACE = (WorkflowExecutionStatus.TERMINATED, WorkflowExecutionStatus.CANCELED)


class RestoreRefused(Exception):
    """The account cannot be restored: it is not scheduled for deletion, or deleting already began."""


@dataclass(frozen=True)
class Restored:
    workflow_id: str
    # How the run's part went: the open run accepted the `restore` update, or the last run had stopped in grace.
    open_run: bool


async def restore_account(
    session: AsyncSession, client: Client, *, account_id: uuid.UUID, new_key_hash: str, new_key_prefix: str
) -> Restored | None:
    """Cancel the account's pending deletion, unmark it and add a key; None if there is no such account.

    Raises RestoreRefused when nothing is pending, or when the deletion has begun.
    """
    account = await session.get(Account, account_id)
    if account is None:
        return None
    if account.deletion_requested_at is None:
        raise RestoreRefused("The account is not scheduled for deletion.")
    workflow_id = account_deletion_id(account_id)
    open_run = await _restore_run(client, workflow_id)
    # The workflow said yes: from here on its run deletes nothing. The old keys stay revoked, and so does any key
    # issued by a request that was authorised just before the deletion's revocation committed: the restore hands
    # out exactly one live key.
    await session.execute(update(Account).where(Account.id == account_id).values(deletion_requested_at=None))
    await session.execute(
        update(ApiKey).where(ApiKey.account_id == account_id, ApiKey.revoked_at.is_(None)).values(revoked_at=func.now())
    )
    session.add(ApiKey(account_id=account_id, key_hash=new_key_hash, prefix=new_key_prefix))
    await session.commit()
    return Restored(workflow_id=workflow_id, open_run=open_run)


async def _restore_run(client: Client, workflow_id: str) -> bool:
    """True if the open run accepted the restore, False if the last run had stopped in its grace period."""
    handle = client.get_workflow_handle(workflow_id)
    try:
        await handle.execute_update(RESTORE_UPDATE, result_type=str)
        return True
    except WorkflowUpdateFailedError as refused:
        raise RestoreRefused(f"Too late to restore: {_reason(refused)}.") from refused
    except RPCError as err:
        if err.status != RPCStatusCode.NOT_FOUND:
            raise
    # No open run: how did the last one close?
    try:
        description = await handle.describe()
    except RPCError as err:
        if err.status != RPCStatusCode.NOT_FOUND:
            raise
        raise RestoreRefused(
            "The deletion has no run yet (the reconciler starts it shortly); try again once it is `scheduled`."
        ) from err
    published = description.typed_search_attributes.get(LIFECYCLE_STATUS)
    if description.status in _STOPPED_IN_GRACE and published == DeletionState.SCHEDULED:
        return False
    if description.status == WorkflowExecutionStatus.COMPLETED and published == DeletionState.RESTORED:
        return False
    closing = description.status.name.lower() if description.status is not None else "unknown"
    raise RestoreRefused(
        f"Too late to restore: the deletion's last run closed {closing} while {published or 'running'}, so "
        "deleting may have begun. POST /accounts/{id}/deletion finishes it."
    )


def _reason(refused: WorkflowUpdateFailedError) -> str:
    cause = refused.cause
    return getattr(cause, "message", None) or str(cause)
