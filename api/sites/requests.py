"""Accepting site requests: record them in the database first, then start the workflow.

As with deletions (api/deletion/requests.py), the database write comes first, so that a crash between the two
leaves a row the site reconciler turns into a workflow; a repeat of the request starts it too.
"""

from __future__ import annotations

import logging
import uuid

from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession
from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError, RPCStatusCode

from api.problems import ProblemError
from api.quotas import refuse_at_limit, take_account_turn
from api.sites.schemas import SiteCreate
from lifecycle.db.models import Site
from lifecycle.settings import Settings
from lifecycle.sites.contracts import SITE_STEPS
from lifecycle.sites.starts import start_site_creation, start_site_deletion
from lifecycle.sites.workflow_types import site_creation_id
from lifecycle.statuses import DOMAIN_HOLDING_SITE_STATUSES, SiteStatus, StepStatus

logger = logging.getLogger(__name__)


async def request_site_creation(
    session: AsyncSession,
    client: Client,
    settings: Settings,
    *,
    account_id: uuid.UUID,
    body: SiteCreate,
    idempotency_key: str | None,
) -> Site:
    """Record the site (or find the one an identical earlier request recorded), then start its creation."""
    await take_account_turn(session, account_id)
    site = await _same_request(session, account_id, body, idempotency_key)
    if site is None:
        site = await _record_site(session, settings, account_id, body, idempotency_key)
    else:
        await session.commit()  # ends the lock before the call to Temporal
    if site.status in (SiteStatus.PROVISIONING, SiteStatus.ROLLING_BACK) and site.deletion_requested_at is None:
        # Also on a repeat: it starts the workflow if the first request died between commit and start, or a new
        # run if an operator terminated the first one (it finishes from wherever the site stands).
        await start_site_creation(
            client, settings.site_task_queue, site_id=str(site.id), account_id=str(site.account_id)
        )
    return site


async def request_site_deletion(session: AsyncSession, client: Client, settings: Settings, site: Site) -> Site:
    """Mark the site for deletion, stop its creation if it is still in flight, and start its teardown."""
    if site.status == SiteStatus.DELETED:
        return site
    # Recorded first: if this request dies after the commit, the reconciler finishes the deletion.
    await session.execute(
        update(Site)
        .where(Site.id == site.id, Site.deletion_requested_at.is_(None))
        .values(deletion_requested_at=func.now())
    )
    await session.commit()
    await session.refresh(site)
    # A creation in flight stops early and rolls back; one past the point of no return finishes, and the
    # teardown, which waits for it to close, removes the site it built.
    await _cancel_creation(client.get_workflow_handle(site_creation_id(site.id)))
    await start_site_deletion(client, settings.site_task_queue, site_id=str(site.id), account_id=str(site.account_id))
    return site


async def _record_site(
    session: AsyncSession, settings: Settings, account_id: uuid.UUID, body: SiteCreate, idempotency_key: str | None
) -> Site:
    # Every site that holds its domain counts (one being deleted still holds a database and a role); a deleted or
    # rolled-back one holds nothing and does not.
    await refuse_at_limit(
        session,
        select(func.count())
        .select_from(Site)
        .where(Site.account_id == account_id, Site.status.in_(DOMAIN_HOLDING_SITE_STATUSES)),
        settings.max_sites_per_account,
        noun="sites",
        remedy="Delete one to create another.",
        title="Site limit reached",
        status=409,
    )
    site = Site(
        account_id=account_id,
        name=body.name,
        tagline=body.tagline,
        domain=body.domain,
        status=SiteStatus.PROVISIONING,
        steps=dict.fromkeys(SITE_STEPS, StepStatus.PENDING),
        idempotency_key=idempotency_key,
    )
    session.add(site)
    try:
        await session.commit()
    except IntegrityError:
        # The unique indexes decide races: a concurrent twin of this request, or another live site.
        await session.rollback()
        twin = await _same_request(session, account_id, body, idempotency_key)
        if twin is None:
            # The same answer whether this account or another holds the domain: it tells nobody whose it is.
            raise ProblemError(409, "This domain is not available.", title="Domain unavailable") from None
        return twin
    return site


async def _same_request(session: AsyncSession, account_id: uuid.UUID, body: SiteCreate, key: str | None) -> Site | None:
    """The site an earlier identical request created: by idempotency key, or still provisioning."""
    if key is not None:
        site = (
            await session.execute(select(Site).where(Site.account_id == account_id, Site.idempotency_key == key))
        ).scalar_one_or_none()
        if site is not None:
            if (site.name, site.tagline, site.domain) != (body.name, body.tagline, body.domain):
                raise ProblemError(409, "This Idempotency-Key was used for a different request.")
            return site
    return (
        await session.execute(
            select(Site).where(
                Site.account_id == account_id,
                Site.domain == body.domain,
                Site.name == body.name,
                Site.tagline == body.tagline,
                Site.status == SiteStatus.PROVISIONING,
            )
        )
    ).scalar_one_or_none()


async def _cancel_creation(handle: WorkflowHandle[object, object]) -> None:
    """Best effort: the teardown does not depend on it, it only spares building what will be removed."""
    try:
        await handle.cancel()
    except RPCError as err:
        # Closed or never started: nothing to stop.
        if err.status not in (RPCStatusCode.NOT_FOUND, RPCStatusCode.FAILED_PRECONDITION):
            logger.warning("could not cancel %s: %s", handle.id, err)
