"""The one deletion budget every running deletion shares, and each service's own override (admin): read them,
change them live."""

from __future__ import annotations

from fastapi import APIRouter
from sqlalchemy.ext.asyncio import AsyncConnection

from api.deletion.budget_schemas import DeletionBudgetBody, DeletionBudgetOut
from api.dependencies import AdminDep, EngineDep, SessionDep
from api.problems import problem_responses
from lifecycle.deletion.budget import read_deletion_budget, set_budget, set_overrides

router = APIRouter(tags=["deletions"])


async def _out(conn: AsyncConnection) -> DeletionBudgetOut:
    budget = await read_deletion_budget(conn)
    return DeletionBudgetOut(rows_per_second=budget.rows_per_second, services=budget.services)


@router.get(
    "/deletion-budget",
    response_model=DeletionBudgetOut,
    summary="Admin: the rows/s budget every running deletion shares (null: unlimited), and each service's own",
    responses=problem_responses(401, 403),
)
async def get_deletion_budget(_admin: AdminDep, engine: EngineDep) -> DeletionBudgetOut:
    async with engine.connect() as conn:
        return await _out(conn)


@router.put(
    "/deletion-budget",
    response_model=DeletionBudgetOut,
    summary="Admin: change the rows/s budget and services' overrides; every running deletion follows within a second",
    responses=problem_responses(401, 403, 422),
)
async def put_deletion_budget(body: DeletionBudgetBody, _admin: AdminDep, session: SessionDep) -> DeletionBudgetOut:
    # On the request's session, whose transaction also holds the act's audit row.
    conn = await session.connection()
    await set_budget(conn, body.rows_per_second)
    await set_overrides(conn, body.services)
    answer = await _out(conn)
    await session.commit()
    return answer
