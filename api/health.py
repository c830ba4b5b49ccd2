"""Liveness and readiness."""

from __future__ import annotations

import asyncio
import logging
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
logger = logging.getLogger(__name__)

# A dependency that does not answer within this is as good as down for a readiness probe.
READINESS_TIMEOUT_SECONDS = 2.0


class Health(BaseModel):
    status: str


@router.get("/healthz", response_model=Health, summary="The process is alive", openapi_extra=PUBLIC)
async def healthz() -> Health:
    return Health(status="ok")


async def _check_postgres(sessionmaker: async_sessionmaker[AsyncSession]) -> None:
    async with sessionmaker() as session:
        await session.execute(text("SELECT 1"))


async def _check_temporal(connection: TemporalConnection) -> None:
    client = await connection.get()
    await client.service_client.check_health()


async def _failure(check: Coroutine[Any, Any, None]) -> str | None:
    """Why the dependency is not ready, for the log; None when it answers."""
    try:
        await asyncio.wait_for(check, READINESS_TIMEOUT_SECONDS)
    except Exception as exc:
        # The type and the message (say, gRPC's "transport error"), so an operator sees why.
        return f"{type(exc).__name__} {exc}".rstrip()
    return None


@router.get(
    "/readyz",
    response_model=Health,
    summary="Temporal and PostgreSQL both answer: `ok`, or 503 `not ready`; why goes to the log",
    responses=problem_responses(503),
    openapi_extra=PUBLIC,
)
async def readyz(request: Request) -> Health | JSONResponse:
    failures = {
        "postgres": await _failure(_check_postgres(request.app.state.sessionmaker)),
        "temporal": await _failure(_check_temporal(request.app.state.temporal)),
    }
    failing = {name: why for name, why in failures.items() if why is not None}
    if not failing:
        return Health(status="ok")
    # Anyone may ask: driver errors name hosts, ports and users, so they go to the operator's log only.
    logger.warning("not ready: %s", "; ".join(f"{name} unavailable: {why}" for name, why in failing.items()))
    return problem_response(503, "not ready", request=request, headers={"Retry-After": "5"})
