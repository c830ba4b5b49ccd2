"""Requesting an account export: allocate (or join) the export row durably, then start its workflow.

Policies, chosen on purpose:
- A request while the account has an export without an archive yet (`pending` or `writing`) joins it: the
  partial unique index `uq_account_exports_open` makes this hold under concurrent requests too.
- Otherwise a new export is numbered max(sequence) + 1 for the account (unique per account), so a new request
  after an archive is ready, expired or failed makes a fresh archive with fresh data.
- The workflow id is `account-export-<account id>-<n>`; a start while its run is open joins it, and one after
  its run was terminated or failed re-runs it (its parts are kept), one after it completed is refused
  (EXPORT_REUSE in lifecycle/exports/workflow_types.py).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession
from temporalio.client import Client

from lifecycle.db.models import AccountExport
from lifecycle.exports.contracts import AccountExportInput
from lifecycle.exports.workflow_types import account_export_id, account_export_options
from lifecycle.settings import Settings
from lifecycle.statuses import OPEN_EXPORT_STATUSES, ExportStatus

# Concurrent first requests race for the open-export index; the losers read the winner's row.
_ALLOCATION_ATTEMPTS = 5


@dataclass(frozen=True)
class ExportAccepted:
    export_id: uuid.UUID
    workflow_id: str
    status: ExportStatus


async def _open_export(session: AsyncSession, account_id: uuid.UUID) -> AccountExport | None:
    return (
        await session.execute(
            select(AccountExport).where(
                AccountExport.account_id == account_id, AccountExport.status.in_(OPEN_EXPORT_STATUSES)
            )
        )
    ).scalar_one_or_none()


async def _allocate(session: AsyncSession, account_id: uuid.UUID, *, deletion_waits: bool) -> AccountExport:
    """The account's open export, or a new one numbered after its last; committed before any workflow starts."""
    for _ in range(_ALLOCATION_ATTEMPTS):
        found = await _open_export(session, account_id)
        if found is not None:
            if deletion_waits and not found.deletion_waits:
                await session.execute(
                    update(AccountExport).where(AccountExport.id == found.id).values(deletion_waits=True)
                )
                await session.commit()
            return found
        last = (
            await session.execute(
                select(func.coalesce(func.max(AccountExport.sequence), 0)).where(AccountExport.account_id == account_id)
            )
        ).scalar_one()
        export = AccountExport(
            id=uuid.uuid4(),
            account_id=account_id,
            sequence=last + 1,
            workflow_id=account_export_id(account_id, last + 1),
            status=ExportStatus.PENDING.value,
            deletion_waits=deletion_waits,
        )
        session.add(export)
        try:
            await session.commit()
        except IntegrityError:
            await session.rollback()
            continue
        return export
    raise RuntimeError(f"could not allocate an export for account {account_id}")


async def start_account_export(
    client: Client, task_queue: str, *, export_id: str, account_id: str, workflow_id: str, retention_seconds: float
) -> None:
    await account_export_options(export_id, account_id, workflow_id).start(
        client,
        AccountExportInput(export_id=export_id, account_id=account_id, retention_seconds=retention_seconds),
        task_queue=task_queue,
    )


async def request_account_export(
    session: AsyncSession, client: Client, settings: Settings, *, account_id: uuid.UUID, deletion_waits: bool = False
) -> ExportAccepted:
    """Start the account's export or join the open one. `deletion_waits`: the account deletion waits for it."""
    export = await _allocate(session, account_id, deletion_waits=deletion_waits)
    await start_account_export(
        client,
        settings.task_queue,
        export_id=str(export.id),
        account_id=str(account_id),
        workflow_id=export.workflow_id,
        retention_seconds=settings.export_retention.total_seconds(),
    )
    return ExportAccepted(export.id, export.workflow_id, ExportStatus(export.status))
