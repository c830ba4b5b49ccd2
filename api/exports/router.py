"""Account data exports: request one, follow it, and download it through a signed, expiring link."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Query, Response, status
from fastapi.responses import FileResponse
from sqlalchemy import select

from api.dependencies import PUBLIC, CallerDep, SessionDep, SettingsDep, TemporalDep
from api.exports.schemas import ExportAccepted, ExportOut
from api.problems import ProblemError, problem_responses
from lifecycle.db.models import AccountExport
from lifecycle.exports.links import SigningKeyMissing, download_path, signature_valid
from lifecycle.exports.starts import request_account_export
from lifecycle.settings import Settings
from lifecycle.statuses import ExportStatus
from lifecycle.stored_paths import StoredPathRefused, StoredRoot

router = APIRouter(tags=["exports"])


def _status_url(export_id: uuid.UUID) -> str:
    return f"/account/exports/{export_id}"


def _archive(settings: Settings, archive_name: str | None) -> Path | None:
    """The archive's file, if its stored name names one inside the exports directory."""
    try:
        return StoredRoot(settings.exports_path).target(archive_name) if archive_name else None
    except StoredPathRefused:
        return None


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
    response_class=FileResponse,
    summary="Download an export's ZIP through its signed link (no API key); supports a `Range` request",
    responses={
        200: {"content": {"application/zip": {}}, "description": "The archive."},
        206: {"content": {"application/zip": {}}, "description": "The requested byte range."},
        **problem_responses(403, 404, 410),
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
) -> FileResponse:
    try:
        valid = signature_valid(settings, str(export_id), expires, signature)
    except SigningKeyMissing:
        raise _not_configured() from None
    if not valid:
        raise ProblemError(403, "This download link is invalid or has expired.")
    export = await session.get(AccountExport, export_id)
    if export is None or export.status in (ExportStatus.PENDING, ExportStatus.WRITING, ExportStatus.FAILED):
        raise ProblemError(404, "No archive exists for this export.")
    path = _archive(settings, export.archive_name)
    expired = export.expires_at is not None and export.expires_at <= datetime.now(UTC)
    if export.status == ExportStatus.EXPIRED or expired or path is None or not path.is_file():
        raise ProblemError(410, "This export's archive has expired and was deleted.")
    # Starlette streams the file with Content-Length and answers a Range with 206 (416 if unsatisfiable).
    return FileResponse(path, media_type="application/zip", filename=f"account-export-{export_id}.zip")
