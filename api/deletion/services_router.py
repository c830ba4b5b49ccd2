"""The registry of deletion services (admin): a service that owns data about bots joins every deletion started
after it registers, by name, with the task queue its workers poll or the Nexus endpoint into its own namespace;
retiring it keeps its row, for the records that name it. The registry is the only list of services the gateway
has: it names none of its own.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request, Response
from sqlalchemy import select

from api.deletion.registered_signal import tell_waiting_deletions
from api.deletion.services_schemas import DeletionServiceBody, DeletionServiceOut, DeletionServicesOut
from api.dependencies import AdminDep, ServiceOrAdminDep, SessionDep
from api.problems import problem_responses
from api.registries import register, retire
from lifecycle.db.models import DeletionService
from lifecycle.deletion.registry import SERVICE_NAME_MAX_LENGTH, SERVICE_NAME_PATTERN

router = APIRouter(tags=["deletion services"])

ServiceName = Annotated[
    str,
    Path(
        min_length=2,
        max_length=SERVICE_NAME_MAX_LENGTH,
        pattern=SERVICE_NAME_PATTERN,
        description="A lowercase slug (letters, digits, single hyphens between them), starting with a letter.",
        examples=["search-index"],
    ),
]


def _out(service: DeletionService) -> DeletionServiceOut:
    return DeletionServiceOut.model_validate(service, from_attributes=True)


@router.put(
    "/deletion-services/{name}",
    response_model=DeletionServiceOut,
    summary="Admin, or the service's own credential: register a deletion service, or update its task queue, Nexus "
    "endpoint or contract (201 when new); the deletions that wait for a service to register go on",
    responses={
        201: {"description": "Registered", "model": DeletionServiceOut},
        **problem_responses(401, 403, 422),
    },
)
async def put_deletion_service(
    name: ServiceName,
    body: DeletionServiceBody,
    _actor: ServiceOrAdminDep,
    session: SessionDep,
    request: Request,
    response: Response,
) -> DeletionServiceOut:
    # Registering a retired service again brings it back: deletions started from now on call it.
    # A service moving to the other transport loses its old one: the next deletion calls it only the new way.
    entry, inserted = await register(
        session,
        DeletionService,
        name,
        {"task_queue": body.task_queue, "nexus_endpoint": body.nexus_endpoint, "contract": body.contract},
    )
    response.status_code = 201 if inserted else 200
    out = _out(entry)
    # Registering needs PostgreSQL alone: the deletions waiting for a service are told if Temporal answers.
    await tell_waiting_deletions(session, request.app.state.temporal)
    return out


@router.get(
    "/deletion-services",
    response_model=DeletionServicesOut,
    summary="Admin: every registered deletion service, with when each registered and last answered a deletion",
    responses=problem_responses(401, 403),
)
async def list_deletion_services(_admin: AdminDep, session: SessionDep) -> DeletionServicesOut:
    services = (await session.execute(select(DeletionService).order_by(DeletionService.name))).scalars()
    return DeletionServicesOut(services=[_out(service) for service in services])


@router.delete(
    "/deletion-services/{name}",
    status_code=204,
    summary=(
        "Admin, or the service's own credential: retire a deletion service; deletions started from now on do not"
        " call it, and one waiting for it leaves it, its receipt saying so (idempotent)"
    ),
    responses=problem_responses(401, 403, 404, 422),
)
async def retire_deletion_service(name: ServiceName, _actor: ServiceOrAdminDep, session: SessionDep) -> None:
    # The row stays, so the receipts and progress that name the service keep a registry entry to point to.
    await retire(session, DeletionService, name, "deletion service")
