from __future__ import annotations

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
    public_key: str = Field(description="The Ed25519 public key that verifies receipts, PEM (SubjectPublicKeyInfo).")
