"""Sites: a small synchronous part (validate, record, one durable start) that answers 202."""

from __future__ import annotations

import contextlib
import uuid
from typing import Annotated

from fastapi import APIRouter, Header, Response, status
from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from temporalio.client import Client, WorkflowHandle
from temporalio.common import (
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from api.dependencies import CallerDep, SessionDep, SettingsDep, TemporalDep
from api.problems import ProblemError, problem_responses
from api.schemas.sites import SiteAccepted, SiteCreate, SiteOut, SiteSteps
from lifecycle.contracts import SITE_STEPS, SiteCreationInput, SiteDeletionInput
from lifecycle.db.models import Site
from lifecycle.search_attributes import site_search_attributes
from lifecycle.workflow_ids import site_creation_id, site_deletion_id
from lifecycle.workflow_types import SITE_CREATION_WORKFLOW, SITE_DELETION_WORKFLOW

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


def _accepted(site: Site, response: Response, status_override: str | None = None) -> SiteAccepted:
    response.headers["Location"] = _status_url(site.id)
    return SiteAccepted(id=site.id, status=status_override or site.status, status_url=_status_url(site.id))


async def _start_creation(client: Client, task_queue: str, site: Site) -> None:
    """Start the creation, or find it started: a repeated request must never run a second creation."""
    with contextlib.suppress(WorkflowAlreadyStartedError):
        await client.start_workflow(
            SITE_CREATION_WORKFLOW,
            SiteCreationInput(site_id=str(site.id), account_id=str(site.account_id)),
            id=site_creation_id(site.id),
            task_queue=task_queue,
            # A repeat while it runs attaches to it; once closed, the id is never reused for this site.
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            search_attributes=site_search_attributes(str(site.account_id), str(site.id), "provisioning"),
            static_summary=f"Create site {site.id}",
            static_details=f"Provision site {site.id} for account {site.account_id}: metadata, files, "
            "database, WordPress; rolls back on failure or cancellation.",
        )


async def _start_deletion(client: Client, task_queue: str, site: Site) -> None:
    with contextlib.suppress(WorkflowAlreadyStartedError):
        await client.start_workflow(
            SITE_DELETION_WORKFLOW,
            SiteDeletionInput(site_id=str(site.id)),
            id=site_deletion_id(site.id),
            task_queue=task_queue,
            # A site is deleted once: repeats attach to the running teardown or are refused after it.
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            search_attributes=site_search_attributes(str(site.account_id), str(site.id), "deleting"),
            static_summary=f"Delete site {site.id}",
            static_details=f"Tear down site {site.id} of account {site.account_id}: database and role, "
            "files, metadata; frees the domain.",
        )


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
                Site.status == "provisioning",
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
    site = await _same_request(session, caller, body, idempotency_key)
    if site is None:
        site = Site(
            account_id=caller.account_id,
            name=body.name,
            tagline=body.tagline,
            domain=body.domain,
            status="provisioning",
            steps=dict.fromkeys(SITE_STEPS, "pending"),
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
                raise ProblemError(409, f"The domain {body.domain} is already in use by another site.") from None
    if site.status == "provisioning":
        # Also on a repeat: it starts the workflow if the first request died between commit and start.
        await _start_creation(temporal, settings.site_task_queue, site)
    return _accepted(site, response)


def _site_out(site: Site) -> SiteOut:
    return SiteOut(
        id=site.id,
        name=site.name,
        tagline=site.tagline,
        domain=site.domain,
        status=site.status,
        steps=SiteSteps(**{step: site.steps.get(step, "pending") for step in SITE_STEPS}),
        error=site.error,
    )


async def _own_site(session: SessionDep, caller: CallerDep, site_id: uuid.UUID) -> Site:
    site = await session.get(Site, site_id)
    # Another account's site is indistinguishable from a missing one.
    if site is None or site.account_id != caller.account_id:
        raise ProblemError(404, "No such site.")
    return site


@router.get("/sites", response_model=list[SiteOut], summary="The account's sites", responses=problem_responses(401))
async def list_sites(caller: CallerDep, session: SessionDep) -> list[SiteOut]:
    sites = (
        await session.execute(select(Site).where(Site.account_id == caller.account_id).order_by(Site.created_at))
    ).scalars()
    return [_site_out(site) for site in sites]


@router.get(
    "/sites/{site_id}",
    response_model=SiteOut,
    summary="One site and its steps",
    responses=problem_responses(401, 404),
)
async def get_site(site_id: uuid.UUID, caller: CallerDep, session: SessionDep) -> SiteOut:
    return _site_out(await _own_site(session, caller, site_id))


@router.delete(
    "/sites/{site_id}",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=SiteAccepted,
    summary="Delete a site: cancels a provisioning one (it rolls back), tears down an active one",
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
    if site.status == "provisioning":
        await _cancel_creation(temporal.get_workflow_handle(site_creation_id(site.id)))
        return _accepted(site, response)
    if site.status == "active":
        # Compare-and-set, so only one request moves the site on, whatever the races.
        await session.execute(update(Site).where(Site.id == site.id, Site.status == "active").values(status="deleting"))
        await session.commit()
        await session.refresh(site)
    if site.status == "deleting":
        # Also on a repeat: it starts the teardown if the first request died between commit and start.
        await _start_deletion(temporal, settings.site_task_queue, site)
    # Rolling back, rolled back or deleted: nothing left to do.
    return _accepted(site, response)


async def _cancel_creation(handle: WorkflowHandle[object, object]) -> None:
    try:
        await handle.cancel()
    except RPCError as err:
        # Already closed: the site is past provisioning, and its status will say so.
        if err.status not in (RPCStatusCode.NOT_FOUND, RPCStatusCode.FAILED_PRECONDITION):
            raise
