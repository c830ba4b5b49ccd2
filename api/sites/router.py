"""Sites: a small synchronous part (validate, record, one durable start) that answers 202."""

from __future__ import annotations

import uuid
from enum import StrEnum
from typing import Annotated

from fastapi import APIRouter, Header, Query, Request, Response, status
from sqlalchemy import select

from api.dependencies import CallerDep, SessionDep, SettingsDep, TemporalDep
from api.paging import DEFAULT_PAGE, PAGED, Cursor, Limit, page
from api.problems import ProblemError, problem_responses
from api.sites.requests import request_site_creation, request_site_deletion
from api.sites.schemas import SiteAccepted, SiteCreate, SiteOut, SiteSteps, site_error
from lifecycle.db.models import Site
from lifecycle.sites.contracts import SITE_STEPS
from lifecycle.statuses import TOMBSTONE_SITE_STATUSES, SiteStatus, StepStatus

router = APIRouter(tags=["sites"])

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
    site = await request_site_creation(
        session, temporal, settings, account_id=caller.account_id, body=body, idempotency_key=idempotency_key
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
    site = await request_site_deletion(session, temporal, settings, await _own_site(session, caller, site_id))
    return _accepted(site, response)
