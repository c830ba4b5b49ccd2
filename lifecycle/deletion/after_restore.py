"""Re-applying deletions after a restore: `python -m lifecycle.deletion.reapply` (reapply.py) runs this.

1. Verify. The receipts in PostgreSQL and their copies in the object store (lifecycle/deletion/receipt_copies.py)
   are merged by id, and every one's bytes, SHA-256, signature and link is checked (receipt_chain.py). A receipt
   whose database row and copy differ, a fork, a gap, or a database whose receipts are not the beginning of the
   chain in order, refuses everything: BrokenChain, nothing changed.
2. Put the chain back. Receipts the database lacks (a restore rolled them back) are inserted after its last
   one, in chain order, so the next receipt chains after the true head; receipts without a copy get one.
3. Re-apply. Every subject a receipt records as gone (its account or bot row) whose data is present again is
   deleted again, by the ordinary workflow with no grace period, under an id derived from that receipt
   (workflow_types.reapplied_deletion_id): a second re-apply joins the run still open, or finds the data gone and
   starts nothing. Present again means its row is back, or, for a bot whose row is not, that a registered service
   holds something of it again (its own database restored alone): asked as a preview asks, with each service's
   VerifySubjectErased on its own queue (DeletionPreview, SERVICES_AT_ONCE bots at a time). An account's re-apply
   takes the bots whose rows came back with it; any other bot is re-applied on its own.
   As the API does, the account is signed out first (every key revoked) and the deletion is recorded in
   deletion_requests (no address: nobody is emailed twice); its run ends with a new receipt, chained after the
   old ones.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import timedelta

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from lifecycle.deletion.contracts import DeletionPreviewInput, DeletionPreviewResult, ReceiptSubject
from lifecycle.deletion.receipt_chain import BrokenChain, public_keys, verify_chain, verify_receipt
from lifecycle.deletion.receipt_copies import RECORD_COLUMNS, ReceiptCopies, ReceiptRecord, UnreadableCopy, chain_id
from lifecycle.deletion.receipt_keys import CHAIN_LOCK
from lifecycle.deletion.receipts import ACCOUNT_ROW_CHECK, BOT_ROW_CHECK
from lifecycle.deletion.registry import active_services
from lifecycle.deletion.starts import row_check, start_account_deletion, start_bot_deletion
from lifecycle.deletion.workflow_types import account_deletion_options, bot_deletion_options, deletion_preview_options
from lifecycle.object_store import ObjectStore
from lifecycle.settings import Settings
from lifecycle.statuses import DeletionState

_RECORDS = text(f"SELECT {RECORD_COLUMNS} FROM deletion_receipts ORDER BY seq")
_KEYS = text("SELECT key_id, public_key FROM receipt_signing_keys")
_PUT_BACK = text(
    "INSERT INTO deletion_receipts (id, receipt_key, subject_kind, subject_id, account_id, workflow_id, canonical,"
    " sha256, signature, created_at) VALUES (:id, :receipt_key, :subject_kind, :subject_id, :account_id,"
    " :workflow_id, :canonical, :sha256, :signature, :created_at)"
)
_PRESENT = {
    ReceiptSubject.ACCOUNT: text("SELECT EXISTS (SELECT FROM accounts WHERE id = :id)"),
    ReceiptSubject.BOT: text("SELECT account_id::text FROM bots WHERE id = :id"),
}
# Bots whose rows stay gone, asked about at once: each is a DeletionPreview run calling every service.
SERVICES_AT_ONCE = 8
# A preview's services answer within 25 s or are reported unknown (SERVICE_PREVIEW); past this, no worker ran it.
PREVIEW_TIMEOUT = timedelta(seconds=60)
_ROW_CHECK = {ReceiptSubject.ACCOUNT: ACCOUNT_ROW_CHECK, ReceiptSubject.BOT: BOT_ROW_CHECK}
# Signed out and marked as the API does (api/deletion/requests.py), and recorded under the new run's id.
_SIGN_OUT = text("UPDATE api_keys SET revoked_at = now() WHERE account_id = :account AND revoked_at IS NULL")
_MARK = {
    ReceiptSubject.ACCOUNT: text(
        "UPDATE accounts SET deletion_requested_at = coalesce(deletion_requested_at, now()) WHERE id = :id"
    ),
    ReceiptSubject.BOT: text(
        "UPDATE bots SET deletion_requested_at = coalesce(deletion_requested_at, now()) WHERE id = :id"
    ),
}
_RECORD = text(
    "INSERT INTO deletion_requests (workflow_id, kind, account_id, bot_id, status, due_at)"
    " VALUES (:workflow_id, :kind, :account, :bot, :status, now() + :due_within) ON CONFLICT (workflow_id) DO NOTHING"
)


@dataclass(frozen=True)
class Deleted:
    """A subject a receipt records as gone: the latest such receipt."""

    kind: ReceiptSubject
    subject_id: str
    account_id: str
    receipt_id: str


@dataclass(frozen=True)
class Back:
    """A deleted subject whose data is present again, and where: its row, or the services that hold it."""

    gone: Deleted
    where: str
    row: bool


@dataclass
class Outcome:
    receipts: int = 0
    head: str | None = None
    put_back: int = 0
    copied: int = 0
    deleted: int = 0
    present: list[Back] = field(default_factory=list)
    # Bots some service could not be asked about (it did not answer in time): run the re-apply again.
    unknown: list[str] = field(default_factory=list)
    started: list[str] = field(default_factory=list)
    running: list[str] = field(default_factory=list)


def _recorded_gone(record: ReceiptRecord) -> Deleted | None:
    body = record.body
    subject = body.get("subject")
    if not isinstance(subject, dict) or subject.get("kind") not in _ROW_CHECK:
        return None
    kind = ReceiptSubject(subject["kind"])
    checks = body.get("checks") or []
    if not any(check.get("name") == _ROW_CHECK[kind] and check.get("passed") is True for check in checks):
        return None
    return Deleted(kind, str(subject["id"]), record.account_id, record.id)


async def _verified_chain(conn: AsyncConnection, copies: ReceiptCopies) -> tuple[list[ReceiptRecord], int, set[str]]:
    """The whole chain in order, how many of its first receipts the database holds, and the keys of the copies;
    BrokenChain if it does not verify."""
    in_database = [ReceiptRecord(*row) for row in await conn.execute(_RECORDS)]
    keys = public_keys({key_id: pem for key_id, pem in await conn.execute(_KEYS)})
    try:
        copied = await copies.read_all()
    except UnreadableCopy as err:
        raise BrokenChain(str(err)) from err
    # Each one on its own first, so a damaged receipt is named for what is wrong with it.
    for record in [*in_database, *copied.values()]:
        verify_receipt(record, keys)
    merged = {record.id: record for record in in_database}
    for key, copy in copied.items():
        if key != copies.key_of(copy):
            raise BrokenChain(f"the copy {key} holds receipt {copy.id}, which follows another receipt")
        held = merged.setdefault(copy.id, copy)
        if (held.canonical, held.sha256, held.signature) != (copy.canonical, copy.sha256, copy.signature):
            raise BrokenChain(f"receipt {copy.id} differs between PostgreSQL and its copy {key}")
    chain = verify_chain(merged.values(), keys)
    if [record.id for record in in_database] != [record.id for record in chain[: len(in_database)]]:
        raise BrokenChain(
            "the receipts in PostgreSQL are not the beginning of the chain in order: a receipt is missing"
            " between others, or one was added after a restore before this re-apply ran"
        )
    return chain, len(in_database), set(copied)


async def restore_chain(engine: AsyncEngine, store: ObjectStore, outcome: Outcome) -> list[ReceiptRecord]:
    """Steps 1 and 2: the verified chain, with the database and the copies both holding all of it."""
    async with engine.begin() as conn:
        # Held until the missing receipts are in: no receipt is signed meanwhile (they take the same lock).
        await conn.execute(CHAIN_LOCK)
        copies = ReceiptCopies(store, await chain_id(conn))
        chain, held, copied = await _verified_chain(conn, copies)
        missing = chain[held:]
        for record in missing:
            await conn.execute(_PUT_BACK, asdict(record))
    outcome.receipts, outcome.put_back = len(chain), len(missing)
    outcome.head = chain[-1].sha256 if chain else None
    for record in chain:
        if copies.key_of(record) not in copied:
            await copies.put(record)
            outcome.copied += 1
    return chain


async def _present_again(
    engine: AsyncEngine, client: Client, settings: Settings, chain: list[ReceiptRecord], outcome: Outcome
) -> list[Back]:
    """The subjects recorded as gone whose data is present again (step 3)."""
    latest: dict[tuple[ReceiptSubject, str], Deleted] = {}
    for record in chain:
        if (gone := _recorded_gone(record)) is not None:
            latest[(gone.kind, gone.subject_id)] = gone
    outcome.deleted = len(latest)
    rows_back: list[Deleted] = []
    rows_gone: list[Deleted] = []
    async with engine.connect() as conn:
        for gone in latest.values():
            found = (await conn.execute(_PRESENT[gone.kind], {"id": gone.subject_id})).scalar_one_or_none()
            (rows_back if found else rows_gone).append(gone)
        services = await active_services(conn)
    accounts = {gone.subject_id for gone in rows_back if gone.kind == ReceiptSubject.ACCOUNT}
    back = [
        Back(gone, "its row", row=True)
        for gone in rows_back
        if gone.kind == ReceiptSubject.ACCOUNT or gone.account_id not in accounts
    ]
    bots = [gone for gone in rows_gone if gone.kind == ReceiptSubject.BOT]
    if not services or not bots:
        return back
    limit = asyncio.Semaphore(SERVICES_AT_ONCE)

    async def held(gone: Deleted) -> DeletionPreviewResult:
        async with limit:
            handle = await deletion_preview_options(gone.kind, gone.subject_id, gone.account_id).start(
                client,
                DeletionPreviewInput(services=services, bot_ids=[gone.subject_id]),
                task_queue=settings.task_queue,
                result_type=DeletionPreviewResult,
                execution_timeout=PREVIEW_TIMEOUT,
            )
            return await handle.result()

    for gone, answer in zip(bots, await asyncio.gather(*(held(gone) for gone in bots)), strict=True):
        holding = sorted(name for name, h in answer.services.items() if h is not None and (h.rows or h.files))
        if any(h is None for h in answer.services.values()):
            outcome.unknown.append(gone.subject_id)
        if holding:
            back.append(Back(gone, ", ".join(holding), row=False))
    return back


def _workflow_id(gone: Deleted) -> str:
    if gone.kind == ReceiptSubject.ACCOUNT:
        return account_deletion_options(gone.account_id, reapplies=gone.receipt_id).id
    return bot_deletion_options(gone.subject_id, gone.account_id, reapplies=gone.receipt_id).id


async def _is_running(client: Client, workflow_id: str) -> bool:
    try:
        description = await client.get_workflow_handle(workflow_id).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return False
        raise
    return description.status == WorkflowExecutionStatus.RUNNING


async def _delete_again(engine: AsyncEngine, client: Client, settings: Settings, back: Back) -> bool:
    """Sign the account out, mark and record, then start, as the API does. A crash between the record and the start
    is recovered by running the re-apply again: the reconciler drives on the ordinary ids only."""
    gone = back.gone
    workflow_id = _workflow_id(gone)
    async with engine.begin() as conn:
        if gone.kind == ReceiptSubject.ACCOUNT:
            await conn.execute(_SIGN_OUT, {"account": gone.account_id})
        await conn.execute(_MARK[gone.kind], {"id": gone.subject_id})
        await conn.execute(
            _RECORD,
            {
                "workflow_id": workflow_id,
                "kind": gone.kind.value,
                "account": gone.account_id,
                "bot": gone.subject_id if gone.kind == ReceiptSubject.BOT else None,
                "status": DeletionState.ACCEPTED.value,
                "due_within": settings.erasure_due_within,
            },
        )
    if gone.kind == ReceiptSubject.ACCOUNT:
        return await start_account_deletion(
            client,
            settings.task_queue,
            account_id=gone.account_id,
            site_task_queue=settings.site_task_queue,
            row_exists=row_check(engine, "accounts", gone.account_id),
            reapplies=gone.receipt_id,
            registry_settle_seconds=settings.deletion_registry_settle_seconds,
        )
    return await start_bot_deletion(
        client,
        settings.task_queue,
        bot_id=gone.subject_id,
        account_id=gone.account_id,
        # Only a service's data came back: it was counted just now.
        row_exists=row_check(engine, "bots", gone.subject_id) if back.row else _held,
        reapplies=gone.receipt_id,
        registry_settle_seconds=settings.deletion_registry_settle_seconds,
    )


async def _held() -> bool:
    return True


async def reapply(
    settings: Settings, engine: AsyncEngine, store: ObjectStore, client: Client, say: Callable[[str], None]
) -> Outcome:
    """Steps 1 to 3, saying what it finds and does; BrokenChain (nothing changed) if the chain does not verify."""
    outcome = Outcome()
    chain = await restore_chain(engine, store, outcome)
    say(f"verified {outcome.receipts} receipts (hash, signature, link); head {outcome.head or 'none'}")
    if outcome.put_back:
        say(f"put back {outcome.put_back} receipts PostgreSQL had lost, from their copies in the object store")
    if outcome.copied:
        say(f"copied {outcome.copied} receipts to the object store")
    outcome.present = await _present_again(engine, client, settings, chain, outcome)
    say(f"{outcome.deleted} deleted subjects on the receipts; {len(outcome.present)} present again")
    for back in outcome.present:
        gone = back.gone
        workflow_id = _workflow_id(gone)
        what = f"{gone.kind} {gone.subject_id} (deleted by receipt {gone.receipt_id})"
        if await _is_running(client, workflow_id):
            outcome.running.append(workflow_id)
            say(f"{what}: already being deleted again by {workflow_id}")
        elif await _delete_again(engine, client, settings, back):
            outcome.started.append(workflow_id)
            say(f"{what}: present again ({back.where}); started {workflow_id}")
        else:
            say(f"{what}: gone again meanwhile; nothing started")
    for bot_id in outcome.unknown:
        say(f"bot {bot_id}: a service did not answer whether it holds it again; run the re-apply again later")
    say(f"started {len(outcome.started)} deletions")
    return outcome
