"""Liveness and readiness."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from api.dependencies import PUBLIC, TemporalConnection
from api.problems import problem_response, problem_responses

router = APIRouter(tags=["health"])

# A dependency that does not answer within this is as good as down for a readiness probe.
READINESS_TIMEOUT_SECONDS = 2.0


class Health(BaseModel):
    status: str


class Readiness(BaseModel):
    status: str
    checks: dict[str, str]


@router.get("/healthz", response_model=Health, summary="The process is alive", openapi_extra=PUBLIC)
async def healthz() -> Health:
    return Health(status="ok")


async def _check_postgres(sessionmaker: async_sessionmaker[AsyncSession]) -> None:
    async with sessionmaker() as session:
        await session.execute(text("SELECT 1"))


async def _check_temporal(connection: TemporalConnection) -> None:
    client = await connection.get()
    await client.service_client.check_health()


async def _probe(check: Coroutine[Any, Any, None]) -> str:
    try:
        await asyncio.wait_for(check, READINESS_TIMEOUT_SECONDS)
    except Exception as exc:
        # The type and the message (say, gRPC's "transport error"), so an operator sees why.
        return f"unavailable: {type(exc).__name__} {exc}".rstrip()
    return "ok"


@router.get(
    "/readyz",
    response_model=Readiness,
    summary="Temporal and PostgreSQL both answer",
    responses=problem_responses(503),
    openapi_extra=PUBLIC,
)
async def readyz(request: Request) -> Readiness | JSONResponse:
    checks = {
        "postgres": await _probe(_check_postgres(request.app.state.sessionmaker)),
        "temporal": await _probe(_check_temporal(request.app.state.temporal)),
    }
    if all(result == "ok" for result in checks.values()):
        return Readiness(status="ready", checks=checks)
    failing = ", ".join(f"{name} {result}" for name, result in checks.items() if result != "ok")
    return problem_response(503, f"Not ready: {failing}.", request=request, headers={"Retry-After": "5"})
