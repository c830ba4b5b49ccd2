"""Starting site workflows so that duplicates collapse: shared by the API and the site reconciler."""

from __future__ import annotations

from temporalio.client import Client
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError

from lifecycle.contracts import SiteCreationInput, SiteDeletionInput
from lifecycle.search_attributes import site_search_attributes
from lifecycle.statuses import SiteStatus
from lifecycle.workflow_ids import site_creation_id, site_deletion_id
from lifecycle.workflow_types import SITE_CREATION_WORKFLOW, SITE_DELETION_WORKFLOW

# A repeat while a run is open attaches to it.
ON_CONFLICT = WorkflowIDConflictPolicy.USE_EXISTING
# A creation that completed is final (the site is active or rolled back). One that was terminated, failed or
# timed out left the site half-built or half-undone: a new run under the same id finishes or rolls it back.
CREATION_REUSE = WorkflowIDReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY
# A completed teardown is final: the site is deleted and its domain may already belong to another site.
# A terminated or failed one left the database, files or row behind, so a repeated DELETE or the
# reconciler must be able to run the teardown again; every teardown step is idempotent.
DELETION_REUSE = WorkflowIDReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY


async def start_site_creation(
    client: Client, task_queue: str, *, site_id: str, account_id: str, roll_back: bool = False
) -> bool:
    """Start the creation (or attach to the open one); False when a completed run already settled it."""
    try:
        await client.start_workflow(
            SITE_CREATION_WORKFLOW,
            SiteCreationInput(site_id=site_id, account_id=account_id, roll_back=roll_back),
            id=site_creation_id(site_id),
            task_queue=task_queue,
            id_conflict_policy=ON_CONFLICT,
            id_reuse_policy=CREATION_REUSE,
            search_attributes=site_search_attributes(account_id, site_id, SiteStatus.PROVISIONING),
            static_summary=f"{'Roll back' if roll_back else 'Create'} site {site_id}",
            static_details=f"Provision site {site_id} for account {account_id}: metadata, files, "
            "database, WordPress; rolls back on failure or cancellation.",
        )
    except WorkflowAlreadyStartedError:
        return False
    return True


async def start_site_deletion(client: Client, task_queue: str, *, site_id: str, account_id: str) -> bool:
    """Start (or attach to) the teardown; False when a completed teardown already deleted the site."""
    try:
        await client.start_workflow(
            SITE_DELETION_WORKFLOW,
            SiteDeletionInput(site_id=site_id),
            id=site_deletion_id(site_id),
            task_queue=task_queue,
            id_conflict_policy=ON_CONFLICT,
            id_reuse_policy=DELETION_REUSE,
            search_attributes=site_search_attributes(account_id, site_id, SiteStatus.DELETING),
            static_summary=f"Delete site {site_id}",
            static_details=f"Tear down site {site_id} of account {account_id}: database and role, "
            "files, metadata; frees the domain.",
        )
    except WorkflowAlreadyStartedError:
        return False
    return True
