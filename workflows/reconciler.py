"""Backup for the API's start path, run by a Temporal Schedule: drive on the deletions, sites and exports the
database asks for that no run is working on; then alert the runs stuck without progress and the erasures near or past
their due date (activities/watch.py)."""

from __future__ import annotations

from temporalio import workflow
from temporalio.common import VersioningBehavior

with workflow.unsafe.imports_passed_through():
    import workflows.activity_presets as presets
    from activities.deletion.reconciler import Reconciler
    from activities.exports.reconciler import ExportReconciler
    from activities.sites.reconciler import SiteReconciler
    from activities.watch import WorkWatch
    from lifecycle.deletion.workflow_types import RECONCILER_WORKFLOW
    from lifecycle.shared_contracts import ReconcileResult
    from lifecycle.sites.contracts import SiteReconcileInput


# Pinned: a run lasts minutes at most, and the schedule starts each next one on the current version.
@workflow.defn(name=RECONCILER_WORKFLOW, versioning_behavior=VersioningBehavior.PINNED)
class DeletionReconcilerWorkflow:
    @workflow.run
    async def run(self) -> ReconcileResult:
        result = await workflow.execute_activity_method(
            Reconciler.reconcile_deletions,
            **presets.RECONCILE,
            summary="start deletions marked in the database that no run is working on",
        )
        result.sites = await workflow.execute_activity_method(
            SiteReconciler.reconcile_sites,
            SiteReconcileInput(),
            **presets.RECONCILE,
            summary="finish, roll back or tear down sites that no run is working on",
        )
        result.exports = await workflow.execute_activity_method(
            ExportReconciler.reconcile_exports,
            **presets.RECONCILE,
            summary="delete overdue archives and start again the exports no run is working on",
        )
        result.watch = await workflow.execute_activity_method(
            WorkWatch.watch_work,
            **presets.RECONCILE,
            summary="alert runs stuck without progress and erasures near or past their due date",
        )
        return result
