"""Deletion receipts: signed, chained records that outlive what they describe, and the keys that verify them."""

from __future__ import annotations

import uuid

import orjson
from fastapi import APIRouter
from sqlalchemy import select

from api.deletion.receipts_schemas import PublicKeyOut, PublicKeysOut, PublishedKeyOut, SignedReceiptOut
from api.dependencies import PUBLIC, AdminDep, CallerDep, SessionDep
from api.problems import ProblemError, problem_responses
from lifecycle.db.models import DeletionReceipt, ReceiptSigningKey
from lifecycle.deletion.contracts import ReceiptSubject

router = APIRouter(tags=["deletions"])


@router.get(
    "/deletion-receipts/public-key",
    response_model=PublicKeyOut,
    summary="The Ed25519 public key that verifies the deletion receipts signed now (no credentials needed)",
    responses=problem_responses(503),
    # Anyone holding a receipt must be able to verify it, long after the account that it names is gone.
    openapi_extra=PUBLIC,
)
async def get_public_key(session: SessionDep) -> PublicKeyOut:
    current = (
        await session.execute(select(ReceiptSigningKey).where(ReceiptSigningKey.valid_until.is_(None)))
    ).scalar_one_or_none()
    if current is None:
        raise ProblemError(503, "No receipt signing key is published yet: a worker publishes it when it starts.")
    return PublicKeyOut(public_key=current.public_key, key_id=current.key_id)


@router.get(
    "/deletion-receipts/public-keys",
    response_model=PublicKeysOut,
    summary="Every Ed25519 public key that signed deletion receipts, with its validity (no credentials needed)",
    # A receipt names its key by `key_id`; keys retired by a rotation stay here, so every receipt stays verifiable.
    openapi_extra=PUBLIC,
)
async def get_public_keys(session: SessionDep) -> PublicKeysOut:
    keys = (await session.execute(select(ReceiptSigningKey).order_by(ReceiptSigningKey.valid_from))).scalars()
    return PublicKeysOut(
        keys=[
            PublishedKeyOut(
                key_id=key.key_id, public_key=key.public_key, valid_from=key.valid_from, valid_until=key.valid_until
            )
            for key in keys
        ]
    )


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
