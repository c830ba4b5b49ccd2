"""The registry of processors (admin): the recipients of the accounts' data (email, CRM and metrics vendors) that
every account deletion tells with one signed erasure request (GDPR Art. 19 and 28). Retiring one keeps its row,
for the erasures that name it. Its secret is stored sealed to the workers' key (lifecycle/sealing.py): only the workers
that sign open it, and the API can neither answer it back nor read it.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Response
from sqlalchemy import select

from api.deletion.processors_schemas import ProcessorBody, ProcessorOut, ProcessorsOut
from api.dependencies import AdminDep, SessionDep, SettingsDep
from api.problems import checked_outbound, problem_responses
from api.registries import register, retire
from lifecycle.db.models import Processor
from lifecycle.deletion.registry import SERVICE_NAME_MAX_LENGTH, SERVICE_NAME_PATTERN
from lifecycle.sealing import seal_for_workers

router = APIRouter(tags=["processors"])

ProcessorName = Annotated[
    str,
    Path(
        min_length=2,
        max_length=SERVICE_NAME_MAX_LENGTH,
        pattern=SERVICE_NAME_PATTERN,
        description="A lowercase slug (letters, digits, single hyphens between them), starting with a letter.",
        examples=["crm"],
    ),
]


def _out(processor: Processor) -> ProcessorOut:
    return ProcessorOut.model_validate(processor, from_attributes=True)


@router.put(
    "/processors/{name}",
    response_model=ProcessorOut,
    summary="Admin: register a processor that account deletions tell, or change its URL or secret (201 when new)",
    responses={201: {"description": "Registered", "model": ProcessorOut}, **problem_responses(401, 403, 422, 503)},
)
async def put_processor(
    name: ProcessorName,
    body: ProcessorBody,
    _admin: AdminDep,
    session: SessionDep,
    settings: SettingsDep,
    response: Response,
) -> ProcessorOut:
    # Registering a retired processor again brings it back: deletions from now on tell it.
    url = str(body.url)
    await checked_outbound(settings.outbound.check_url(url))
    secret = await seal_for_workers(session, body.secret)
    entry, inserted = await register(session, Processor, name, {"url": url, "secret": secret})
    response.status_code = 201 if inserted else 200
    return _out(entry)


@router.get(
    "/processors",
    response_model=ProcessorsOut,
    summary="Admin: every registered processor (never its secret)",
    responses=problem_responses(401, 403),
)
async def list_processors(_admin: AdminDep, session: SessionDep) -> ProcessorsOut:
    processors = (await session.execute(select(Processor).order_by(Processor.name))).scalars()
    return ProcessorsOut(processors=[_out(processor) for processor in processors])


@router.delete(
    "/processors/{name}",
    status_code=204,
    summary=(
        "Admin: retire a processor; deletions from now on do not tell it, and a request still pending to it is"
        " recorded skipped (idempotent)"
    ),
    responses=problem_responses(401, 403, 404, 422),
)
async def retire_processor(name: ProcessorName, _admin: AdminDep, session: SessionDep) -> None:
    await retire(session, Processor, name, "processor")
