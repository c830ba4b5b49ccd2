"""RFC 9457 problem details: every error the API returns, and how the OpenAPI schema declares them."""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Awaitable
from http import HTTPStatus
from typing import Any

import asyncpg
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException
from starlette.routing import compile_path
from temporalio.service import RPCError, RPCStatusCode

from api.temporal_client import TemporalUnavailable
from lifecycle.outbound import OutboundRefused
from lifecycle.sealing import NoSealingKey

PROBLEM_MEDIA_TYPE = "application/problem+json"
logger = logging.getLogger(__name__)


class Problem(BaseModel):
    type: str = "about:blank"
    title: str
    status: int
    detail: str | None = None
    instance: str | None = None
    errors: list[dict[str, Any]] | None = None


class ProblemError(Exception):
    """Raise to answer with a problem document."""

    def __init__(self, status: int, detail: str, *, title: str | None = None, headers: dict[str, str] | None = None):
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.title = title or HTTPStatus(status).phrase
        self.headers = headers


async def checked_outbound(check: Awaitable[object]) -> None:
    """An address an admin registers, held to the outbound rule (lifecycle/outbound.py): refused, a 422."""
    try:
        await check
    except OutboundRefused as refused:
        raise ProblemError(422, f"This address may not be called: {refused}.") from None


def problem_response(
    status: int,
    detail: str | None,
    *,
    request: Request | None = None,
    title: str | None = None,
    errors: list[dict[str, Any]] | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    body = Problem(
        title=title or HTTPStatus(status).phrase,
        status=status,
        detail=detail,
        instance=request.url.path if request is not None else None,
        errors=errors,
    )
    return JSONResponse(
        body.model_dump(exclude_none=True), status_code=status, media_type=PROBLEM_MEDIA_TYPE, headers=headers
    )


# asyncpg's own errors for a server that is unreachable, starting, shutting down or gone mid-query: raised
# bare by raw asyncpg connections, and wrapped in DBAPIError by SQLAlchemy.
_DATABASE_DOWN = (
    asyncpg.PostgresConnectionError,
    asyncpg.exceptions.OperatorInterventionError,
    asyncpg.InterfaceError,
    OSError,
)


def _is_unavailable_database(exc: BaseException) -> bool:
    if isinstance(exc, OperationalError | InterfaceError | _DATABASE_DOWN):
        return True
    if isinstance(exc, DBAPIError):
        return exc.connection_invalidated or isinstance(exc.orig, _DATABASE_DOWN) or _caused_by_outage(exc.orig)
    return False


def _caused_by_outage(exc: BaseException | None) -> bool:
    # SQLAlchemy's asyncpg adapter keeps the driver's exception as the cause of `orig`.
    return exc is not None and isinstance(exc.__cause__, _DATABASE_DOWN)


def _validation_errors(exc: RequestValidationError) -> list[dict[str, Any]]:
    return [
        {"location": ".".join(str(part) for part in error.get("loc", ())), "message": error.get("msg", "")}
        for error in exc.errors()
    ]


def install_problem_handlers(app: FastAPI) -> None:
    @app.exception_handler(ProblemError)
    async def _problem(request: Request, exc: ProblemError) -> JSONResponse:
        return problem_response(exc.status, exc.detail, request=request, title=exc.title, headers=exc.headers)

    @app.exception_handler(HTTPException)
    async def _http(request: Request, exc: HTTPException) -> JSONResponse:
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            headers = {name.lower(): value for name, value in headers.items()}
            headers["allow"] = ", ".join(allowed_methods(request)) or headers.get("allow", "")
        return problem_response(
            exc.status_code, _routing_detail(request, exc, headers), request=request, headers=headers
        )

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = _validation_errors(exc)
        summary = "; ".join(f"{e['location']}: {e['message']}" for e in errors[:5])
        return problem_response(422, f"The request is invalid. {summary}", request=request, errors=errors)

    # Registered per class, so the inner exception middleware answers them like any other problem.
    @app.exception_handler(DBAPIError)
    @app.exception_handler(OSError)
    @app.exception_handler(TimeoutError)
    @app.exception_handler(PoolTimeout)
    @app.exception_handler(asyncpg.PostgresConnectionError)
    @app.exception_handler(asyncpg.exceptions.OperatorInterventionError)
    @app.exception_handler(asyncpg.InterfaceError)
    async def _dependency_down(request: Request, exc: Exception) -> JSONResponse:
        if isinstance(exc, DBAPIError) and not _is_unavailable_database(exc):
            return _internal_error(request, exc)
        logger.warning("dependency unavailable: %s", exc)
        return _unavailable(request, "A backing service is unavailable; retry shortly.")

    @app.exception_handler(TemporalUnavailable)
    async def _temporal_unreachable(request: Request, exc: TemporalUnavailable) -> JSONResponse:
        logger.warning("Temporal unavailable: %s", exc)
        return _unavailable(request, "The workflow service is unavailable; retry shortly.")

    @app.exception_handler(NoSealingKey)
    async def _no_sealing_key(request: Request, exc: NoSealingKey) -> JSONResponse:
        return _unavailable(request, str(exc))

    @app.exception_handler(RPCError)
    async def _temporal_down(request: Request, exc: RPCError) -> JSONResponse:
        # UNAVAILABLE: no connection; DEADLINE_EXCEEDED: a connect or call that timed out.
        if exc.status not in (RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED):
            return _internal_error(request, exc)
        logger.warning("Temporal unavailable: %s", exc)
        return _unavailable(request, "The workflow service is unavailable; retry shortly.")

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        return _internal_error(request, exc)


def _routing_detail(request: Request, exc: HTTPException, headers: dict[str, str]) -> str:
    """Starlette's own 404/405 say only "Not Found"; say what to change instead."""
    if str(exc.detail) != HTTPStatus(exc.status_code).phrase:
        return str(exc.detail)
    if exc.status_code == 404:
        return f"No operation at {request.url.path}; the API's paths are listed at /docs."
    if exc.status_code == 405:
        allowed = headers.get("allow") or "another method"
        return f"{request.method} is not allowed on {request.url.path}; use {allowed}."
    return str(exc.detail)


def allowed_methods(request: Request) -> list[str]:
    """Every method the path has, as the OpenAPI schema lists them. Starlette's own 405 names only the first
    route that matched the path, so `OPTIONS /sites` said `Allow: POST` though `GET /sites` exists too."""
    methods: set[str] = set()
    for template, path_item in request.app.openapi()["paths"].items():
        if _path_regex(template).match(request.url.path):
            methods.update(method.upper() for method in path_item)
    return sorted(methods)


@functools.cache
def _path_regex(template: str) -> re.Pattern[str]:
    regex, _, _ = compile_path(template)
    return regex


def _unavailable(request: Request, detail: str) -> JSONResponse:
    return problem_response(503, detail, request=request, headers={"Retry-After": "5"})


def _internal_error(request: Request, exc: Exception) -> JSONResponse:
    logger.error("unhandled error", exc_info=exc)
    return problem_response(500, "An unexpected error occurred.", request=request)


def problem_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` entries for the given error statuses; `document_problems` sets their media type."""
    return {status: {"model": Problem, "description": HTTPStatus(status).phrase} for status in statuses}


# Errors any operation may answer with, whatever its own declarations.
COMMON_ERROR_STATUSES = (500, 503)


def document_problems(schema: dict[str, Any]) -> dict[str, Any]:
    """Declare every 4xx/5xx as application/problem+json, the only media type the API uses for errors."""
    problem_ref = {"$ref": "#/components/schemas/Problem"}
    for path_item in schema.get("paths", {}).values():
        for operation in path_item.values():
            responses = operation.setdefault("responses", {})
            for status in COMMON_ERROR_STATUSES:
                responses.setdefault(str(status), {"description": HTTPStatus(status).phrase})
            if "requestBody" in operation:
                responses.setdefault("413", {"description": HTTPStatus(413).phrase})
                # A body that is not JSON at all, which FastAPI refuses before any validation.
                responses.setdefault("400", {"description": HTTPStatus(400).phrase})
            for status, response in responses.items():
                if status.isdigit() and int(status) >= 400:
                    response["content"] = {PROBLEM_MEDIA_TYPE: {"schema": problem_ref}}
    schema.setdefault("components", {}).setdefault("schemas", {})["Problem"] = Problem.model_json_schema()
    return schema
