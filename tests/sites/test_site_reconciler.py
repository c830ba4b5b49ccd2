"""`reconcile_sites`, run as an activity against the real dev server and PostgreSQL: every unsettled site
without an open run is started, rolled back or torn down; a site with an open run is left to it."""

from __future__ import annotations

import uuid

from temporalio.client import Client
from temporalio.testing import ActivityEnvironment

from activities.resources import ActivityResources
from activities.sites.reconciler import SiteReconciler
from lifecycle.settings import Settings
from lifecycle.sites.contracts import SiteCreationInput, SiteReconcileInput
from lifecycle.sites.workflow_types import site_creation_id, site_creation_options
from lifecycle.statuses import SiteStatus
from tests.db import connection
from tests.eventually import eventually
from tests.sites.helpers import site_state
from tests.workers import own_queue, own_worker


async def _new_site(settings: Settings, account: uuid.UUID) -> str:
    site = uuid.uuid4()
    async with connection(settings.database_url) as conn:
        await conn.execute(
            "INSERT INTO sites (id, account_id, name, tagline, domain, status, steps)"
            " VALUES ($1, $2, 'Reconciled', '', $3, 'provisioning', '{}'::jsonb)",
            site,
            account,
            f"rec-{site.hex[:12]}.example.com",
        )
    return str(site)


async def _sql(settings: Settings, statement: str, *args: object) -> None:
    async with connection(settings.database_url) as conn:
        await conn.execute(statement, *args)


async def test_reconcile_sites_settles_what_no_run_will(temporal_client: Client, settings: Settings) -> None:
    account = uuid.uuid4()
    await _sql(
        settings,
        "INSERT INTO accounts (id, name, email) VALUES ($1, 'Owner', $2)",
        account,
        f"rec-{account.hex[:8]}@example.com",
    )
    never_started = await _new_site(settings, account)
    terminated = await _new_site(settings, account)
    open_run = await _new_site(settings, account)
    delete_requested = await _new_site(settings, account)
    queue = f"sites-{uuid.uuid4().hex[:8]}"
    idle_queue = f"idle-{uuid.uuid4().hex[:8]}"

    # Built in full, then its deletion requested with no teardown started (the API died after its commit).
    async with own_worker(own_queue(settings, queue), temporal_client):
        built = await site_creation_options(delete_requested, str(account)).start(
            temporal_client,
            SiteCreationInput(delete_requested, str(account)),
            task_queue=queue,
        )
        await built.result()
    await _sql(settings, "UPDATE sites SET deletion_requested_at = now() WHERE id = $1", uuid.UUID(delete_requested))
    # Half-built, then terminated by an operator.
    async with own_worker(own_queue(settings, queue), temporal_client, "bootstrap_site=delay:60"):
        half = await site_creation_options(terminated, str(account)).start(
            temporal_client,
            SiteCreationInput(terminated, str(account)),
            task_queue=queue,
        )

        async def built_database() -> bool:
            return (await site_state(settings, terminated)).database

        await eventually(built_database, "the creation made the database")
        await half.terminate("operator test")
    # Open, on a queue nobody polls.
    await site_creation_options(open_run, str(account)).start(
        temporal_client,
        SiteCreationInput(open_run, str(account)),
        task_queue=idle_queue,
    )

    resources = ActivityResources.create(settings.model_copy(update={"site_task_queue": queue}), temporal_client)
    try:
        # One row per page, so that paging itself is exercised.
        result = await ActivityEnvironment().run(
            SiteReconciler(resources).reconcile_sites, SiteReconcileInput(page_size=1)
        )
    finally:
        await resources.close()
    assert result.examined >= 4
    assert result.creations_started >= 1 and result.rollbacks_started >= 1 and result.deletions_started >= 1
    assert result.open_runs_skipped >= 1

    async with own_worker(own_queue(settings, queue), temporal_client):

        async def settled() -> bool:
            statuses = [
                (await site_state(settings, site)).status for site in (never_started, terminated, delete_requested)
            ]
            return statuses == [SiteStatus.ACTIVE, SiteStatus.ROLLED_BACK, SiteStatus.DELETED]

        await eventually(settled, "the reconciled sites settle")
    active = await site_state(settings, never_started)
    assert active.database and active.role and active.directory
    for gone in (terminated, delete_requested):
        state = await site_state(settings, gone)
        assert not (state.database or state.role or state.directory)
    assert (await site_state(settings, open_run)).status == SiteStatus.PROVISIONING
    await temporal_client.get_workflow_handle(site_creation_id(open_run)).terminate("test over")
