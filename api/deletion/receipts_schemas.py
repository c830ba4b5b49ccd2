from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field


class SignedReceiptOut(BaseModel):
    receipt: dict[str, Any] = Field(
        description="What was deleted, checked and done, with ids, counts and times only. Its RFC 8785 canonical "
        "form is what `sha256` hashes and `signature` signs; `previous_sha256` chains it to the receipt before it."
    )
    sha256: str = Field(description="SHA-256 of the receipt's RFC 8785 canonical bytes, in hex.")
    signature: str = Field(description="Ed25519 signature over the same bytes, base64 (standard alphabet).")


class PublicKeyOut(BaseModel):
    public_key: str = Field(
        description="The current Ed25519 public key, which verifies receipts signed now, PEM (SubjectPublicKeyInfo)."
    )
    key_id: str = Field(description="Its id, which each receipt it signed names in `key_id`.")


class PublishedKeyOut(BaseModel):
    key_id: str = Field(
        description="The first 32 hex digits of the SHA-256 of the raw 32-byte public key; receipts name it in "
        "`key_id`. A receipt without `key_id` (version 1) was signed by the earliest key."
    )
    public_key: str = Field(description="The Ed25519 public key, PEM (SubjectPublicKeyInfo).")
    valid_from: datetime = Field(description="When it began signing receipts.")
    valid_until: datetime | None = Field(description="When a rotation retired it; null for the current key.")


class PublicKeysOut(BaseModel):
    keys: list[PublishedKeyOut] = Field(
        description="Every key that ever signed receipts, oldest first; a retired key keeps its receipts verifiable."
    )
