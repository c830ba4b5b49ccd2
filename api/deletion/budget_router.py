"""The one deletion budget every running deletion shares (admin): read it, change it live."""

from __future__ import annotations

from fastapi import APIRouter

from api.deletion.budget_schemas import DeletionBudgetBody
from api.dependencies import AdminDep, EngineDep
from api.problems import problem_responses
from lifecycle.deletion.budget import read_budget, set_budget

router = APIRouter(tags=["deletions"])


@router.get(
    "/deletion-budget",
    response_model=DeletionBudgetBody,
    summary="Admin: the rows/s budget every running deletion shares (null: unlimited)",
    responses=problem_responses(401, 403),
)
async def get_deletion_budget(_admin: AdminDep, engine: EngineDep) -> DeletionBudgetBody:
    async with engine.connect() as conn:
        return DeletionBudgetBody(rows_per_second=await read_budget(conn))


@router.put(
    "/deletion-budget",
    response_model=DeletionBudgetBody,
    summary="Admin: change the rows/s budget; every running deletion follows within a second",
    responses=problem_responses(401, 403, 422),
)
async def put_deletion_budget(body: DeletionBudgetBody, _admin: AdminDep, engine: EngineDep) -> DeletionBudgetBody:
    async with engine.begin() as conn:
        await set_budget(conn, body.rows_per_second)
    return body
