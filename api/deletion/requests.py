"""Accepting deletion requests: record them in the database first, then start the workflow.

The database write comes first so that a crash between the two leaves a marked row, which the reconciler
turns into a workflow; the other order could leave a deletion nobody remembers asking for.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

from sqlalchemy import func, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import CancelledError, TerminatedError
from temporalio.service import RPCError

from lifecycle.db.models import Account, ApiKey, Bot, DeletionRequest
from lifecycle.deletion.contracts import AccountDeletionResult, BotDeletionResult, ServiceProgress
from lifecycle.deletion.legal_holds import is_held
from lifecycle.deletion.starts import row_check, start_account_deletion, start_bot_deletion
from lifecycle.deletion.workflow_types import account_deletion_id, bot_deletion_id
from lifecycle.search_attributes import LIFECYCLE_STATUS
from lifecycle.settings import Settings
from lifecycle.statuses import (
    CLOSED_WITHOUT_COMPLETING,
    OPEN_DELETION_STATES,
    DeletionState,
    requested_deletion_state,
)

log = logging.getLogger(__name__)

# A wait that ran out asks Temporal how the run stands (`describe`, answered by the server from its own store in a
# few milliseconds); past this it answers `accepted` (recorded, nothing more known), so a struggling Temporal server
# never holds a request long.
DESCRIBE_TIMEOUT = timedelta(milliseconds=250)


@dataclass(frozen=True)
class Accepted:
    workflow_id: str
    finished: bool
    # The end of the deletion's grace period, if it has one (ACCOUNT_DELETION_GRACE).
    deletes_at: datetime | None = None
    # A legal hold is in force on the account: the run waits, `held`, until it is released.
    held: bool = False


async def request_bot_deletion(
    session: AsyncSession,
    engine: AsyncEngine,
    client: Client,
    task_queue: str,
    *,
    account_id: uuid.UUID,
    bot_id: uuid.UUID,
    due_within: timedelta,
    registry_settle_seconds: int,
) -> Accepted | None:
    """Mark and record the bot's deletion in one transaction, then start it; None if the account has no such bot
    (nor had)."""
    workflow_id = bot_deletion_id(bot_id)
    marked = await session.scalar(
        update(Bot)
        .where(Bot.id == bot_id, Bot.account_id == account_id)
        .values(deletion_requested_at=func.coalesce(Bot.deletion_requested_at, func.now()))
        .returning(Bot.id)
    )
    if marked is None:
        # The bot row goes when its deletion completes; the request record says whether it was ours.
        recorded = (
            await session.execute(
                select(DeletionRequest.account_id, DeletionRequest.completed_at).where(
                    DeletionRequest.workflow_id == workflow_id
                )
            )
        ).one_or_none()
        await session.commit()
        if recorded is None or recorded.account_id != account_id:
            return None
        return Accepted(workflow_id, finished=recorded.completed_at is not None)
    held = await is_held(session, account_id)
    status = requested_deletion_state(scheduled=False, held=held)
    record = insert(DeletionRequest).values(
        workflow_id=workflow_id,
        kind="bot",
        account_id=account_id,
        bot_id=bot_id,
        status=status,
        due_at=func.now() + due_within,
        account_lane="waiting",
    )
    # A repeat after a stop starts a new run: the request is accepted again, not the old run's closing, and
    # queues for one of its account's lanes again (activities/deletion/account_lanes.py) at its first place.
    await session.execute(
        record.on_conflict_do_update(
            index_elements=[DeletionRequest.workflow_id],
            set_={
                "status": record.excluded.status,
                "status_run_id": None,
                "status_confirmed_at": func.now(),
                "account_lane": "waiting",
            },
            where=DeletionRequest.status.in_(sorted(CLOSED_WITHOUT_COMPLETING)),
        )
    )
    # The record commits before the run starts, and nothing of the database is held while Temporal answers
    # (lifecycle/deletion/starts.py).
    await session.commit()
    # The bot row still existed, so its data may too: start a run, or join the open one.
    started = await start_bot_deletion(
        client,
        task_queue,
        bot_id=str(bot_id),
        account_id=str(account_id),
        row_exists=row_check(engine, "bots", bot_id),
        registry_settle_seconds=registry_settle_seconds,
    )
    # Not started: the run completed (and deleted the row) since the commit above.
    return Accepted(workflow_id, finished=not started, held=started and held)


async def request_account_deletion(
    session: AsyncSession, client: Client, settings: Settings, *, account_id: uuid.UUID
) -> Accepted:
    """Sign the account out (revoke every key), mark and record it, then start its deletion.

    Also the admin's re-drive: repeating it while the account row exists starts a new run after one that
    closed without completing, or joins the open one.
    """
    workflow_id = account_deletion_id(account_id)
    found = (
        await session.execute(select(Account.email, Account.deletion_requested_at).where(Account.id == account_id))
    ).one_or_none()
    if found is None:
        # Gone since the caller found it: only a completing deletion deletes an account row (and records that).
        return Accepted(workflow_id, finished=True)
    email, already_requested = found
    await session.execute(
        update(ApiKey).where(ApiKey.account_id == account_id, ApiKey.revoked_at.is_(None)).values(revoked_at=func.now())
    )
    await session.execute(
        update(Account)
        .where(Account.id == account_id)
        .values(deletion_requested_at=func.coalesce(Account.deletion_requested_at, func.now()))
    )
    grace = settings.account_deletion_grace
    deletes_at = datetime.now(UTC) + grace if grace else None
    held = await is_held(session, account_id)
    # As the request stands until its run records otherwise (api/deletion/status.py). A hold is waited for once
    # the grace is over.
    status = requested_deletion_state(scheduled=deletes_at is not None, held=held)
    record = insert(DeletionRequest).values(
        workflow_id=workflow_id,
        kind="account",
        account_id=account_id,
        notify_email=email,
        deletes_at=deletes_at,
        status=status,
        due_at=func.now() + settings.erasure_due_within,
    )
    if already_requested is None:
        # A new request (the first, or one after a restore): its own grace period, from now, and its own status
        # (not the restored run's).
        record = record.on_conflict_do_update(
            index_elements=[DeletionRequest.workflow_id],
            set_={
                "deletes_at": deletes_at,
                "requested_at": func.now(),
                "due_at": func.now() + settings.erasure_due_within,
                "notify_email": email,
                "status": status,
                "status_run_id": None,
                "status_confirmed_at": func.now(),
            },
        )
    else:
        # A re-drive keeps the grace period asked for first: what is left of it, or none once it ended. After a
        # stop it starts a new run, so the request is accepted again rather than showing the old run's closing.
        record = record.on_conflict_do_update(
            index_elements=[DeletionRequest.workflow_id],
            # What is left of the grace the new run shows itself, as it begins.
            set_={
                "status": requested_deletion_state(scheduled=False, held=held),
                "status_run_id": None,
                "status_confirmed_at": func.now(),
            },
            where=DeletionRequest.status.in_(sorted(CLOSED_WITHOUT_COMPLETING)),
        )
    await session.execute(record)
    deletes_at = await session.scalar(
        select(DeletionRequest.deletes_at).where(DeletionRequest.workflow_id == workflow_id)
    )
    await session.commit()

    async def account_row_exists() -> bool:
        found = await session.scalar(select(Account.id).where(Account.id == account_id))
        await session.commit()  # ends the read's transaction: nothing stays held
        return found is not None

    # Nothing of the database is held while Temporal answers (lifecycle/deletion/starts.py).
    started = await start_account_deletion(
        client,
        settings.task_queue,
        account_id=str(account_id),
        site_task_queue=settings.site_task_queue,
        row_exists=account_row_exists,
        deletes_at=deletes_at,
        registry_settle_seconds=settings.deletion_registry_settle_seconds,
    )
    if not started:
        # The run completed (and deleted the row) since the commit above: an admin's re-drive racing its end.
        return Accepted(workflow_id, finished=True)
    # A grace already over (ran out, or expedited) is none: the run deletes at once.
    still_scheduled = deletes_at is not None and deletes_at > datetime.now(UTC)
    return Accepted(workflow_id, finished=False, deletes_at=deletes_at if still_scheduled else None, held=held)


async def redrive_account_deletion(
    session: AsyncSession, client: Client, settings: Settings, *, account_id: uuid.UUID
) -> Accepted | None:
    """The admin's start-or-join of an account deletion; None if the account neither exists nor was deleted.

    The account's own keys are revoked once its deletion is requested, so this is how a run that closed
    without completing (cancelled, terminated, failed, or ended `incomplete` by an operator) is driven on.
    """
    if await session.get(Account, account_id) is not None:
        return await request_account_deletion(session, client, settings, account_id=account_id)
    record = await session.get(DeletionRequest, account_deletion_id(account_id))
    if record is None:
        return None
    # The row goes only when nothing of the account remains: that deletion is done.
    return Accepted(record.workflow_id, finished=True)


# Waiting for a deletion to finish, so a small one can answer 200. Only Temporal is asked: the
# caller has released its database connection before it waits.


FinishedState = Literal[DeletionState.COMPLETED, DeletionState.INCOMPLETE]


@dataclass(frozen=True)
class Finished:
    """A run that ended while the request waited. `incomplete`: an operator skipped a service, data remains."""

    status: FinishedState
    deleted: dict[str, int]
    bots_deleted: int | None = None


@dataclass(frozen=True)
class NotFinished:
    """How the run stood when the wait ended without a result: open (accepted, running, paused, waiting for an
    operator), or closed without completing (cancelled, terminated, failed: a repeat or the reconciler
    finishes it)."""

    status: DeletionState


async def await_deletion(client: Client, workflow_id: str, seconds: float, *, account: bool) -> Finished | NotFinished:
    """The run's result if it comes within `seconds`; otherwise how it stands. Never raises for the run or
    for Temporal: whatever goes wrong while waiting, the caller answers 202 as it would have without a wait.
    """
    try:
        # follow_runs (the default): a bot deletion continues as new on long runs; its last run's result counts.
        if account:
            ended = await asyncio.wait_for(
                client.get_workflow_handle(workflow_id, result_type=AccountDeletionResult).result(), seconds
            )
            return _finished(ended.status, ended.services, bots_deleted=ended.bots_deleted)
        bot = await asyncio.wait_for(
            client.get_workflow_handle(workflow_id, result_type=BotDeletionResult).result(), seconds
        )
        return _finished(bot.status, bot.services, bots_deleted=None)
    except TimeoutError:
        return NotFinished(await _open_status(client, workflow_id))
    except WorkflowFailureError as failure:
        return NotFinished(_closed_status(failure))
    except (RPCError, RuntimeError, OSError, TypeError, ValueError) as err:
        # Temporal unreachable, the history gone after retention, or a result this API cannot read.
        log.warning("waiting for %s failed, answering 202: %s", workflow_id, err)
        return NotFinished(DeletionState.ACCEPTED)


def _finished(status: str, services: dict[str, ServiceProgress], *, bots_deleted: int | None) -> Finished | NotFinished:
    deleted = {service: progress.deleted for service, progress in services.items()}
    state = DeletionState(status)
    if state is DeletionState.COMPLETED:
        return Finished(DeletionState.COMPLETED, deleted, bots_deleted)
    if state is DeletionState.INCOMPLETE:
        return Finished(DeletionState.INCOMPLETE, deleted, bots_deleted)
    # Not a status a finished run returns: say what it says, and claim nothing.
    return NotFinished(state)


def _closed_status(failure: WorkflowFailureError) -> DeletionState:
    if isinstance(failure.cause, CancelledError):
        return DeletionState.CANCELLED
    if isinstance(failure.cause, TerminatedError):
        return DeletionState.TERMINATED
    return DeletionState.FAILED


async def _open_status(client: Client, workflow_id: str) -> DeletionState:
    """What the still-open run publishes: `accepted` until it begins, then `running`, `waiting_for_operator`...;
    `accepted` if the server is slow: the request is recorded, and nothing more is known."""
    try:
        # The RPC deadline bounds the server; wait_for also bounds a connection that is itself stuck.
        describing = client.get_workflow_handle(workflow_id).describe(rpc_timeout=DESCRIBE_TIMEOUT)
        description = await asyncio.wait_for(describing, DESCRIBE_TIMEOUT.total_seconds() * 2)
    except (RPCError, TimeoutError, RuntimeError, OSError):
        return DeletionState.ACCEPTED
    published = description.typed_search_attributes.get(LIFECYCLE_STATUS)
    return DeletionState(published) if published in OPEN_DELETION_STATES else DeletionState.ACCEPTED
