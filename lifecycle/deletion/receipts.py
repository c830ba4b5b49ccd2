"""Deletion receipts: RFC 8785 canonical JSON, its SHA-256, and an Ed25519 signature over the same bytes.

Anyone can verify a receipt without this code: canonicalize `receipt` (RFC 8785), hash it, and check the
signature with the public key from GET /deletion-receipts/public-key (docs/deletion-budget.md shows openssl and
Python). Receipts hold ids, counts, times and booleans only: no personal data, and no floating-point numbers, so
every implementation of RFC 8785 produces the same bytes.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import rfc8785
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from lifecycle.settings import RECEIPT_SIGNING_KEY_FILE, Settings


@dataclass(frozen=True)
class SignedReceipt:
    canonical: bytes
    sha256: str
    signature: str


def signing_key(settings: Settings) -> Ed25519PrivateKey:
    """The key from RECEIPT_SIGNING_KEY, else from the data directory's key file, made on first use.

    Any secret string will do: the Ed25519 seed is its SHA-256, so a value from `make deploy-env` (random hex)
    works as it is, and the API and every worker derive the same key from the same secret.
    """
    secret = settings.receipt_signing_key or _secret_from_file(settings.data_dir / RECEIPT_SIGNING_KEY_FILE)
    return Ed25519PrivateKey.from_private_bytes(hashlib.sha256(secret.encode()).digest())


def _secret_from_file(path: Path) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    # O_EXCL: when the API and a worker start together, one writes the secret and the other reads it.
    with contextlib.suppress(FileExistsError):
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as key_file:
            key_file.write(secrets.token_hex(32) + "\n")
    return path.read_text().strip()


def public_key_pem(key: Ed25519PrivateKey) -> str:
    return (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )


def canonical_bytes(receipt: dict[str, Any]) -> bytes:
    return rfc8785.dumps(receipt)


def sign(receipt: dict[str, Any], key: Ed25519PrivateKey) -> SignedReceipt:
    canonical = canonical_bytes(receipt)
    return SignedReceipt(
        canonical=canonical,
        sha256=hashlib.sha256(canonical).hexdigest(),
        signature=base64.b64encode(key.sign(canonical)).decode(),
    )
