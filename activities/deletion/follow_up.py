"""Follow-up receipts: what changed after an account's receipt was signed, signed and chained the same way.

An account's first receipt may not be final: a processor had not acknowledged yet, or a copy was kept on purpose
(the `export_first` archive, until its retention ends). When the last processor answers (or is skipped), and when
a kept archive is destroyed, a follow-up receipt is signed. It `completes` the first receipt (its id and SHA-256),
restates the account's state as it is then (`erased`, `processors`, `retained`, `complete`), names what was
destroyed since, and joins the one chain of receipts (`previous_sha256`) like every other receipt. Keyed by what
it follows up, so a retry, a reset or a second worker finds the one already signed.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from temporalio import activity

from activities.deletion.receipts import (
    EXISTING_RECEIPT,
    RECEIPT_IDS,
    RECEIPT_VERSION,
    account_sections,
    append_receipt,
    copied,
)
from activities.heartbeat import heartbeats
from activities.resources import ActivityResources
from activities.step_log import step_skipped
from lifecycle.deletion.contracts import FollowUpInput, ReceiptSubject
from lifecycle.deletion.processors import erasure_id
from lifecycle.deletion.receipt_copies import ReceiptCopies, ReceiptRecord, chain_id
from lifecycle.deletion.receipt_keys import CHAIN_LOCK, ReceiptSigner
from lifecycle.object_store import ObjectStore
from lifecycle.statuses import ExportStatus

# Follow-up receipts' keys start so, which tells them from the first receipts of deletions.
FOLLOW_UP_PREFIX = "follow-up:"
PROCESSORS_ANSWERED = "processors_answered"
RETAINED_COPY_DESTROYED = "retained_copy_destroyed"

_FIRST = text("SELECT canonical, sha256, account_id FROM deletion_receipts WHERE id = :id")
_ACCOUNT_RECEIPTS = text(
    "SELECT id, canonical FROM deletion_receipts WHERE account_id = :account AND subject_kind = :kind"
    " AND receipt_key NOT LIKE :follow_ups ORDER BY seq"
).bindparams(kind=ReceiptSubject.ACCOUNT.value, follow_ups=f"{FOLLOW_UP_PREFIX}%")
_DESTROYED = text("SELECT id, expired_at FROM account_exports WHERE id = ANY(:ids) AND status <> :ready").bindparams(
    ready=ExportStatus.READY.value
)
_EXPORT_ACCOUNT = text("SELECT account_id FROM account_exports WHERE id = :id")


def follow_up_key(reason: str, subject: str) -> str:
    return f"{FOLLOW_UP_PREFIX}{reason}:{subject}"


def _time(moment: datetime | None) -> str | None:
    return None if moment is None else moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


async def issue_follow_up(
    engine: AsyncEngine, objects: ObjectStore, signer: ReceiptSigner, request: FollowUpInput
) -> str:
    """Sign, chain and copy the follow-up of receipt `request.receipt_id`; its id. Idempotent by `request.key`."""
    copies = await _copies(engine, objects)
    async with engine.begin() as conn:
        await conn.execute(CHAIN_LOCK)
        record = await _issue_locked(conn, copies, signer, request)
    return await copied(copies, record)


async def _copies(engine: AsyncEngine, objects: ObjectStore) -> ReceiptCopies:
    async with engine.connect() as conn:
        return ReceiptCopies(objects, await chain_id(conn))


async def _issue_locked(
    conn: AsyncConnection, copies: ReceiptCopies, signer: ReceiptSigner, request: FollowUpInput
) -> ReceiptRecord:
    """Through append_receipt, as every receipt: chained after the true head, and copied once committed."""
    if (existing := (await conn.execute(EXISTING_RECEIPT, {"key": request.key})).first()) is not None:
        step_skipped("already issued")
        return ReceiptRecord(*existing)
    canonical, sha256, account_id = (await conn.execute(_FIRST, {"id": request.receipt_id})).one()
    first = json.loads(canonical)
    body = await _body(conn, request, first, sha256, str(account_id))
    return await append_receipt(
        conn,
        copies,
        await signer.current(conn),
        body,
        {
            "key": request.key,
            "kind": first["subject"]["kind"],
            "subject": first["subject"]["id"],
            "account": str(account_id),
            "workflow_id": first["workflow_id"],
        },
    )


async def _body(
    conn: AsyncConnection, request: FollowUpInput, first: dict[str, Any], sha256: str, account_id: str
) -> dict[str, Any]:
    kept = [copy["export_id"] for copy in first.get("retained", [])]
    sections = await account_sections(
        conn, erasure_id(first["workflow_id"], first["first_run_id"]), account_id, first["erased"], kept=kept
    )
    destroyed = [
        {"kind": "export_archive", "export_id": str(export_id), "destroyed_at": _time(expired_at)}
        for export_id, expired_at in await conn.execute(_DESTROYED, {"ids": [uuid.UUID(k) for k in kept]})
    ]
    return {
        "id": str(uuid.uuid5(RECEIPT_IDS, request.key)),
        "version": RECEIPT_VERSION,
        "subject": first["subject"],
        "workflow_id": first["workflow_id"],
        "completes": {"receipt_id": request.receipt_id, "sha256": sha256},
        "reason": request.reason,
        "issued_at": _time(datetime.now(UTC)),
        "destroyed": sorted(destroyed, key=lambda copy: copy["export_id"]),
        **sections,
    }


async def follow_up_destroyed_archive(
    engine: AsyncEngine, objects: ObjectStore, signer: ReceiptSigner, export_id: str
) -> str | None:
    """After an export's archive was destroyed: the follow-up of the account receipt that listed it as kept, if
    one did (an archive that expired before its account's deletion was on no receipt). Its id, or None.

    The receipts are read under the chain's lock, as an account's receipt reads what is kept: a receipt is either
    signed before this looks (and followed up) or reads the archive as destroyed (and does not list it)."""
    copies = await _copies(engine, objects)
    async with engine.begin() as conn:
        await conn.execute(CHAIN_LOCK)
        account_id = (await conn.execute(_EXPORT_ACCOUNT, {"id": export_id})).scalar_one_or_none()
        if account_id is None:
            return None
        for receipt_id, canonical in await conn.execute(_ACCOUNT_RECEIPTS, {"account": account_id}):
            if any(copy["export_id"] == export_id for copy in json.loads(canonical).get("retained", [])):
                follow_up = FollowUpInput(
                    receipt_id=str(receipt_id),
                    key=follow_up_key(RETAINED_COPY_DESTROYED, export_id),
                    reason=RETAINED_COPY_DESTROYED,
                )
                record = await _issue_locked(conn, copies, signer, follow_up)
                break
        else:
            return None
    return await copied(copies, record)


class FollowUpReceipts:
    def __init__(self, resources: ActivityResources, signer: ReceiptSigner) -> None:
        self._resources = resources
        self._signer = signer

    @activity.defn(name="issue_follow_up_receipt")
    @heartbeats
    async def issue_follow_up_receipt(self, request: FollowUpInput) -> str:
        return await issue_follow_up(self._resources.engine, self._resources.objects, self._signer, request)
