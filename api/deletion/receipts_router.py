"""Deletion receipts: signed, chained records that outlive what they describe, and the key that verifies them."""

from __future__ import annotations

import uuid

import orjson
from fastapi import APIRouter
from sqlalchemy import select

from api.deletion.receipts_schemas import PublicKeyOut, SignedReceiptOut
from api.dependencies import PUBLIC, AdminDep, CallerDep, SessionDep, SettingsDep
from api.problems import ProblemError, problem_responses
from lifecycle.db.models import DeletionReceipt
from lifecycle.deletion.contracts import ReceiptSubject
from lifecycle.deletion.receipts import public_key_pem, signing_key

router = APIRouter(tags=["deletions"])


@router.get(
    "/deletion-receipts/public-key",
    response_model=PublicKeyOut,
    summary="The Ed25519 public key that verifies deletion receipts (no credentials needed)",
    # Anyone holding a receipt must be able to verify it, long after the account that it names is gone.
    openapi_extra=PUBLIC,
)
async def get_public_key(settings: SettingsDep) -> PublicKeyOut:
    return PublicKeyOut(public_key=public_key_pem(signing_key(settings)))


@router.get(
    "/bots/{bot_id}/deletion/receipt",
    response_model=SignedReceiptOut,
    summary="The signed receipt of a bot's latest finished deletion (the account's key)",
    responses=problem_responses(401, 404),
)
async def get_bot_receipt(bot_id: uuid.UUID, caller: CallerDep, session: SessionDep) -> SignedReceiptOut:
    receipt = await _latest(session, ReceiptSubject.BOT, bot_id)
    if receipt is None or receipt.account_id != caller.account_id:
        raise ProblemError(404, "No finished deletion of this bot has a receipt.")
    return _signed(receipt)


@router.get(
    "/accounts/{account_id}/deletion/receipt",
    response_model=SignedReceiptOut,
    summary="Admin: the signed receipt of an account's latest finished deletion, kept after the account is gone",
    responses=problem_responses(401, 403, 404),
)
async def get_account_receipt(account_id: uuid.UUID, _admin: AdminDep, session: SessionDep) -> SignedReceiptOut:
    receipt = await _latest(session, ReceiptSubject.ACCOUNT, account_id)
    if receipt is None:
        raise ProblemError(404, "No finished deletion of this account has a receipt.")
    return _signed(receipt)


async def _latest(session: SessionDep, kind: ReceiptSubject, subject_id: uuid.UUID) -> DeletionReceipt | None:
    return (
        await session.execute(
            select(DeletionReceipt)
            .where(DeletionReceipt.subject_kind == kind, DeletionReceipt.subject_id == subject_id)
            .order_by(DeletionReceipt.seq.desc())
            .limit(1)
        )
    ).scalar_one_or_none()


def _signed(receipt: DeletionReceipt) -> SignedReceiptOut:
    return SignedReceiptOut(receipt=orjson.loads(receipt.canonical), sha256=receipt.sha256, signature=receipt.signature)
