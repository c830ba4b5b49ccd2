"""The deletion receipt: an independent check that the subject is gone, then a signed record of what went.

The check does not trust the services' deletion answers: each registered service counts what it still holds of
the bot in its own store (VerifySubjectErased, which the workflow calls just before), and an account's receipt adds
up its bots' receipts' counts; the gateway itself counts only what it owns (the bot row, or the account's rows,
bots, sites and keys). The receipt records what the services answered per service (deletion_progress), keyed
by registered name, the check's findings, the phases' times, the operator's
actions and the budget changes meanwhile; it is chained to the receipt before it by that one's SHA-256, so a
receipt removed from the table breaks the chain. Idempotent: a retry, a reset or a worker killed after the
insert finds the receipt of its deletion and returns it.

Each receipt is copied to the object store once committed (again by every attempt that finds it), where a restore
of the database cannot roll it back; a database whose last receipt has a successor there was restored, and the
receipt waits until `python -m lifecycle.deletion.reapply` puts the missing ones back
(lifecycle/deletion/receipt_copies.py).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection
from temporalio import activity

from activities.heartbeat import heartbeats
from activities.resources import ActivityResources
from activities.step_log import step_skipped
from lifecycle.deletion.contracts import ReceiptInput, ReceiptSubject
from lifecycle.deletion.due import held_for
from lifecycle.deletion.processors import erasure_id
from lifecycle.deletion.receipt_copies import RECORD_COLUMNS, ReceiptCopies, ReceiptRecord, chain_id
from lifecycle.deletion.receipt_keys import CHAIN_LOCK, ReceiptKey, ReceiptSigner
from lifecycle.deletion.receipts import ACCOUNT_ROW_CHECK, BOT_ROW_CHECK, sign
from lifecycle.statuses import ExportStatus, ProcessorAnswer

# The receipts' format; a verifier can tell which fields to expect. 2: `key_id` names the signing key. 3:
# `legal_holds`, the times of the holds that stopped the deletion; an account's receipt has `erased`, `processors`
# and `retained`; a follow-up receipt `completes` an earlier one. 4: `due_at`, `overdue` and `held_seconds`, the
# time legal holds stopped the erasure's clock; `registry`, the deletion services the deletion used, each with when
# it registered.
RECEIPT_VERSION = 4
# Receipt ids are derived from the deletion they describe, so every attempt names the same receipt.
RECEIPT_IDS = uuid.UUID("6f1d3c52-6d0b-4d1e-9a51-3f0f6b1f2d8e")
EXISTING_RECEIPT = text(f"SELECT {RECORD_COLUMNS} FROM deletion_receipts WHERE receipt_key = :key")
_CHAIN_HEAD = text("SELECT sha256 FROM deletion_receipts ORDER BY seq DESC LIMIT 1")
_INSERT = text(
    "INSERT INTO deletion_receipts (id, receipt_key, subject_kind, subject_id, account_id, workflow_id, canonical,"
    " sha256, signature) VALUES (:id, :key, :kind, :subject, :account, :workflow_id, :canonical, :sha256, :signature)"
    f" RETURNING {RECORD_COLUMNS}"
)
_REQUEST = text("SELECT requested_at, deletes_at, due_at FROM deletion_requests WHERE workflow_id = :workflow_id")
_PROGRESS = text(
    "SELECT service, sum(deleted), sum(files_deleted), bool_or(skipped), min(started_at),"
    " max(updated_at) FILTER (WHERE done) FROM deletion_progress WHERE workflow_id = ANY(:workflow_ids)"
    " GROUP BY service ORDER BY service"
)
_BOT_RUNS = text(
    "SELECT workflow_id, bot_id FROM deletion_requests WHERE account_id = :account AND kind = 'bot' ORDER BY bot_id"
)
_BOT_RECEIPTS = text(
    "SELECT subject_id, canonical FROM deletion_receipts WHERE account_id = :account AND subject_kind = 'bot'"
    " ORDER BY seq"
)
# The account's legal holds in force at some time since the deletion was requested: when each was placed and
# released (null: still in force). Their reasons stay in legal_holds: a receipt holds no personal data.
_LEGAL_HOLDS = text(
    "SELECT placed_at, released_at FROM legal_holds WHERE account_id = :account"
    " AND (released_at IS NULL OR released_at >= :since) ORDER BY placed_at"
)
_PROCESSORS = text(
    "SELECT processor, status, acknowledged_at, reference FROM processor_erasures WHERE erasure_id = :erasure"
    " ORDER BY processor"
)
# The copies a deletion keeps on purpose: an export archive (`export_first`) until its retention ends.
_RETAINED = text(
    "SELECT id, expires_at FROM account_exports WHERE account_id = :account AND status = :ready ORDER BY sequence"
).bindparams(ready=ExportStatus.READY.value)
_BUDGET_CHANGES = text(
    "SELECT rows_per_second, changed_at, service FROM deletion_budget_changes WHERE changed_at >= :since ORDER BY id"
)


async def account_sections(
    conn: AsyncConnection, erasure: uuid.UUID, account_id: str, erased: bool, *, kept: list[str] | None = None
) -> dict[str, Any]:
    """What an account's receipt adds: `erased` (every check passed, nothing skipped), each processor's answer,
    the copies deliberately kept with their expiry (`kept`: only those export ids), and `complete`, true only
    when the data is erased and every processor acknowledged."""
    processors = {
        name: {"status": status, "acknowledged_at": _time(acknowledged_at), "reference": reference}
        for name, status, acknowledged_at, reference in await conn.execute(_PROCESSORS, {"erasure": erasure})
    }
    retained = [
        {"kind": "export_archive", "export_id": str(export_id), "expires_at": _time(expires_at)}
        for export_id, expires_at in await conn.execute(_RETAINED, {"account": account_id})
        if kept is None or str(export_id) in kept
    ]
    acknowledged = all(p["status"] == ProcessorAnswer.ACKNOWLEDGED for p in processors.values())
    return {"erased": erased, "processors": processors, "retained": retained, "complete": erased and acknowledged}


def reached_all(registry: list[dict[str, str]], skipped: bool, checks: list[dict[str, Any]]) -> bool:
    """A receipt's `complete`: some registered service was reached, none was skipped, and every check passed. A
    receipt whose registry is empty reached nobody, so it can never be complete, whatever else led to it (an
    operator's nothing_to_reach, or a registry lost or not yet filled)."""
    return bool(registry) and not skipped and all(check["passed"] for check in checks)


def receipt_key(request: ReceiptInput) -> str:
    return f"{request.workflow_id}:{request.first_run_id}"


def receipt_id(request: ReceiptInput) -> uuid.UUID:
    return uuid.uuid5(RECEIPT_IDS, receipt_key(request))


def _time(moment: datetime | None) -> str | None:
    return None if moment is None else moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


class DeletionReceipts:
    def __init__(self, resources: ActivityResources, signer: ReceiptSigner) -> None:
        self._resources = resources
        self._signer = signer

    @activity.defn(name="issue_deletion_receipt")
    @heartbeats
    async def issue_deletion_receipt(self, request: ReceiptInput) -> str:
        """Check, then record, sign and copy; returns the receipt's id."""
        key = receipt_key(request)
        async with self._resources.engine.connect() as conn:
            copies = ReceiptCopies(self._resources.objects, await chain_id(conn))
            if (existing := (await conn.execute(EXISTING_RECEIPT, {"key": key})).first()) is not None:
                step_skipped("already issued")
                return await copied(copies, ReceiptRecord(*existing))
            body = await self._body(conn, request)
        async with self._resources.engine.begin() as conn:
            # Serialises the chain (each receipt names the hash of the one before it) and rotations.
            await conn.execute(CHAIN_LOCK)
            if (existing := (await conn.execute(EXISTING_RECEIPT, {"key": key})).first()) is not None:
                step_skipped("already issued")
                return await copied(copies, ReceiptRecord(*existing))
            if request.subject_kind == ReceiptSubject.ACCOUNT:
                # Read under the lock: an archive destroyed from now on finds this receipt and follows it up
                # (activities/deletion/follow_up.py), and one destroyed before is not listed as kept.
                body |= await account_sections(
                    conn, erasure_id(request.workflow_id, request.first_run_id), request.account_id, body["complete"]
                )
            record = await append_receipt(
                conn,
                copies,
                await self._signer.current(conn),
                body,
                {
                    "key": key,
                    "kind": request.subject_kind,
                    "subject": request.subject_id,
                    "account": request.account_id,
                    "workflow_id": request.workflow_id,
                },
            )
        return await copied(copies, record)

    async def _body(self, conn: AsyncConnection, request: ReceiptInput) -> dict[str, Any]:
        check_started = datetime.now(UTC)
        # A run started without the API (an operator's `temporal workflow start`) has no request row.
        requested = (await conn.execute(_REQUEST, {"workflow_id": request.workflow_id})).first()
        requested_at, deletes_at, due = requested if requested is not None else (None, None, None)
        if request.subject_kind == ReceiptSubject.BOT:
            bot_ids = [request.subject_id]
            runs = [request.workflow_id]
        else:
            bot_runs = (await conn.execute(_BOT_RUNS, {"account": request.account_id})).all()
            bot_ids = [str(bot_id) for _, bot_id in bot_runs]
            runs = [workflow_id for workflow_id, _ in bot_runs]
        checks = await self._check(conn, request, bot_ids)
        check_ended = datetime.now(UTC)
        remaining: dict[str, int | None] = {
            check["service"]: check["found"] for check in checks if "service" in check and check["found"]
        }
        counted = {check["service"] for check in checks if "service" in check}
        services: dict[str, dict[str, int | None]] = {}
        phases: list[dict[str, Any]] = []
        if deletes_at is not None and request.subject_kind == ReceiptSubject.ACCOUNT:
            phases.append({"name": "grace period", "started_at": _time(requested_at), "ended_at": _time(deletes_at)})
        skipped = False
        for service, deleted, files, service_skipped, started, ended in await conn.execute(
            _PROGRESS, {"workflow_ids": runs}
        ):
            if service_skipped and service not in counted:
                # Left by an operator (skipped, or retired while down) without a count of its own: what it still
                # holds is unknown, and says so (null) rather than 0.
                remaining[service] = None
                checks.append({"name": f"rows and files of {service}", "expected": 0, "found": None, "passed": False})
                checks[-1]["service"] = service
            services[service] = {
                "rows_deleted": int(deleted),
                "files_deleted": int(files),
                "remaining": remaining.get(service, 0),
            }
            skipped = skipped or bool(service_skipped)
            phases.append({"name": f"delete {service}", "started_at": _time(started), "ended_at": _time(ended)})
        for service in remaining:
            services.setdefault(service, {"rows_deleted": 0, "files_deleted": 0, "remaining": remaining[service]})
        phases.append({"name": "independent check", "started_at": _time(check_started), "ended_at": _time(check_ended)})
        budget_changes = [
            # A service's override names it (a null rate: removed); a change of the shared budget names none.
            {"action": "budget", "at": _time(changed_at), "rows_per_second": rate}
            | ({"service": service} if service is not None else {})
            for rate, changed_at, service in await conn.execute(
                _BUDGET_CHANGES, {"since": requested_at or check_started}
            )
        ]
        legal_holds = [
            {"placed_at": _time(placed_at), "released_at": _time(released_at)}
            for placed_at, released_at in await conn.execute(
                _LEGAL_HOLDS, {"account": request.account_id, "since": requested_at or check_started}
            )
        ]
        registry = [{"service": s.name, "registered_at": s.registered_at} for s in request.registry]
        actions = [{k: v for k, v in asdict(action).items() if v is not None} for action in request.operator_actions]
        if request.subject_kind == ReceiptSubject.ACCOUNT:
            # An operator's message to the account reaches its bot deletions, whose receipts recorded it.
            actions += await _bot_actions(conn, request.account_id)
        body: dict[str, Any] = {
            "id": str(receipt_id(request)),
            "version": RECEIPT_VERSION,
            "subject": {"kind": request.subject_kind, "id": request.subject_id},
            "workflow_id": request.workflow_id,
            "first_run_id": request.first_run_id,
            "run_id": request.run_id,
            "requested_at": _time(requested_at),
            "issued_at": _time(check_ended),
            "services": services,
            "phases": phases,
            "checks": checks,
            "operator_actions": sorted(actions + budget_changes, key=lambda action: str(action["at"])),
            "legal_holds": legal_holds,
            "due_at": _time(due),
            "overdue": due is not None and check_ended > due,
            "held_seconds": int((await held_for(conn, request.workflow_id)).total_seconds()),
            "registry": registry,
            "complete": reached_all(registry, skipped, checks),
            "remaining": remaining,
        }
        if request.subject_kind == ReceiptSubject.ACCOUNT:
            body["bots_deleted"] = len(bot_ids)
        return body

    async def _check(self, conn: AsyncConnection, request: ReceiptInput, bot_ids: list[str]) -> list[dict[str, Any]]:
        """Each service's own count of what it holds, and the gateway's count of its own rows; not taken from the
        services' deletion answers."""
        checks: list[dict[str, Any]] = []
        # Only a service can count its own store: its VerifySubjectErased, just before (a bot), or what the
        # account's bots' receipts found (an account, whose bots were each checked so as they finished).
        verified = (
            {v.service: v.remaining_rows + v.remaining_files for v in request.verified}
            if request.subject_kind == ReceiptSubject.BOT
            else await _bots_verified(conn, request.account_id)
        )
        for service, found in sorted(verified.items()):
            checks.append(_check(f"rows and files of {service}", found, service=service))
        if request.subject_kind == ReceiptSubject.BOT:
            bot_rows = (
                await conn.execute(text("SELECT count(*) FROM bots WHERE id = :bot"), {"bot": request.subject_id})
            ).scalar_one()
            checks.append(_check(BOT_ROW_CHECK, int(bot_rows)))
        else:
            for name, query in (
                ("bots of the account", "SELECT count(*) FROM bots WHERE account_id = :account"),
                ("sites of the account", "SELECT count(*) FROM sites WHERE account_id = :account"),
                ("API keys of the account", "SELECT count(*) FROM api_keys WHERE account_id = :account"),
                (ACCOUNT_ROW_CHECK, "SELECT count(*) FROM accounts WHERE id = :account"),
            ):
                found = (await conn.execute(text(query), {"account": request.account_id})).scalar_one()
                checks.append(_check(name, int(found)))
        return checks


async def append_receipt(
    conn: AsyncConnection, copies: ReceiptCopies, signing: ReceiptKey, body: dict[str, Any], row: dict[str, str]
) -> ReceiptRecord:
    """Chain `body` after the head, sign it and insert its row (`row`: the columns besides the body's), inside
    `conn`'s transaction, which holds CHAIN_LOCK. Every receipt goes through here, then through `copied` once
    committed: ChainBehindCopies if the database was restored behind its copies."""
    body["key_id"] = signing.key_id
    body["previous_sha256"] = (await conn.execute(_CHAIN_HEAD)).scalar_one_or_none()
    await copies.raise_if_followed(body["previous_sha256"])
    signed = sign(body, signing.private)
    inserted = await conn.execute(
        _INSERT,
        row | {"id": body["id"], "canonical": signed.canonical, "sha256": signed.sha256, "signature": signed.signature},
    )
    return ReceiptRecord(*inserted.one())


async def copied(copies: ReceiptCopies, record: ReceiptRecord) -> str:
    """Once committed, never before: a copy is never of a receipt the database does not hold. Returns its id."""
    await copies.put(record)
    return record.id


async def _bot_actions(conn: AsyncConnection, account_id: str) -> list[dict[str, Any]]:
    actions = []
    for bot_id, canonical in await conn.execute(_BOT_RECEIPTS, {"account": account_id}):
        for action in json.loads(canonical)["operator_actions"]:
            if action["action"] != "budget":  # the account's receipt lists each budget change once, itself
                actions.append({**action, "bot": str(bot_id)})
    return actions


def _check(name: str, found: int, *, service: str | None = None) -> dict[str, Any]:
    check: dict[str, Any] = {"name": name, "expected": 0, "found": found, "passed": found == 0}
    if service is not None:
        check["service"] = service
    return check


async def _bots_verified(conn: AsyncConnection, account_id: str) -> dict[str, int]:
    """What every service's own count found left of the account's bots, as their receipts recorded it."""
    found: dict[str, int] = {}
    for _, canonical in await conn.execute(_BOT_RECEIPTS, {"account": account_id}):
        for check in json.loads(canonical)["checks"]:
            if "service" in check:
                found[check["service"]] = found.get(check["service"], 0) + int(check["found"])
    return found
