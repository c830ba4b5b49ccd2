"""The catalog of site-database servers (admin): where new sites' databases go (lifecycle/sites/servers.py).

Servers are added or replaced (PUT), drained, marked down or resized (PATCH), never deleted here: sites keep
naming the server they were placed on. No answer carries a server's URL: it is stored sealed to the workers' key
(lifecycle/sealing.py), which the API cannot open, in a column its role cannot read. Every change pokes the
server's warm pool (lifecycle/sites/pool.py) once it is committed, so a new target or a drain takes effect within
seconds; a change is idempotent, so one whose answer was lost (say, Temporal unreachable for the poke) is simply
repeated.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Response
from sqlalchemy import func, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql.dml import ReturningInsert

from api.dependencies import AdminDep, SessionDep, SettingsDep, TemporalDep
from api.problems import ProblemError, checked_outbound, problem_responses
from api.sites.servers_schemas import SiteDbServerOut, SiteDbServerPatch, SiteDbServerPut, SiteDbServersOut
from lifecycle.db.models import SiteDbServer
from lifecycle.sealing import seal_for_workers
from lifecycle.sites.pool import poke_pool
from lifecycle.sites.servers import SERVER_NAME_MAX_LENGTH, SERVER_NAME_PATTERN, SERVERS_WITH_PLACED_SITES
from lifecycle.statuses import SiteDbServerState, SiteDbServerStateSetBy

router = APIRouter(tags=["site database servers"])

ServerName = Annotated[
    str,
    Path(
        min_length=1,
        max_length=SERVER_NAME_MAX_LENGTH,
        pattern=SERVER_NAME_PATTERN,
        description="A lowercase slug (letters, digits, single hyphens between them), starting with a letter.",
        examples=["db-7"],
    ),
]


async def _servers(session: AsyncSession) -> dict[str, SiteDbServerOut]:
    rows = (await session.execute(SERVERS_WITH_PLACED_SITES)).all()
    return {
        row.name: SiteDbServerOut(
            name=row.name,
            capacity=row.capacity,
            pool_target=row.pool_target,
            state=SiteDbServerState(row.state),
            state_set_by=SiteDbServerStateSetBy(row.state_set_by),
            sites=row.sites,
            pool_ready=row.pool_ready,
        )
        for row in rows
    }


@router.get(
    "/site-db-servers",
    response_model=SiteDbServersOut,
    summary="Admin: every site-database server, with the sites placed on it; never a URL",
    responses=problem_responses(401, 403),
)
async def list_site_db_servers(_admin: AdminDep, session: SessionDep) -> SiteDbServersOut:
    return SiteDbServersOut(servers=list((await _servers(session)).values()))


@router.put(
    "/site-db-servers/{name}",
    response_model=SiteDbServerOut,
    summary="Admin: add a site-database server, or replace its URL, capacity and pool target (201 when new)",
    responses={201: {"description": "Added", "model": SiteDbServerOut}, **problem_responses(401, 403, 422, 503)},
)
async def put_site_db_server(
    name: ServerName,
    body: SiteDbServerPut,
    _admin: AdminDep,
    session: SessionDep,
    settings: SettingsDep,
    temporal: TemporalDep,
    response: Response,
) -> SiteDbServerOut:
    url = make_url(body.url)
    await checked_outbound(settings.outbound.check_host(url.host or "localhost", url.port or 5432))
    # A new server is active; replacing one keeps its state (a drained server stays drained).
    sealed = await seal_for_workers(session, body.url)
    values: dict[str, Any] = {"admin_url": sealed, "capacity": body.capacity, "pool_target": body.pool_target}
    upsert: ReturningInsert[bool] = (
        insert(SiteDbServer)
        .values(name=name, state=SiteDbServerState.ACTIVE, **values)
        .on_conflict_do_update(index_elements=[SiteDbServer.name], set_={**values, "updated_at": func.now()})
        # Both times are this transaction's now() on a row this statement inserted (not xmax = 0: a system column
        # takes the table's SELECT, which the API's role lacks here, lifecycle/migrate.py).
        .returning((SiteDbServer.created_at == SiteDbServer.updated_at).label("inserted"))
    )
    inserted = (await session.execute(upsert)).scalar_one()
    await session.commit()
    await poke_pool(temporal, name, settings.site_task_queue)
    response.status_code = 201 if inserted else 200
    return (await _servers(session))[name]


@router.patch(
    "/site-db-servers/{name}",
    response_model=SiteDbServerOut,
    summary="Admin: drain a site-database server, mark it down or active again, or change its capacity or pool target",
    responses=problem_responses(401, 403, 404, 422),
)
async def patch_site_db_server(
    name: ServerName,
    body: SiteDbServerPatch,
    _admin: AdminDep,
    session: SessionDep,
    settings: SettingsDep,
    temporal: TemporalDep,
) -> SiteDbServerOut:
    changes = body.model_dump(exclude_none=True)
    if not changes:
        raise ProblemError(422, "Nothing to change: give `state`, `capacity` or `pool_target`.")
    if body.state is not None:
        # The operator's word: the health check leaves it alone, and counts its checks afresh from here.
        changes.update(state_set_by=SiteDbServerStateSetBy.OPERATOR, failed_checks=0, passed_checks=0)
    changed = await session.execute(
        update(SiteDbServer)
        .where(SiteDbServer.name == name)
        .values(**changes, updated_at=func.now())
        .returning(SiteDbServer.name)
    )
    if changed.first() is None:
        raise ProblemError(404, f"No site-database server is named {name!r}.")
    await session.commit()
    await poke_pool(temporal, name, settings.site_task_queue)
    return (await _servers(session))[name]
