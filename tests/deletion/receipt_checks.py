"""What the docs tell a receipt's verifier to do, with nothing of this project's code: canonicalize (RFC 8785),
hash, check the Ed25519 signature. Shared by the receipts' tests and the receipt keys' tests."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import rfc8785
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey


def verifies(signed: dict[str, Any], key: Ed25519PublicKey) -> bool:
    canonical = rfc8785.dumps(signed["receipt"])
    if hashlib.sha256(canonical).hexdigest() != signed["sha256"]:
        return False
    try:
        key.verify(base64.b64decode(signed["signature"]), canonical)
    except InvalidSignature:
        return False
    return True
