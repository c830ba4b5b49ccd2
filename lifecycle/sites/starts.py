"""Starting site workflows so that duplicates collapse: shared by the API and the site reconciler."""

from __future__ import annotations

from temporalio.client import Client
from temporalio.exceptions import WorkflowAlreadyStartedError

from lifecycle.sites.contracts import SiteCreationInput, SiteDeletionInput
from lifecycle.sites.workflow_types import site_creation_options, site_deletion_options


async def start_site_creation(
    client: Client, task_queue: str, *, site_id: str, account_id: str, roll_back: bool = False
) -> bool:
    """Start the creation (or attach to the open one); False when a completed run already settled it."""
    request = SiteCreationInput(site_id=site_id, account_id=account_id, roll_back=roll_back)
    try:
        await site_creation_options(site_id, account_id, roll_back=roll_back).start(
            client, request, task_queue=task_queue
        )
    except WorkflowAlreadyStartedError:
        return False
    return True


async def start_site_deletion(client: Client, task_queue: str, *, site_id: str, account_id: str) -> bool:
    """Start (or attach to) the teardown; False when a completed teardown already deleted the site."""
    try:
        await site_deletion_options(site_id, account_id).start(
            client, SiteDeletionInput(site_id=site_id), task_queue=task_queue
        )
    except WorkflowAlreadyStartedError:
        return False
    return True
