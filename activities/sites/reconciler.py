"""The site reconciler: finish or roll back every site that no open run will settle.

Rules, for each unsettled site (provisioning, rolling back, deleting, or with a deletion requested):
- a deletion was requested (or the site is `deleting`) and no teardown is open: start the teardown, which
  waits for any open creation and removes whatever exists;
- the creation never started (the API died between its commit and the start): start it;
- the creation closed without completing (terminated, failed, timed out, cancelled) while the site still
  provisions or rolls back: start a run that rolls it back, which is what a cancel would have done;
- an open run is left to finish its work.
Rows are read in id order, page by page, so a backlog never hides newer rows and each row is seen once.
"""

from __future__ import annotations

import uuid

from sqlalchemy import text
from temporalio import activity
from temporalio.client import WorkflowExecutionStatus

from activities.deletion.reconciler import latest_run_status
from activities.resources import ActivityResources
from lifecycle.sites.contracts import SiteReconcileInput, SitesReconciled
from lifecycle.sites.starts import start_site_creation, start_site_deletion
from lifecycle.sites.workflow_types import site_creation_id, site_deletion_id
from lifecycle.statuses import UNSETTLED_SITES_SQL, SiteStatus

# The predicate of the partial index ix_sites_unsettled, so each page is an index scan: in literals, since the
# planner matches a partial index's predicate only against constants.
_PAGE = text(
    "SELECT id, account_id, status, deletion_requested_at IS NOT NULL AS deletion_requested FROM sites"
    f" WHERE ({UNSETTLED_SITES_SQL}) AND id > :after ORDER BY id LIMIT :limit"
)
_CLOSED_WITHOUT_COMPLETING = (
    WorkflowExecutionStatus.TERMINATED,
    WorkflowExecutionStatus.FAILED,
    WorkflowExecutionStatus.TIMED_OUT,
    WorkflowExecutionStatus.CANCELED,
)
_FIRST_ID = uuid.UUID(int=0)


class SiteReconciler:
    def __init__(self, resources: ActivityResources) -> None:
        self._resources = resources

    @activity.defn(name="reconcile_sites")
    async def reconcile_sites(self, request: SiteReconcileInput) -> SitesReconciled:
        details = activity.info().heartbeat_details
        # A retried attempt resumes after the last page the previous attempt finished.
        after = uuid.UUID(str(details[0])) if details else _FIRST_ID
        result = SitesReconciled()
        while True:
            async with self._resources.engine.connect() as conn:
                rows = (await conn.execute(_PAGE, {"after": after, "limit": request.page_size})).all()
            for row in rows:
                await self._reconcile(
                    str(row.id), str(row.account_id), SiteStatus(row.status), row.deletion_requested, result
                )
            if rows:
                after = rows[-1].id
            activity.heartbeat(str(after))
            if len(rows) < request.page_size:
                return result

    async def _reconcile(
        self, site_id: str, account_id: str, status: SiteStatus, deletion_requested: bool, result: SitesReconciled
    ) -> None:
        client, queue = self._resources.client, self._resources.settings.site_task_queue
        result.examined += 1
        if deletion_requested or status == SiteStatus.DELETING:
            if await latest_run_status(client, site_deletion_id(site_id)) == WorkflowExecutionStatus.RUNNING:
                result.open_runs_skipped += 1
            elif await start_site_deletion(client, queue, site_id=site_id, account_id=account_id):
                result.deletions_started += 1
            else:
                result.left_alone.append(site_id)
            return
        creation = await latest_run_status(client, site_creation_id(site_id))
        if creation == WorkflowExecutionStatus.RUNNING:
            result.open_runs_skipped += 1
        elif creation is None:
            await start_site_creation(client, queue, site_id=site_id, account_id=account_id)
            result.creations_started += 1
        elif creation in _CLOSED_WITHOUT_COMPLETING:
            await start_site_creation(client, queue, site_id=site_id, account_id=account_id, roll_back=True)
            result.rollbacks_started += 1
        else:
            activity.logger.warning("site %s is %s after a completed creation; left alone", site_id, status)
            result.left_alone.append(site_id)
