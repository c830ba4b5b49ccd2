"""Admin: the credentials an admin issues, each for one job, and the audit trail of every admin act.

Issuing and revoking a credential are themselves admin acts, on the trail like the others (api/dependencies.py
records every change an admin or a service credential makes, in the transaction that makes it).
"""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Query, Response, status
from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from api.admin.credentials import CredentialKind, issue_credential
from api.admin.schemas import (
    AuditEventOut,
    AuditEventsOut,
    CredentialBody,
    CredentialIssued,
    CredentialOut,
    CredentialsOut,
    NamedCredentialIssued,
)
from api.deletion.services_router import ServiceName
from api.dependencies import AdminDep, SessionDep
from api.problems import ProblemError, problem_responses
from lifecycle.db.models import ApiCredential, AuditEvent

router = APIRouter(tags=["admin"])

AUDIT_PAGE_DEFAULT = 50
AUDIT_PAGE_MAX = 200


async def _issued(
    session: AsyncSession, kind: CredentialKind, name: str, actor: str, response: Response
) -> tuple[uuid.UUID, str]:
    credential_id, credential = await issue_credential(await session.connection(), kind, name, actor)
    await session.commit()
    response.headers["Cache-Control"] = "no-store"
    return credential_id, credential


@router.post(
    "/admin-credentials",
    status_code=status.HTTP_201_CREATED,
    response_model=NamedCredentialIssued,
    summary="Admin: issue a named admin credential, shown this once",
    responses=problem_responses(401, 403, 422),
)
async def issue_admin_credential(
    body: CredentialBody, actor: AdminDep, session: SessionDep, response: Response
) -> NamedCredentialIssued:
    credential_id, credential = await _issued(session, CredentialKind.ADMIN, body.name, actor, response)
    return NamedCredentialIssued(id=credential_id, name=body.name, credential=credential)


@router.post(
    "/metrics-credentials",
    status_code=status.HTTP_201_CREATED,
    response_model=NamedCredentialIssued,
    summary="Admin: issue a credential that reads GET /metrics and nothing else, shown this once",
    responses=problem_responses(401, 403, 422),
)
async def issue_metrics_credential(
    body: CredentialBody, actor: AdminDep, session: SessionDep, response: Response
) -> NamedCredentialIssued:
    credential_id, credential = await _issued(session, CredentialKind.METRICS, body.name, actor, response)
    return NamedCredentialIssued(id=credential_id, name=body.name, credential=credential)


@router.post(
    "/deletion-services/{name}/credentials",
    status_code=status.HTTP_201_CREATED,
    response_model=CredentialIssued,
    summary="Admin: issue the credential with which one deletion service registers, updates and retires its own "
    "name, and nothing else; shown this once",
    responses=problem_responses(401, 403, 422),
)
async def issue_service_credential(
    name: ServiceName, actor: AdminDep, session: SessionDep, response: Response
) -> CredentialIssued:
    credential_id, credential = await _issued(session, CredentialKind.SERVICE, name, actor, response)
    return CredentialIssued(id=credential_id, credential=credential)


@router.get(
    "/credentials",
    response_model=CredentialsOut,
    summary="Admin: every issued credential, revoked ones too, never the credential itself",
    responses=problem_responses(401, 403),
)
async def list_credentials(_admin: AdminDep, session: SessionDep) -> CredentialsOut:
    rows = await session.scalars(select(ApiCredential).order_by(ApiCredential.created_at, ApiCredential.id))
    return CredentialsOut(credentials=[CredentialOut.model_validate(row, from_attributes=True) for row in rows])


@router.delete(
    "/credentials/{credential_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    summary="Admin: revoke an issued credential; it opens nothing from now on",
    responses=problem_responses(401, 403, 404),
)
async def revoke_credential(credential_id: uuid.UUID, _admin: AdminDep, session: SessionDep) -> None:
    revoked = await session.execute(
        update(ApiCredential)
        .where(ApiCredential.id == credential_id, ApiCredential.revoked_at.is_(None))
        .values(revoked_at=func.now())
        .returning(ApiCredential.id)
    )
    if revoked.scalar_one_or_none() is None:
        raise ProblemError(404, "No such credential, or it is revoked already.")
    await session.commit()


@router.get(
    "/audit-events",
    response_model=AuditEventsOut,
    summary="Admin: the audit trail of admin acts and service registrations, newest first, a page at a time",
    responses=problem_responses(401, 403, 422),
)
async def list_audit_events(
    _admin: AdminDep,
    session: SessionDep,
    target: Annotated[str | None, Query(max_length=300, description="Only acts on this path.")] = None,
    account_id: Annotated[uuid.UUID | None, Query(description="Only acts that concern this account.")] = None,
    cursor: Annotated[str | None, Query(pattern=r"^[0-9]{1,19}$", description="The `next` of the page before.")] = None,
    limit: Annotated[int, Query(ge=1, le=AUDIT_PAGE_MAX)] = AUDIT_PAGE_DEFAULT,
) -> AuditEventsOut:
    query = select(AuditEvent).order_by(AuditEvent.id.desc()).limit(limit + 1)
    if target is not None:
        query = query.where(AuditEvent.target == target)
    if account_id is not None:
        query = query.where(AuditEvent.account_id == account_id)
    if cursor is not None:
        query = query.where(AuditEvent.id < int(cursor))
    rows = list(await session.scalars(query))
    page, more = rows[:limit], len(rows) > limit
    return AuditEventsOut(
        events=[AuditEventOut.model_validate(row, from_attributes=True) for row in page],
        next=str(page[-1].id) if more else None,
    )
