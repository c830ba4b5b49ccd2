"""Requesting an account export: allocate (or join) the export row durably, then start its workflow.

Policies, chosen on purpose:
- A request while the account has an export without an archive yet (`pending` or `writing`) joins it: the
  partial unique index `uq_account_exports_open` makes this hold under concurrent requests too.
- Otherwise a new export is numbered max(sequence) + 1 for the account (unique per account), so a new request
  after an archive is ready, expired or failed makes a fresh archive with fresh data.
- The workflow id is `account-export-<account id>-<n>`; a start while its run is open joins it (USE_EXISTING).
  A run that was terminated or failed before its archive was ready can be run again by a repeated request
  (ALLOW_DUPLICATE_FAILED_ONLY: the row is still open, and the parts already written are kept); a run that
  completed (its archive expired) is never run again.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession
from temporalio.client import Client
from temporalio.common import (
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)

from lifecycle.db.models import AccountExport
from lifecycle.export_contracts import AccountExportInput
from lifecycle.priorities import deletion_priority
from lifecycle.search_attributes import ACCOUNT_ID, LIFECYCLE_STATUS
from lifecycle.settings import Settings
from lifecycle.statuses import OPEN_EXPORT_STATUSES, ExportStatus
from lifecycle.workflow_ids import account_export_id
from lifecycle.workflow_types import ACCOUNT_EXPORT_WORKFLOW

ON_CONFLICT = WorkflowIDConflictPolicy.USE_EXISTING
ON_REUSE = WorkflowIDReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY
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


def export_search_attributes(account_id: str) -> TypedSearchAttributes:
    return TypedSearchAttributes(
        [
            SearchAttributePair(ACCOUNT_ID, account_id),
            SearchAttributePair(LIFECYCLE_STATUS, ExportStatus.WRITING.value),
        ]
    )


async def start_account_export(
    client: Client, task_queue: str, *, export_id: str, account_id: str, workflow_id: str, retention_seconds: float
) -> None:
    await client.start_workflow(
        ACCOUNT_EXPORT_WORKFLOW,
        AccountExportInput(export_id=export_id, account_id=account_id, retention_seconds=retention_seconds),
        id=workflow_id,
        task_queue=task_queue,
        id_conflict_policy=ON_CONFLICT,
        id_reuse_policy=ON_REUSE,
        search_attributes=export_search_attributes(account_id),
        priority=deletion_priority(account_id),
        static_summary=f"Export account {account_id}",
        static_details=(
            f"Writes export {export_id} of account {account_id} (every bot's rows as JSON lines and every "
            "document file) into one ZIP, emails a signed link once, and deletes the archive when it expires."
        ),
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
