"""Sites: a small synchronous part (validate, record, one durable start) that answers 202."""

from __future__ import annotations

import logging
import uuid
from enum import StrEnum
from typing import Annotated

from fastapi import APIRouter, Header, Query, Request, Response, status
from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError
from temporalio.client import WorkflowHandle
from temporalio.service import RPCError, RPCStatusCode

from api.dependencies import CallerDep, SessionDep, SettingsDep, TemporalDep
from api.paging import DEFAULT_PAGE, PAGED, Cursor, Limit, page
from api.problems import ProblemError, problem_responses
from api.quotas import refuse_at_limit, take_account_turn
from api.sites.schemas import SiteAccepted, SiteCreate, SiteOut, SiteSteps, site_error
from lifecycle.db.models import Site
from lifecycle.sites.contracts import SITE_STEPS
from lifecycle.sites.starts import start_site_creation, start_site_deletion
from lifecycle.sites.workflow_types import site_creation_id
from lifecycle.statuses import DOMAIN_HOLDING_SITE_STATUSES, TOMBSTONE_SITE_STATUSES, SiteStatus, StepStatus

router = APIRouter(tags=["sites"])
logger = logging.getLogger(__name__)

IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        min_length=1,
        max_length=200,
        pattern=r"^[\x21-\x7e]+$",
        description="Repeating a request with the same key returns the same site and workflow.",
    ),
]


def _status_url(site_id: uuid.UUID) -> str:
    return f"/sites/{site_id}"


def _accepted(site: Site, response: Response) -> SiteAccepted:
    response.headers["Location"] = _status_url(site.id)
    return SiteAccepted(id=site.id, status=SiteStatus(site.status), status_url=_status_url(site.id))


async def _same_request(session: SessionDep, caller: CallerDep, body: SiteCreate, key: str | None) -> Site | None:
    """The site an earlier identical request created: by idempotency key, or still provisioning."""
    if key is not None:
        site = (
            await session.execute(select(Site).where(Site.account_id == caller.account_id, Site.idempotency_key == key))
        ).scalar_one_or_none()
        if site is not None:
            if (site.name, site.tagline, site.domain) != (body.name, body.tagline, body.domain):
                raise ProblemError(409, "This Idempotency-Key was used for a different request.")
            return site
    return (
        await session.execute(
            select(Site).where(
                Site.account_id == caller.account_id,
                Site.domain == body.domain,
                Site.name == body.name,
                Site.tagline == body.tagline,
                Site.status == SiteStatus.PROVISIONING,
            )
        )
    ).scalar_one_or_none()


@router.post(
    "/sites",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=SiteAccepted,
    summary="Create a site; provisioning continues in the background",
    responses=problem_responses(401, 409, 422),
)
async def create_site(
    body: SiteCreate,
    caller: CallerDep,
    session: SessionDep,
    temporal: TemporalDep,
    settings: SettingsDep,
    response: Response,
    idempotency_key: IdempotencyKey = None,
) -> SiteAccepted:
    await take_account_turn(session, caller.account_id)
    site = await _same_request(session, caller, body, idempotency_key)
    if site is None:
        # Every site that holds its domain counts (one being deleted still holds a database and a role); a
        # deleted or rolled-back one holds nothing and does not.
        await refuse_at_limit(
            session,
            select(func.count())
            .select_from(Site)
            .where(Site.account_id == caller.account_id, Site.status.in_(DOMAIN_HOLDING_SITE_STATUSES)),
            settings.max_sites_per_account,
            noun="sites",
            remedy="Delete one to create another.",
            title="Site limit reached",
            status=409,
        )
        site = Site(
            account_id=caller.account_id,
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
            site = await _same_request(session, caller, body, idempotency_key)
            if site is None:
                # The same answer whether this account or another holds the domain: it tells nobody whose it is.
                raise ProblemError(409, "This domain is not available.", title="Domain unavailable") from None
    else:
        await session.commit()  # ends the lock before the call to Temporal
    if site.status in (SiteStatus.PROVISIONING, SiteStatus.ROLLING_BACK) and site.deletion_requested_at is None:
        # Also on a repeat: it starts the workflow if the first request died between commit and start, or a new
        # run if an operator terminated the first one (it finishes from wherever the site stands).
        await start_site_creation(
            temporal, settings.site_task_queue, site_id=str(site.id), account_id=str(site.account_id)
        )
    return _accepted(site, response)


def site_out(site: Site) -> SiteOut:
    """GET /sites/{id}'s answer, also the data of each event of GET /sites/{id}/events."""
    error_code, error = site_error(site.error)
    return SiteOut(
        id=site.id,
        name=site.name,
        tagline=site.tagline,
        domain=site.domain,
        status=SiteStatus(site.status),
        steps=SiteSteps(**{step: StepStatus(site.steps.get(step, StepStatus.PENDING)) for step in SITE_STEPS}),
        error=error,
        error_code=error_code,
        database_server=site.database_server,
    )


async def _own_site(session: SessionDep, caller: CallerDep, site_id: uuid.UUID) -> Site:
    site = await session.get(Site, site_id)
    # Another account's site is indistinguishable from a missing one.
    if site is None or site.account_id != caller.account_id:
        raise ProblemError(404, "No such site.")
    return site


class Included(StrEnum):
    LIVE = "live"
    ALL = "all"


@router.get(
    "/sites",
    response_model=list[SiteOut],
    summary="The account's sites, oldest first, a page at a time; deleted and rolled-back ones only with `include=all`",
    responses=problem_responses(401, 422) | PAGED,
)
async def list_sites(
    caller: CallerDep,
    session: SessionDep,
    request: Request,
    response: Response,
    cursor: Cursor = None,
    limit: Limit = DEFAULT_PAGE,
    include: Annotated[
        Included, Query(description="`all` lists deleted and rolled-back sites too; `live` leaves them out.")
    ] = Included.LIVE,
) -> list[SiteOut]:
    listed = select(Site).where(Site.account_id == caller.account_id)
    if include == Included.LIVE:
        listed = listed.where(Site.status.not_in(TOMBSTONE_SITE_STATUSES))
    sites = await page(
        session, listed, (Site.created_at, Site.id), cursor=cursor, limit=limit, request=request, response=response
    )
    return [site_out(site) for site in sites]


@router.get(
    "/sites/{site_id}",
    response_model=SiteOut,
    summary="One site and its steps",
    responses=problem_responses(401, 404),
)
async def get_site(site_id: uuid.UUID, caller: CallerDep, session: SessionDep) -> SiteOut:
    return site_out(await _own_site(session, caller, site_id))


@router.delete(
    "/sites/{site_id}",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=SiteAccepted,
    summary="Delete a site, whatever phase its creation is in; the teardown runs in the background",
    responses=problem_responses(401, 404),
)
async def delete_site(
    site_id: uuid.UUID,
    caller: CallerDep,
    session: SessionDep,
    temporal: TemporalDep,
    settings: SettingsDep,
    response: Response,
) -> SiteAccepted:
    site = await _own_site(session, caller, site_id)
    if site.status == SiteStatus.DELETED:
        return _accepted(site, response)
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
    await _cancel_creation(temporal.get_workflow_handle(site_creation_id(site.id)))
    await start_site_deletion(temporal, settings.site_task_queue, site_id=str(site.id), account_id=str(site.account_id))
    return _accepted(site, response)


async def _cancel_creation(handle: WorkflowHandle[object, object]) -> None:
    """Best effort: the teardown does not depend on it, it only spares building what will be removed."""
    try:
        await handle.cancel()
    except RPCError as err:
        # Closed or never started: nothing to stop.
        if err.status not in (RPCStatusCode.NOT_FOUND, RPCStatusCode.FAILED_PRECONDITION):
            logger.warning("could not cancel %s: %s", handle.id, err)
