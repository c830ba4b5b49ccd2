"""Account data exports: request one, follow it, and download it through a signed, expiring link."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Annotated, Any

from botocore.exceptions import ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as StoreUnreachable
from fastapi import APIRouter, Header, Query, Response, status
from fastapi.responses import StreamingResponse
from sqlalchemy import select

from api.dependencies import PUBLIC, CallerDep, ObjectStoreDep, SessionDep, SettingsDep, TemporalDep
from api.exports.schemas import ExportAccepted, ExportOut
from api.problems import ProblemError, problem_responses
from lifecycle.db.models import AccountExport
from lifecycle.exports.links import SigningKeyMissing, download_path, signature_valid
from lifecycle.exports.starts import request_account_export
from lifecycle.object_keys import ObjectKeyRefused, export_archive_key
from lifecycle.object_store import CHUNK, ObjectStore
from lifecycle.settings import Settings
from lifecycle.statuses import ExportStatus

router = APIRouter(tags=["exports"])
# The headers of the store's answer passed on to the client, by their name in aiobotocore's answer.
_PASSED_ON = {"ContentLength": "Content-Length", "ContentRange": "Content-Range", "ETag": "ETag"}


def _status_url(export_id: uuid.UUID) -> str:
    return f"/account/exports/{export_id}"


def _archive_key(archive_name: str | None) -> str | None:
    """The archive's object key, if its stored name names one under the exports prefix."""
    try:
        return export_archive_key(archive_name) if archive_name else None
    except ObjectKeyRefused:
        return None


async def _stream(store: ObjectStore, key: str, byte_range: str | None) -> StreamingResponse | None:
    """The archive (or the asked byte range of it) streamed from the store; None if the store has none."""
    exit_stack = contextlib.AsyncExitStack()
    try:
        answer: dict[str, Any] | None = await exit_stack.enter_async_context(store.reading(key, byte_range))
    except ClientError as err:
        await exit_stack.aclose()
        if err.response.get("Error", {}).get("Code") == "InvalidRange":
            raise ProblemError(416, "The requested range is not satisfiable.") from None
        raise _store_unavailable() from err
    except (StoreUnreachable, HTTPClientError) as err:
        await exit_stack.aclose()
        raise _store_unavailable() from err
    if answer is None:
        await exit_stack.aclose()
        return None

    async def body() -> AsyncIterator[bytes]:
        async with exit_stack:
            while chunk := await answer["Body"].read(CHUNK):
                yield chunk

    headers = {header: str(answer[name]) for name, header in _PASSED_ON.items() if answer.get(name) is not None}
    return StreamingResponse(
        body(),
        status_code=206 if "Content-Range" in headers else 200,
        media_type="application/zip",
        headers={**headers, "Accept-Ranges": "bytes"},
    )


def _store_unavailable() -> ProblemError:
    return ProblemError(
        503, "The archive store does not answer; try the same link again shortly.", headers={"Retry-After": "30"}
    )


def _not_configured() -> ProblemError:
    return ProblemError(503, "Exports are not configured on this server (EXPORT_SIGNING_KEY is not set).")


@router.post(
    "/account/exports",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=ExportAccepted,
    summary="Export the calling account's data as one ZIP; a repeat while one is being written joins it",
    responses=problem_responses(401),
)
async def create_export(
    caller: CallerDep, session: SessionDep, client: TemporalDep, settings: SettingsDep, response: Response
) -> ExportAccepted:
    if not settings.export_signing_key:
        raise _not_configured()
    accepted = await request_account_export(session, client, settings, account_id=caller.account_id)
    response.headers["Location"] = _status_url(accepted.export_id)
    return ExportAccepted(id=accepted.export_id, status=accepted.status, status_url=_status_url(accepted.export_id))


def _download_url(settings: Settings, export: AccountExport) -> str | None:
    if export.status != ExportStatus.READY or export.expires_at is None or not settings.export_signing_key:
        return None
    return download_path(settings, str(export.id), int(export.expires_at.timestamp()))


@router.get(
    "/account/exports/{export_id}",
    response_model=ExportOut,
    summary="An export's status, size, checksum, expiry and (once ready) its signed download link",
    responses=problem_responses(401, 404),
)
async def get_export(export_id: uuid.UUID, caller: CallerDep, session: SessionDep, settings: SettingsDep) -> ExportOut:
    export = (
        await session.execute(
            select(AccountExport).where(AccountExport.id == export_id, AccountExport.account_id == caller.account_id)
        )
    ).scalar_one_or_none()
    if export is None:
        raise ProblemError(404, "No such export.")
    return ExportOut(
        id=export.id,
        status=ExportStatus(export.status),
        requested_at=export.requested_at,
        size_bytes=export.size_bytes,
        sha256=export.sha256,
        expires_at=export.expires_at,
        download_url=_download_url(settings, export),
    )


@router.get(
    "/exports/{export_id}/download",
    response_class=StreamingResponse,
    summary="Download an export's ZIP through its signed link (no API key); supports a `Range` request",
    responses={
        200: {"content": {"application/zip": {}}, "description": "The archive."},
        206: {"content": {"application/zip": {}}, "description": "The requested byte range."},
        **problem_responses(403, 404, 410, 416, 503),
    },
    # The signed link is the credential (an HMAC, checked in tests/exports): no API key.
    openapi_extra=PUBLIC,
)
async def download_export(
    export_id: uuid.UUID,
    expires: Annotated[int, Query(ge=0, le=2**53, description="Unix time the link expires.")],
    signature: Annotated[str, Query(min_length=1, max_length=128, description="HMAC-SHA256 of id and expiry.")],
    session: SessionDep,
    settings: SettingsDep,
    store: ObjectStoreDep,
    byte_range: Annotated[str | None, Header(alias="Range", include_in_schema=False)] = None,
) -> StreamingResponse:
    try:
        valid = signature_valid(settings, str(export_id), expires, signature)
    except SigningKeyMissing:
        raise _not_configured() from None
    if not valid:
        raise ProblemError(403, "This download link is invalid or has expired.")
    export = await session.get(AccountExport, export_id)
    gone = ProblemError(410, "This export's archive has expired and was deleted.")
    if export is None:
        # The link is ours (its signature holds), so the export existed: its account's deletion destroyed it.
        raise ProblemError(410, "This export's archive was deleted with its account.")
    if export.status in (ExportStatus.PENDING, ExportStatus.WRITING, ExportStatus.FAILED):
        raise ProblemError(404, "No archive exists for this export.")
    key = _archive_key(export.archive_name)
    expired = export.expires_at is not None and export.expires_at <= datetime.now(UTC)
    if export.status == ExportStatus.EXPIRED or expired or key is None:
        raise gone
    # Streamed through the API rather than a presigned URL: the store need not be reachable from the client,
    # and the signed link stays the only credential. A Range is passed on to the store (206, or 416).
    streamed = await _stream(store, key, byte_range)
    if streamed is None:
        raise gone
    streamed.headers["Content-Disposition"] = f'attachment; filename="account-export-{export_id}.zip"'
    return streamed
