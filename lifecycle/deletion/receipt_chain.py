"""Verifying a chain of deletion receipts as any verifier would: each receipt's bytes, hash, signature and link.

Nothing here reads a receipt's fields beyond `previous_sha256` and `key_id`: the canonical bytes must be the
RFC 8785 form of the body they hold, hash to `sha256`, and carry an Ed25519 signature by a published key; the
links must make one line from the first receipt (no `previous_sha256`) to the head, with no fork, gap or loop.
Any other field (the processors', the legal holds', those of a later format) is signed like the rest and needs no
change here.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Iterable, Mapping

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import load_pem_public_key

from lifecycle.deletion.receipt_copies import ReceiptRecord
from lifecycle.deletion.receipts import canonical_bytes


class BrokenChain(Exception):
    """The receipts do not verify: the message names the receipt and what is wrong with it."""


def public_keys(published: Mapping[str, str]) -> dict[str, Ed25519PublicKey]:
    """`receipt_signing_keys` (key id: PEM) as keys."""
    keys = {}
    for key_id, pem in published.items():
        key = load_pem_public_key(pem.encode())
        if not isinstance(key, Ed25519PublicKey):
            raise BrokenChain(f"published key {key_id} is not an Ed25519 key")
        keys[key_id] = key
    return keys


def verify_receipt(record: ReceiptRecord, keys: Mapping[str, Ed25519PublicKey]) -> None:
    """BrokenChain unless the record's bytes are canonical, hash to its sha256 and are signed by its key."""
    name = f"receipt {record.id}"
    try:
        body = json.loads(record.canonical)
    except ValueError as err:
        raise BrokenChain(f"{name}: its bytes are not JSON ({err})") from err
    if not isinstance(body, dict) or canonical_bytes(body) != record.canonical:
        raise BrokenChain(f"{name}: its bytes are not the RFC 8785 canonical form of a receipt")
    if str(body.get("id")) != record.id:
        raise BrokenChain(f"{name}: its body names receipt {body.get('id')}")
    if hashlib.sha256(record.canonical).hexdigest() != record.sha256:
        raise BrokenChain(f"{name}: its SHA-256 does not match its bytes")
    # Receipts of format 1 name no key: the first key signed them (lifecycle/deletion/receipt_keys.py).
    if "key_id" not in body:
        candidates = list(keys.values())
    else:
        candidates = [keys[body["key_id"]]] if body["key_id"] in keys else []
    if not candidates:
        raise BrokenChain(f"{name}: signed by key {body.get('key_id')}, which is not published")
    try:
        signature = base64.b64decode(record.signature, validate=True)
    except binascii.Error as err:
        raise BrokenChain(f"{name}: its signature is not base64") from err
    for key in candidates:
        try:
            key.verify(signature, record.canonical)
            return
        except InvalidSignature:
            continue
    raise BrokenChain(f"{name}: its signature does not verify")


def verify_chain(records: Iterable[ReceiptRecord], keys: Mapping[str, Ed25519PublicKey]) -> list[ReceiptRecord]:
    """The receipts in chain order, first to head, once every one and every link verified; else BrokenChain."""
    after: dict[str | None, ReceiptRecord] = {}
    for record in records:
        verify_receipt(record, keys)
        previous = record.previous_sha256
        if previous in after:
            raise BrokenChain(
                f"receipts {after[previous].id} and {record.id} both follow "
                f"{previous or 'nothing (two first receipts)'}: the chain forks"
            )
        after[previous] = record
    ordered: list[ReceiptRecord] = []
    link: str | None = None
    while link in after:
        ordered.append(after.pop(link))
        link = ordered[-1].sha256
    if after:
        stray = next(iter(after.values()))
        raise BrokenChain(
            f"receipt {stray.id} follows {stray.previous_sha256}, which no receipt of the chain has: the chain is"
            " broken (a receipt removed or altered)"
        )
    return ordered
