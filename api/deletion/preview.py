"""What a deletion of a bot or an account would remove, and how long it would take, with nothing changed.

The gateway's own facts are read here, from its own database: the registry of services, the account's bots, its
exports and the budget. What the services hold is theirs to say: a DeletionPreview workflow asks each of them on
its own queue (workflows/deletion/preview.py), and this waits for its answer. Nothing is written: no deletion is
recorded or started, and the preview's own run is the only workflow it starts.
"""

from __future__ import annotations

import asyncio
import math
import uuid
from datetime import UTC, datetime, timedelta

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import TimeoutError as WorkflowTimeoutError

from api.deletion.preview_schemas import DeletionPreviewOut, PreviewExport, PreviewServiceCount, PreviewSubject
from api.problems import ProblemError
from lifecycle.db.models import AccountExport, Processor
from lifecycle.deletion.budget import budget_share, read_deletion_budget
from lifecycle.deletion.contracts import (
    DeletionBudget,
    DeletionPreviewInput,
    DeletionPreviewResult,
    ReceiptSubject,
    ServiceHoldings,
)
from lifecycle.deletion.due import due_at
from lifecycle.deletion.legal_holds import is_held
from lifecycle.deletion.pace import Pace
from lifecycle.deletion.registry import active_services
from lifecycle.deletion.workflow_types import deletion_preview_options
from lifecycle.settings import Settings
from lifecycle.statuses import ExportStatus

# The most bots an account's preview counts: each bot is one call per service, and a run's history holds every
# call, so a bigger account is previewed bot by bot.
MAX_PREVIEW_BOTS = 1_000
# How long the API waits for the preview's answer: a service's calls give up after 25 s (the SERVICE_PREVIEW
# preset), so only a gateway worker that takes no workflow task keeps a preview from answering by then.
PREVIEW_WAIT = timedelta(seconds=40)
# The exports a deletion could meet: the others (expired, failed) hold no archive.
_EXISTING_EXPORTS = (ExportStatus.PENDING, ExportStatus.WRITING, ExportStatus.READY)


async def preview_deletion(
    session: AsyncSession,
    client: Client,
    settings: Settings,
    *,
    account_id: uuid.UUID,
    subject: PreviewSubject,
    bot_ids: list[str],
) -> DeletionPreviewOut:
    if len(bot_ids) > MAX_PREVIEW_BOTS:
        raise ProblemError(
            422,
            f"This account has {len(bot_ids)} bots, more than the {MAX_PREVIEW_BOTS} a preview counts at once; "
            "preview its bots one by one (GET /bots/{id}/deletion/preview).",
        )
    conn = await session.connection()
    services = await active_services(conn)
    budget = await read_deletion_budget(conn)
    removes_exports = subject.kind == ReceiptSubject.ACCOUNT
    exports = await _exports(session, account_id, removed=removes_exports)
    # Only an account's deletion tells the processors (workflows/deletion/processors.py).
    processors = await active_processors(conn) if subject.kind == ReceiptSubject.ACCOUNT else []
    held = await is_held(conn, account_id)
    # Nothing is held while the services count: the answer's inputs are read, and the session gives its
    # connection back.
    await session.close()
    handle = await deletion_preview_options(subject.kind, str(subject.id), str(account_id)).start(
        client,
        DeletionPreviewInput(services=services, bot_ids=bot_ids),
        task_queue=settings.task_queue,
        result_type=DeletionPreviewResult,
        execution_timeout=PREVIEW_WAIT,
    )
    try:
        result = await asyncio.wait_for(handle.result(), PREVIEW_WAIT.total_seconds())
    except (TimeoutError, WorkflowFailureError) as err:
        # The run's own timeout (no gateway worker took its tasks in time) or this wait's, whichever came first; any
        # other failure of the run is a fault of this code, answered as one.
        if isinstance(err, WorkflowFailureError) and not isinstance(err.cause, WorkflowTimeoutError):
            raise
        raise ProblemError(
            503, "The preview got no answer in time; retry shortly.", headers={"Retry-After": "30"}
        ) from None
    return DeletionPreviewOut(
        subject=subject,
        services={
            name: PreviewServiceCount(
                rows=None if held is None else held.rows,
                files=None if held is None else held.files,
                estimated=held is not None and held.estimated,
            )
            for name, held in sorted(result.services.items())
        },
        exports=exports,
        held=held,
        processors=processors,
        estimated_duration_seconds=estimated_duration_seconds(budget, result.services),
        due_at=due_at(datetime.now(UTC), settings),
    )


def estimated_duration_seconds(budget: DeletionBudget, holdings: dict[str, ServiceHoldings | None]) -> int | None:
    """The rows at the rate the budget gives the services that hold some (each its budget_share, as a deletion
    sends it), by the status's rule (Pace.seconds_left); None when a count is unknown or a share is unlimited."""
    if any(held is None for held in holdings.values()):
        return None
    rows = {name: held.rows for name, held in holdings.items() if held is not None and held.rows}
    if not rows:
        return 0
    shares = [budget_share(budget, list(rows), name) for name in rows]
    if 0 in shares:  # 0: unlimited
        return None
    seconds = Pace(rows_per_second=sum(shares), remaining=sum(rows.values())).seconds_left()
    return None if seconds is None else math.ceil(seconds)


async def _exports(session: AsyncSession, account_id: uuid.UUID, *, removed: bool) -> list[PreviewExport]:
    """The account's exports that exist: an account deletion removes them all before its receipt
    (activities/exports/steps.py, remove_account_exports); a bot deletion leaves them."""
    rows = await session.execute(
        select(AccountExport.id, AccountExport.status, AccountExport.expires_at)
        .where(AccountExport.account_id == account_id, AccountExport.status.in_(_EXISTING_EXPORTS))
        .order_by(AccountExport.sequence)
    )
    return [
        PreviewExport(
            id=export_id,
            status=ExportStatus(status),
            expires_at=expires_at,
            after_deletion="removed" if removed else "kept",
        )
        for export_id, status, expires_at in rows
    ]


async def active_processors(conn: AsyncConnection) -> list[str]:
    return list(
        (
            await conn.execute(select(Processor.name).where(Processor.retired_at.is_(None)).order_by(Processor.name))
        ).scalars()
    )


def bot_subject(bot_id: uuid.UUID) -> PreviewSubject:
    return PreviewSubject(kind=ReceiptSubject.BOT, id=bot_id)


def account_subject(account_id: uuid.UUID) -> PreviewSubject:
    return PreviewSubject(kind=ReceiptSubject.ACCOUNT, id=account_id)
