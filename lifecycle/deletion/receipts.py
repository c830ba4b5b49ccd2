"""Deletion receipts: RFC 8785 canonical JSON, its SHA-256, and an Ed25519 signature over the same bytes.

Anyone can verify a receipt without this code: canonicalize `receipt` (RFC 8785), hash it, and check the
signature with the public key its `key_id` names in GET /deletion-receipts/public-keys (docs/deletion-budget.md
shows openssl and Python). Receipts hold ids, counts, times and booleans only: no personal data, and no
floating-point numbers, so every implementation of RFC 8785 produces the same bytes. The keys are in
lifecycle/deletion/receipt_keys.py.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from typing import Any

import rfc8785
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

# The receipt's check that the subject's own row is gone: what the re-apply after a restore looks for
# (lifecycle/deletion/after_restore.py).
BOT_ROW_CHECK = "bot row"
ACCOUNT_ROW_CHECK = "account row"


@dataclass(frozen=True)
class SignedReceipt:
    canonical: bytes
    sha256: str
    signature: str


def canonical_bytes(receipt: dict[str, Any]) -> bytes:
    return rfc8785.dumps(receipt)


def sign(receipt: dict[str, Any], key: Ed25519PrivateKey) -> SignedReceipt:
    canonical = canonical_bytes(receipt)
    return SignedReceipt(
        canonical=canonical,
        sha256=hashlib.sha256(canonical).hexdigest(),
        signature=base64.b64encode(key.sign(canonical)).decode(),
    )
