"""The sites' workflow types, each with everything a start of it needs: its type name, workflow id, id reuse
policy, search attributes and the function that returns its StartOptions (lifecycle/start_options.py). Site runs
carry no fairness key: they run on their own queue, where someone waits for each."""

from __future__ import annotations

from datetime import timedelta
from uuid import UUID

from temporalio.common import SearchAttributePair, TypedSearchAttributes, WorkflowIDReusePolicy

from lifecycle.search_attributes import ACCOUNT_ID, LIFECYCLE_STATUS, SITE_ID
from lifecycle.start_options import ScheduledStart, StartOptions
from lifecycle.statuses import SiteStatus

SITE_CREATION_WORKFLOW = "SiteCreationWorkflow"
SITE_DELETION_WORKFLOW = "SiteDeletionWorkflow"
SITE_DB_POOL_WORKFLOW = "SiteDbPool"
SITE_SERVER_HEALTH_CHECK_WORKFLOW = "SiteDbServerHealthCheck"

# Site creation: a completed run settled the site (active or rolled back) for good. One that was terminated, failed
# or timed out left it half-built or half-undone: a new run under the same id finishes or rolls it back.
SITE_CREATION_REUSE = WorkflowIDReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY
# Site teardown, the same for the API, the reconciler and the account deletion's children: a completed teardown
# left the site `deleted` for good (its domain may belong to another site by now), so it never runs again; one that
# was terminated, failed or cancelled left the database, files or row behind, and every teardown step is
# idempotent, so it can run again. An account deletion that meets a completed teardown waits for it instead
# (await_site_deletion), which returns at once.
SITE_DELETION_REUSE = WorkflowIDReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY
# A server's warm pool: one long-lived run per server (it continues as new); whatever closed the last run, a poke
# starts a new one, which carries on from the pool's rows.
POOL_REUSE = WorkflowIDReusePolicy.ALLOW_DUPLICATE


def site_creation_id(site_id: UUID | str) -> str:
    return f"site-creation-{site_id}"


def site_deletion_id(site_id: UUID | str) -> str:
    return f"site-deletion-{site_id}"


def site_db_pool_id(server: str) -> str:
    """One pool workflow per site-database server (a catalog name)."""
    return f"site-db-pool-{server}"


def site_search_attributes(account_id: str, site_id: str, lifecycle_status: str) -> TypedSearchAttributes:
    return TypedSearchAttributes(
        [
            SearchAttributePair(ACCOUNT_ID, account_id),
            SearchAttributePair(SITE_ID, site_id),
            SearchAttributePair(LIFECYCLE_STATUS, lifecycle_status),
        ]
    )


def site_creation_options(site_id: str, account_id: str, *, roll_back: bool = False) -> StartOptions:
    return StartOptions(
        workflow_type=SITE_CREATION_WORKFLOW,
        id=site_creation_id(site_id),
        id_reuse_policy=SITE_CREATION_REUSE,
        search_attributes=site_search_attributes(account_id, site_id, SiteStatus.PROVISIONING),
        static_summary=f"{'Roll back' if roll_back else 'Create'} site {site_id}",
        static_details=f"Provision site {site_id} for account {account_id}: metadata, files, "
        "database, WordPress; rolls back on failure or cancellation.",
    )


def site_deletion_options(site_id: str, account_id: str, *, within_account: bool = False) -> StartOptions:
    """`within_account`: a child of the account's deletion."""
    return StartOptions(
        workflow_type=SITE_DELETION_WORKFLOW,
        id=site_deletion_id(site_id),
        id_reuse_policy=SITE_DELETION_REUSE,
        search_attributes=site_search_attributes(account_id, site_id, SiteStatus.DELETING),
        static_summary=f"Delete site {site_id}",
        static_details=f"Part of deleting account {account_id}."
        if within_account
        else f"Tear down site {site_id} of account {account_id}: database and role, files, metadata; frees the domain.",
    )


def site_db_pool_options(server: str) -> StartOptions:
    return StartOptions(
        workflow_type=SITE_DB_POOL_WORKFLOW,
        id=site_db_pool_id(server),
        id_reuse_policy=POOL_REUSE,
        search_attributes=TypedSearchAttributes.empty,
        static_summary=f"Warm pool of site-database server {server}",
        static_details=f"Keeps {server}'s pool_target databases ready to claim, at a bounded rate; drops the "
        "unclaimed ones when the server drains; removes half-made ones.",
    )


# The site-database servers' health check, on the sites queue: a dead server is out of placement after two failed
# checks (activities/sites/health_check.py), 15 to 30 s; each run is one activity that connects to every server once.
HEALTH_CHECK_SCHEDULE = ScheduledStart(
    schedule_id="site-db-server-health-check",
    workflow_type=SITE_SERVER_HEALTH_CHECK_WORKFLOW,
    id="site-db-server-health-check-run",
    every=timedelta(seconds=15),
    static_summary="Connect to every site-database server: mark down the ones that do not answer, "
    "active again the rest",
)
