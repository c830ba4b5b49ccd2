"""The account export's activities: plan, write the parts, assemble the ZIP, mark it ready, mail the link,
expire it; and the look-once wait an account deletion makes for an export requested with `export_first`.

The export holds the gateway's own rows of the account (`account.jsonl`, `bots.jsonl`, rendered by PostgreSQL's
`to_jsonb`) and each registered service's part, which the service wrote to the object store itself
(ExportSubjectData, workflows/exports/service_parts.py). Rows are read in keyset batches of `export_batch_rows`
and written straight to disk, so memory holds one batch whatever the account's size. The finished ZIP is uploaded
to the object store, which the API serves it from, and deleted there when it expires.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
from dataclasses import asdict, replace
from email.message import EmailMessage
from pathlib import Path, PurePosixPath

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection
from temporalio import activity
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory
from temporalio.service import RPCError

from activities.alerts import record_alert
from activities.deletion.follow_up import follow_up_destroyed_archive
from activities.exports.archive import (
    CHUNK,
    ServiceEntry,
    archive_path,
    assemble,
    fsync_and_rename,
    part_path,
    partial,
    parts_dir,
    remove_export_files,
    service_part_path,
    sha256_of,
)
from activities.heartbeat import heartbeating, heartbeats
from activities.mail import send_once
from activities.resources import ActivityResources
from activities.step_log import step_counts, step_skipped
from lifecycle.deletion.contracts import RegisteredService
from lifecycle.deletion.receipt_keys import ReceiptSigner
from lifecycle.deletion.registry import active_services
from lifecycle.exports.contracts import (
    AccountExportInput,
    AccountExportResult,
    ArchiveFacts,
    AssembleInput,
    ExportPart,
    ExportPlan,
    ExportRef,
    MarkReadyInput,
    PartsProgress,
    WritePartsInput,
)
from lifecycle.exports.links import download_url
from lifecycle.object_keys import (
    ObjectKeyRefused,
    archive_name,
    export_archive_key,
    export_parts_prefix,
    service_part_key,
)
from lifecycle.object_store import ObjectStore
from lifecycle.shared_contracts import AlertInput
from lifecycle.statuses import OPEN_EXPORT_STATUSES, ExportStatus

EXPORT_NOT_READY = "ExportNotReady"

_EXPORT_STATUS = text("SELECT status FROM account_exports WHERE id = :id")
_ACCOUNT_EXISTS = text("SELECT EXISTS (SELECT FROM accounts WHERE id = :account)")
_BOTS = text("SELECT id FROM bots WHERE account_id = :account ORDER BY id")
_SET_STATUS = text("UPDATE account_exports SET status = :to WHERE id = :id AND status = ANY(:from_statuses)")
_MARK_READY = text(
    "UPDATE account_exports SET status = :ready, archive_name = :archive_name, size_bytes = :size, sha256 = :sha256,"
    " ready_at = coalesce(ready_at, now()), expires_at = to_timestamp(:expires_at)"
    " WHERE id = :id AND status IN (:writing, :ready)"
)
_MARK_MAILED = text("UPDATE account_exports SET mailed_at = coalesce(mailed_at, now()) WHERE id = :id")
_MARK_EXPIRED = text(
    "UPDATE account_exports SET status = :expired, expired_at = coalesce(expired_at, now())"
    " WHERE id = :id AND status <> :failed"
)
_EARLIER_EXPORTS = text(
    "SELECT id, workflow_id FROM account_exports WHERE account_id = :account AND NOT deletion_waits ORDER BY sequence"
)
_DELETE_EXPORT = text("DELETE FROM account_exports WHERE id = :id")
_MAIL_FACTS = text(
    "SELECT a.email, e.expires_at, e.size_bytes FROM account_exports e JOIN accounts a ON a.id = e.account_id"
    " WHERE e.id = :id"
)
# Exports an account deletion must wait for: requested with export_first, and not yet ready and mailed.
_OPEN = [status.value for status in OPEN_EXPORT_STATUSES]
_BLOCKING_EXPORTS = text(
    "SELECT workflow_id FROM account_exports WHERE account_id = :account AND deletion_waits"
    " AND (status = ANY(:open) OR (status = :ready AND mailed_at IS NULL)) ORDER BY sequence LIMIT 1"
)

# The gateway's own parts: which rows each holds, and the column its keyset walk filters on by the account.
PARTS = (ExportPart(name="account.jsonl", table="accounts"), ExportPart(name="bots.jsonl", table="bots"))
_FILTER_COLUMN = {"accounts": "id", "bots": "account_id"}


def _batch_query(table: str, filter_column: str, *, after_cursor: bool) -> str:
    cursor = " AND id > :cursor" if after_cursor else ""
    return (
        f"SELECT id, to_jsonb(t)::text FROM {table} t WHERE {filter_column} = :owner{cursor} ORDER BY id LIMIT :limit"
    )


def export_ready_key(export_id: str) -> str:
    """One notification per export: retries, resets and new runs of it share the Message-ID."""
    return f"account-export-ready:{export_id}"


def _write_lines(handle: object, lines: list[str]) -> None:
    handle.write("".join(line + "\n" for line in lines).encode())  # type: ignore[attr-defined]


async def remove_archive(resources: ActivityResources, export_id: str) -> None:
    """Delete the archive from the object store and whatever of it is left on disk. Idempotent."""
    await resources.objects.delete([export_archive_key(archive_name(export_id))])
    await remove_service_parts(resources, export_id)
    await asyncio.to_thread(remove_export_files, resources.settings.exports_path, export_id)


async def remove_service_parts(resources: ActivityResources, export_id: str) -> None:
    """Delete the objects the registered services wrote for this export; the archive holds what they held."""
    store = resources.objects
    await store.delete(await store.keys(export_parts_prefix(export_id)))


async def _download(store: ObjectStore, key: str, target: Path) -> None:
    """Fetch an object into `target`, written under a temporary name and renamed once complete."""
    building = partial(target)
    async with store.reading(key) as answer:
        assert answer is not None, f"{key} vanished while being fetched"
        with building.open("wb") as handle:
            while chunk := await answer["Body"].read(CHUNK):
                await asyncio.to_thread(handle.write, chunk)
    await asyncio.to_thread(fsync_and_rename, building, target)


async def expire_export(resources: ActivityResources, signer: ReceiptSigner, export_id: str) -> None:
    """Delete the archive (whatever of it exists) and mark the export expired; then, if a deletion's receipt kept
    it, sign the follow-up receipt that says it is destroyed. Idempotent."""
    await remove_archive(resources, export_id)
    async with resources.engine.begin() as conn:
        await conn.execute(
            _MARK_EXPIRED, {"id": export_id, "expired": ExportStatus.EXPIRED, "failed": ExportStatus.FAILED}
        )
    await follow_up_destroyed_archive(resources.engine, resources.objects, signer, export_id)


async def remove_account_exports(resources: ActivityResources, account_id: str) -> int:
    """Every export of the account that no deletion asked for first (`export_first`): its run stopped, its
    archive and parts deleted from the store and the disk, its row deleted. Idempotent; how many were removed."""
    async with resources.engine.connect() as conn:
        exports = (await conn.execute(_EARLIER_EXPORTS, {"account": account_id})).all()
    for export_id, workflow_id in exports:
        # Stopped first, so no step of it writes to the store after its objects are deleted.
        with contextlib.suppress(RPCError):
            await resources.client.get_workflow_handle(workflow_id).terminate("its account is being deleted")
        await remove_archive(resources, str(export_id))
        async with resources.engine.begin() as conn:
            await conn.execute(_DELETE_EXPORT, {"id": export_id})
    return len(exports)


def _refused_alert(export_id: str, services: list[ServiceEntry]) -> AlertInput | None:
    """The archive is complete but for the files services left out, whose references an operator should look at."""
    refused = [f"{service.part.service}: {line}" for service in services for line in service.part.files_refused]
    if not refused:
        return None
    listed = "; ".join(refused[:10])
    more = f"; and {len(refused) - 10} more" if len(refused) > 10 else ""
    return AlertInput(
        workflow_id=activity.info().workflow_id or export_id,
        subject="account export: files refused",
        reason=f"export {export_id} lists {len(refused)} file(s) as refused: {listed}{more}",
    )


class AccountExportActivities:
    def __init__(self, resources: ActivityResources, signer: ReceiptSigner) -> None:
        self._resources = resources
        self._signer = signer

    @property
    def _exports(self) -> Path:
        return self._resources.settings.exports_path

    @activity.defn(name="begin_account_export")
    @heartbeats
    async def begin_account_export(self, request: AccountExportInput) -> ExportPlan:
        """Mark the export `writing` and list its parts; an account already gone fails the export."""
        async with self._resources.engine.begin() as conn:
            status = (await conn.execute(_EXPORT_STATUS, {"id": request.export_id})).scalar_one()
            if status in (ExportStatus.EXPIRED, ExportStatus.FAILED):
                step_skipped(f"the export is {status}")
                return ExportPlan(found=True, settled=status)
            if not (await conn.execute(_ACCOUNT_EXISTS, {"account": request.account_id})).scalar_one():
                return ExportPlan(found=False)
            bot_ids = [str(bot_id) for (bot_id,) in await conn.execute(_BOTS, {"account": request.account_id})]
            await conn.execute(
                _SET_STATUS,
                {"id": request.export_id, "to": ExportStatus.WRITING, "from_statuses": [ExportStatus.PENDING.value]},
            )
        return ExportPlan(found=True, parts=list(PARTS), bot_ids=bot_ids)

    @activity.defn(name="write_export_parts")
    async def write_export_parts(self, request: WritePartsInput) -> PartsProgress:
        """Write every part not yet on disk, in order, each under a temporary name renamed when complete.

        Heartbeats carry how many parts are done; after a crash the next attempt starts there, and any later
        part that a file already holds (finished after the last heartbeat) is skipped too. A part cut off
        mid-write is written again from its start: its partial file is truncated, never appended to.
        """
        details = activity.info().heartbeat_details
        progress = PartsProgress(**details[0]) if details else PartsProgress()
        await asyncio.to_thread(parts_dir(self._exports, request.export_id).mkdir, parents=True, exist_ok=True)
        written_here = 0
        async with heartbeating(lambda: asdict(progress)):
            for index in range(progress.parts_done, len(request.parts)):
                target = part_path(self._exports, request.export_id, index)
                if not await asyncio.to_thread(target.exists):
                    written = await self._write_part(request, request.parts[index], target)
                    progress = replace(progress, rows=progress.rows + written)
                    written_here += 1
                progress = replace(progress, parts_done=index + 1)
        step_counts(parts_written=written_here, parts_done=progress.parts_done, rows=progress.rows)
        if request.parts and not written_here:
            step_skipped("already written")
        return progress

    async def _write_part(self, request: WritePartsInput, part: ExportPart, target: Path) -> int:
        column = _FILTER_COLUMN[part.table]
        limit = self._resources.settings.export_batch_rows
        building = partial(target)
        rows = 0
        handle = await asyncio.to_thread(building.open, "wb")
        try:
            async with self._resources.engine.connect() as connection:
                # One snapshot per part: its rows are consistent with each other however long the walk takes.
                conn = await connection.execution_options(isolation_level="REPEATABLE READ")
                async with conn.begin():
                    rows = await self._walk(conn, part.table, column, request.account_id, limit, handle)
        finally:
            await asyncio.to_thread(handle.close)
        await asyncio.to_thread(fsync_and_rename, building, target)
        return rows

    @staticmethod
    async def _walk(conn: AsyncConnection, table: str, column: str, owner: str, limit: int, handle: object) -> int:
        first, following = (
            text(_batch_query(table, column, after_cursor=False)),
            text(_batch_query(table, column, after_cursor=True)),
        )
        rows, cursor = 0, None
        while True:
            params = {"owner": owner, "limit": limit, "cursor": cursor}
            batch = (await conn.execute(first if cursor is None else following, params)).all()
            if not batch:
                return rows
            await asyncio.to_thread(_write_lines, handle, [line for _, line in batch])
            rows += len(batch)
            cursor = batch[-1][0]
            if len(batch) < limit:
                return rows

    @activity.defn(name="assemble_export_archive")
    async def assemble_export_archive(self, request: AssembleInput) -> ArchiveFacts:
        """Build the ZIP (in a thread) from the parts and the services' parts, checksum it, upload it.

        An attempt after one that uploaded the archive but died before returning fetches it back rather than
        building it again: its facts come from the archive itself.
        """
        progress = {"entries": 0}
        store = self._resources.objects
        key = export_archive_key(archive_name(request.export_id))
        local = archive_path(self._exports, request.export_id)

        def on_entry(entries: int) -> None:
            progress["entries"] = entries

        async with heartbeating(lambda: dict(progress)):
            if not await asyncio.to_thread(local.exists) and await store.size(key) is not None:
                await _download(store, key, local)
            services = await self._fetch_service_parts(request)
            facts = await asyncio.to_thread(
                assemble, self._exports, request.export_id, request.parts, services, on_entry
            )
            if alert := _refused_alert(request.export_id, services):
                await record_alert(self._resources, alert)
            # A PUT is atomic: the key holds the whole archive or nothing.
            if await store.size(key) != facts.size_bytes:
                await store.put_file(key, local, "application/zip")
        # The store keeps it now; the scratch copy only took disk space.
        await asyncio.to_thread(local.unlink, True)
        step_counts(entries=progress["entries"], size_bytes=facts.size_bytes)
        return facts

    async def _fetch_service_parts(self, request: AssembleInput) -> list[ServiceEntry]:
        """A local copy of each service's part, checked against the digest the service answered.

        A part whose key lies outside the prefix the export gave is left out and alerted, never read: a service
        must not point the archive at objects that are not its own part.
        """
        store = self._resources.objects
        entries: list[ServiceEntry] = []
        refused: list[str] = []
        for index, part in enumerate(request.service_parts):
            if not part.object_key:
                entries.append(ServiceEntry(part))  # the service holds nothing of the account
                continue
            try:
                key = service_part_key(export_parts_prefix(request.export_id), part.object_key)
            except ObjectKeyRefused as why:
                refused.append(f"{part.service}: {why}")
                continue
            local = service_part_path(self._exports, request.export_id, index)
            if not await asyncio.to_thread(local.exists):
                await asyncio.to_thread(local.parent.mkdir, parents=True, exist_ok=True)
                await _download(store, key, local)
            if await asyncio.to_thread(sha256_of, local) != part.sha256:
                # Written again by a retried call after it answered: the next attempt fetches it afresh.
                await asyncio.to_thread(local.unlink, True)
                raise ApplicationError(f"{part.service}'s part does not match its digest")
            name = f"services/{part.service}/{PurePosixPath(key).name}"
            entries.append(ServiceEntry(part, name, local))
        if refused:
            await record_alert(
                self._resources,
                AlertInput(
                    workflow_id=activity.info().workflow_id or request.export_id,
                    subject="account export: service parts refused",
                    reason=f"export {request.export_id} leaves out: " + "; ".join(refused[:10]),
                ),
            )
        return entries

    @activity.defn(name="list_export_services")
    @heartbeats
    async def list_export_services(self) -> list[RegisteredService]:
        """The registered services an export asks for their part (ExportSubjectData): every one, alike."""
        async with self._resources.engine.connect() as conn:
            return await active_services(conn)

    @activity.defn(name="mark_export_ready")
    @heartbeats
    async def mark_export_ready(self, request: MarkReadyInput) -> None:
        async with self._resources.engine.begin() as conn:
            await conn.execute(
                _MARK_READY,
                {
                    "id": request.export_id,
                    "ready": ExportStatus.READY,
                    "writing": ExportStatus.WRITING,
                    "archive_name": request.facts.archive_name,
                    "size": request.facts.size_bytes,
                    "sha256": request.facts.sha256,
                    "expires_at": request.expires_at,
                },
            )
        # The archive holds everything now; the parts were only the way there.
        await remove_service_parts(self._resources, request.export_id)
        await asyncio.to_thread(shutil.rmtree, parts_dir(self._exports, request.export_id), True)

    @activity.defn(name="send_export_ready_email")
    @heartbeats
    async def send_export_ready_email(self, request: ExportRef) -> bool:
        """Mail the signed link once (stable Message-ID); the address is read here, never carried in history."""
        settings = self._resources.settings
        engine = self._resources.engine

        async def compose() -> EmailMessage | None:
            async with engine.connect() as conn:
                found = (await conn.execute(_MAIL_FACTS, {"id": request.export_id})).first()
            if found is None:
                activity.logger.warning("export %s: the account is gone, no link mailed", request.export_id)
                return None
            email, expires_at, size = found
            message = EmailMessage()
            message["To"] = email
            message["Subject"] = "Your data export is ready"
            message.set_content(
                f"Your data export ({size:,} bytes, ZIP) is ready. Download it here until "
                f"{expires_at:%Y-%m-%d %H:%M} UTC; no sign-in is needed:\n\n"
                f"{download_url(settings, request.export_id, int(expires_at.timestamp()))}\n"
            )
            return message

        sent = await send_once(engine, settings, export_ready_key(request.export_id), compose)
        async with engine.begin() as conn:
            await conn.execute(_MARK_MAILED, {"id": request.export_id})
        return sent

    @activity.defn(name="expire_account_export")
    @heartbeats
    async def expire_account_export(self, request: ExportRef) -> None:
        await expire_export(self._resources, self._signer, request.export_id)

    @activity.defn(name="remove_account_exports")
    @heartbeats
    async def remove_account_exports(self, account_id: str) -> int:
        return await remove_account_exports(self._resources, account_id)

    @activity.defn(name="mark_export_failed")
    @heartbeats
    async def mark_export_failed(self, request: ExportRef) -> AccountExportResult:
        async with self._resources.engine.begin() as conn:
            await conn.execute(
                _SET_STATUS,
                {"id": request.export_id, "to": ExportStatus.FAILED, "from_statuses": _OPEN},
            )
        await remove_archive(self._resources, request.export_id)
        return AccountExportResult(export_id=request.export_id, status=ExportStatus.FAILED)

    @activity.defn(name="await_account_exports")
    @heartbeats
    async def await_account_exports(self, account_id: str) -> None:
        """Look once: fail (benign, retried by the server) while an export the deletion waits for is not yet
        ready and mailed. No worker slot is held while waiting (activities/polling.py)."""
        async with self._resources.engine.connect() as conn:
            blocking = (
                await conn.execute(
                    _BLOCKING_EXPORTS,
                    {"account": account_id, "open": _OPEN, "ready": ExportStatus.READY.value},
                )
            ).scalar_one_or_none()
        if blocking is not None:
            raise ApplicationError(
                f"{blocking} is not ready and mailed yet; looking again later",
                type=EXPORT_NOT_READY,
                category=ApplicationErrorCategory.BENIGN,
            )
