"""The export reconciler: settle every export that no open run will.

Rules, for each export that is not yet ready, or ready past its `expires_at`:
- an open run is left to finish its work (its own retention timer deletes its archive);
- ready past `expires_at` with no run open (an operator terminated it during its retention): the archive is
  deleted and the export marked expired, as the run's timer would have done. Without this, an export's
  personal data stayed on disk for good;
- not yet ready, and its run never started (the API died between its commit and the start), failed or timed
  out: started again; it keeps the parts already written;
- not yet ready, and cancelled or terminated by an operator: a deliberate stop, left for the user's repeated
  request, unless an account deletion waits for it (`export_first`). That user can no longer ask (the keys are
  revoked), and the deletion would wait for good, so it is started again.
Rows are read in id order, page by page, so a backlog never hides newer rows and each row is seen once.
"""

from __future__ import annotations

import uuid

from sqlalchemy import text
from temporalio import activity
from temporalio.client import WorkflowExecutionStatus

from activities.deletion.reconciler import latest_run_status
from activities.exports.steps import expire_export
from activities.resources import ActivityResources
from lifecycle.deletion.receipt_keys import ReceiptSigner
from lifecycle.exports.contracts import ExportsReconciled
from lifecycle.exports.starts import start_account_export
from lifecycle.statuses import OPEN_EXPORT_STATUSES, ExportStatus

PAGE_SIZE = 500
_PAGE = text(
    "SELECT id, account_id, workflow_id, status, deletion_waits FROM account_exports"
    " WHERE (status = ANY(:open) OR (status = :ready AND expires_at <= now()))"
    " AND id > :after ORDER BY id LIMIT :limit"
)
_OPEN = [status.value for status in OPEN_EXPORT_STATUSES]
_CRASHED = (WorkflowExecutionStatus.FAILED, WorkflowExecutionStatus.TIMED_OUT)
_STOPPED = (WorkflowExecutionStatus.CANCELED, WorkflowExecutionStatus.TERMINATED)
_FIRST_ID = uuid.UUID(int=0)


class ExportReconciler:
    def __init__(self, resources: ActivityResources, signer: ReceiptSigner) -> None:
        self._resources = resources
        self._signer = signer

    @activity.defn(name="reconcile_exports")
    async def reconcile_exports(self) -> ExportsReconciled:
        result = ExportsReconciled()
        after = _FIRST_ID
        while True:
            async with self._resources.engine.connect() as conn:
                params = {"open": _OPEN, "ready": ExportStatus.READY.value, "after": after, "limit": PAGE_SIZE}
                rows = (await conn.execute(_PAGE, params)).all()
            for row in rows:
                await self._settle(
                    row.id, row.account_id, row.workflow_id, ExportStatus(row.status), row.deletion_waits, result
                )
                activity.heartbeat()
            if len(rows) < PAGE_SIZE:
                break
            after = rows[-1].id
        if result.expired or result.started:
            activity.logger.warning("reconciler settled exports: %s", result)
        return result

    async def _settle(
        self,
        export_id: uuid.UUID,
        account_id: uuid.UUID,
        workflow_id: str,
        status: ExportStatus,
        deletion_waits: bool,
        result: ExportsReconciled,
    ) -> None:
        result.examined += 1
        run = await latest_run_status(self._resources.client, workflow_id)
        if run == WorkflowExecutionStatus.RUNNING:
            return
        if status == ExportStatus.READY:
            await expire_export(self._resources, self._signer, str(export_id))
            result.expired += 1
        elif run is None or run in _CRASHED or (run in _STOPPED and deletion_waits):
            settings = self._resources.settings
            await start_account_export(
                self._resources.client,
                settings.task_queue,
                export_id=str(export_id),
                account_id=str(account_id),
                workflow_id=workflow_id,
                retention_seconds=settings.export_retention.total_seconds(),
            )
            result.started += 1
        elif run in _STOPPED:
            result.left_alone.append(str(export_id))
