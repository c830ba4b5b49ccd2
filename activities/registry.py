"""Every activity the worker registers, bound to the worker's shared resources."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from activities.alerts import Alerts
from activities.deletion.account_lanes import AccountLanes
from activities.deletion.account_sites import AccountSites
from activities.deletion.follow_up import FollowUpReceipts
from activities.deletion.grace import DeletionGrace
from activities.deletion.legal_holds import LegalHolds
from activities.deletion.notifications import Notifications
from activities.deletion.processors import ProcessorErasures
from activities.deletion.receipts import DeletionReceipts
from activities.deletion.reconciler import Reconciler
from activities.deletion.records import DeletionRecords
from activities.deletion.services import RegisteredServices
from activities.exports.reconciler import ExportReconciler
from activities.exports.steps import AccountExportActivities
from activities.resources import ActivityResources
from activities.sites.health_check import SiteServerHealth
from activities.sites.pool import SitePoolActivities
from activities.sites.reconciler import SiteReconciler
from activities.sites.steps import SiteActivities
from activities.watch import WorkWatch
from lifecycle.deletion.receipt_keys import ReceiptSigner


def build_activities(resources: ActivityResources, signer: ReceiptSigner) -> list[Callable[..., Any]]:
    records = DeletionRecords(resources)
    account_sites = AccountSites(resources)
    registered = RegisteredServices(resources)
    processors = ProcessorErasures(resources)
    lanes = AccountLanes(resources)
    return [
        *SiteActivities(resources).all(),
        records.list_account_bots,
        records.record_deletion_status,
        records.finish_bot_deletion,
        records.finish_account_deletion,
        records.await_bot_deletion,
        lanes.take_account_lane,
        lanes.open_account_lanes,
        registered.list_deletion_services,
        registered.record_service_progress,
        registered.deletion_service_retired,
        registered.nexus_endpoint_exists,
        account_sites.stop_account_site_creations,
        account_sites.list_account_sites,
        account_sites.await_site_deletion,
        Notifications(resources).send_deletion_confirmation,
        Alerts(resources).raise_alert,
        Reconciler(resources).reconcile_deletions,
        SiteReconciler(resources).reconcile_sites,
        SitePoolActivities(resources).refill_site_db_pool,
        SiteServerHealth(resources).check_site_db_servers,
        ExportReconciler(resources, signer).reconcile_exports,
        WorkWatch(resources).watch_work,
        *_export_activities(AccountExportActivities(resources, signer)),
        DeletionGrace(resources).end_account_deletion_grace,
        LegalHolds(resources).legal_hold_in_force,
        DeletionReceipts(resources, signer).issue_deletion_receipt,
        FollowUpReceipts(resources, signer).issue_follow_up_receipt,
        processors.begin_processor_erasure,
        processors.deliver_erasure_request,
        processors.skip_processor_erasure,
    ]


def _export_activities(exports: AccountExportActivities) -> list[Callable[..., Any]]:
    return [
        exports.begin_account_export,
        exports.write_export_parts,
        exports.assemble_export_archive,
        exports.mark_export_ready,
        exports.send_export_ready_email,
        exports.expire_account_export,
        exports.mark_export_failed,
        exports.await_account_exports,
        exports.list_export_services,
        exports.remove_account_exports,
    ]
