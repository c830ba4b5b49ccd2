"""The deletion receipts' Ed25519 signing keys: held by the workers only, published in PostgreSQL, rotated.

A key comes from a secret (its Ed25519 seed is the secret's SHA-256): RECEIPT_SIGNING_KEY, else the key file
DATA_DIR/receipt_signing_key, made on a worker's first start. Its id is a fingerprint of its public key. Every
key that ever signed stays in `receipt_signing_keys` with its validity (`valid_until` null for the current one),
so the API serves them all and a rotation leaves older receipts verifiable.

    python -m lifecycle.deletion.receipt_keys rotate

makes a new key (in the key file, or from RECEIPT_SIGNING_KEY if the command's environment sets it), publishes
it and ends the current key's validity. Workers reading the key file take the new key at their next receipt;
workers given RECEIPT_SIGNING_KEY need the new value and a restart (docs/operations.md).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import secrets
import sys
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from lifecycle.audit import append_audit_event, command_actor, command_request_id
from lifecycle.db.engine import make_engine
from lifecycle.settings import MIN_SECRET_BYTES, RECEIPT_SIGNING_KEY_FILE, Settings, get_settings

# Taken by a rotation and by every receipt's signing, so a receipt is signed by the key current when it is.
CHAIN_LOCK = text("SELECT pg_advisory_xact_lock(hashtext('deletion_receipts'))")
_CURRENT = text("SELECT key_id FROM receipt_signing_keys WHERE valid_until IS NULL")
_FOUND = text("SELECT valid_until FROM receipt_signing_keys WHERE key_id = :key_id")
_VALID_FROM = text("SELECT valid_from FROM receipt_signing_keys WHERE key_id = :key_id")
_RETIRE = text("UPDATE receipt_signing_keys SET valid_until = now() WHERE valid_until IS NULL RETURNING key_id")
# The first key's validity starts with the first receipt, if receipts predate key ids (they were signed by it).
_PUBLISH_FIRST = text(
    "INSERT INTO receipt_signing_keys (key_id, public_key, valid_from)"
    " VALUES (:key_id, :public_key, coalesce((SELECT min(created_at) FROM deletion_receipts), now()))"
)
_PUBLISH = text("INSERT INTO receipt_signing_keys (key_id, public_key) VALUES (:key_id, :public_key)")
_KEY_ID_HEX_DIGITS = 32


class ReceiptKeyError(Exception):
    """A receipt signing key this worker must not sign with: the message says why and what to do."""


class ReceiptKeyNotCurrent(ReceiptKeyError):
    """Another key became current: the receipt waits (retried) for a worker that holds it."""


@dataclass(frozen=True)
class ReceiptKey:
    private: Ed25519PrivateKey
    # The first 32 hex digits of the SHA-256 of the raw 32-byte public key: what a receipt names its key by.
    key_id: str
    public_pem: str

    @classmethod
    def from_secret(cls, secret: str) -> ReceiptKey:
        private = Ed25519PrivateKey.from_private_bytes(hashlib.sha256(secret.encode()).digest())
        public = private.public_key()
        raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        pem = public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        return cls(private, hashlib.sha256(raw).hexdigest()[:_KEY_ID_HEX_DIGITS], pem.decode())


def key_file(settings: Settings) -> Path:
    return settings.data_dir / RECEIPT_SIGNING_KEY_FILE


def _staged_file(settings: Settings) -> Path:
    """A rotation's new key until it is published: a rotation run again after a crash finishes with it."""
    return key_file(settings).with_name(RECEIPT_SIGNING_KEY_FILE + ".next")


def load_signing_key(settings: Settings) -> ReceiptKey:
    """RECEIPT_SIGNING_KEY's key, else the key file's, made if there is none; ReceiptKeyError if it is unusable.

    The settings refuse a short RECEIPT_SIGNING_KEY. A key file that is empty or short (a crash or a full disk
    before it was written atomically) is refused here: its key would be the SHA-256 of next to nothing.
    """
    if settings.receipt_signing_key:
        return ReceiptKey.from_secret(settings.receipt_signing_key)
    path = key_file(settings)
    if not path.exists():
        write_private_file(path, secrets.token_hex(32) + "\n", replace=False)
    return ReceiptKey.from_secret(_read_secret(path))


def _read_secret(path: Path) -> str:
    secret = path.read_text().strip()
    if len(secret.encode()) < MIN_SECRET_BYTES:
        held = f"{len(secret.encode())} bytes" if secret else "nothing"
        raise ReceiptKeyError(
            f"the receipt signing key file {path} holds {held}; a key needs at least {MIN_SECRET_BYTES} bytes."
            " Restore it from a backup, or make and publish a new key with `python -m lifecycle.deletion.receipt_keys"
            " rotate` (receipts already signed stay verifiable with the published public keys)."
        )
    return secret


def write_private_file(path: Path, content: str, *, replace: bool) -> bool:
    """Give `path` the content all at once, readable by its owner only: no reader ever sees part of it.

    Written and fsynced under a temporary name, then linked into place (replace=False: the first writer wins;
    False if another was first) or renamed over what is there (replace=True); then the directory is fsynced.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    written = True
    try:
        with os.fdopen(descriptor, "w") as handle:
            handle.write(content)
            handle.flush()
            os.fsync(handle.fileno())
        if replace:
            os.replace(temporary, path)
        else:
            try:
                os.link(temporary, path)
            except FileExistsError:
                written = False
    finally:
        temporary.unlink(missing_ok=True)
    _fsync_directory(path.parent)
    return written


def _fsync_directory(directory: Path) -> None:
    """Make a link or a rename in `directory` durable."""
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


async def publish_at_start(engine: AsyncEngine, key: ReceiptKey) -> None:
    """Publish the worker's key as the first one, or check it is the current one; idempotent.

    A worker never makes its key current over another's: a retired key, or one that no rotation published,
    stops it here (ReceiptKeyError), before it signs anything.
    """
    async with engine.begin() as conn:
        await conn.execute(CHAIN_LOCK)
        found = (await conn.execute(_FOUND, {"key_id": key.key_id})).first()
        if found is not None:
            if found.valid_until is not None:
                raise ReceiptKeyError(
                    f"this worker's receipt signing key {key.key_id} was retired at {found.valid_until.isoformat()}"
                    " by a rotation: give it the current key (if the rotation was interrupted, run"
                    " `python -m lifecycle.deletion.receipt_keys rotate` again to finish it)"
                )
            return
        current = (await conn.execute(_CURRENT)).scalar_one_or_none()
        if current is not None:
            raise ReceiptKeyError(
                f"this worker's receipt signing key {key.key_id} is not published; {current} is current."
                " Give it the current key, or make this one current with"
                " `python -m lifecycle.deletion.receipt_keys rotate`"
            )
        await conn.execute(_PUBLISH_FIRST, {"key_id": key.key_id, "public_key": key.public_pem})


class ReceiptSigner:
    """The worker's key: loaded at start, and loaded again when a rotation made another key current."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self.key = load_signing_key(settings)

    async def current(self, conn: AsyncConnection) -> ReceiptKey:
        """The key to sign with now, inside a transaction that holds CHAIN_LOCK."""
        current = (await conn.execute(_CURRENT)).scalar_one_or_none()
        if current != self.key.key_id:
            # The key file may hold the rotated key already; RECEIPT_SIGNING_KEY changes only with a restart.
            self.key = await asyncio.to_thread(load_signing_key, self._settings)
        if current != self.key.key_id:
            raise ReceiptKeyNotCurrent(
                f"this worker holds receipt signing key {self.key.key_id}, but {current} is current:"
                " give it the current key and restart it; another worker may take this receipt meanwhile"
            )
        return self.key


@dataclass(frozen=True)
class Rotation:
    key_id: str
    # False when the key was current already: a rotation finished again, or the same RECEIPT_SIGNING_KEY.
    published: bool
    retired: str | None
    valid_from: datetime


async def rotate(settings: Settings, engine: AsyncEngine, actor: str) -> Rotation:
    """Make a new key current and end the current one's validity, on the audit trail as `actor`'s act. Run again
    after a crash, it finishes the same rotation; with RECEIPT_SIGNING_KEY set to the current key's secret, it
    changes nothing, and records nothing."""
    staged: Path | None = None
    if settings.receipt_signing_key:
        new = ReceiptKey.from_secret(settings.receipt_signing_key)
    else:
        staged = _staged_file(settings)
        if not staged.exists():
            write_private_file(staged, secrets.token_hex(32) + "\n", replace=False)
        new = ReceiptKey.from_secret(_read_secret(staged))
    async with engine.begin() as conn:
        await conn.execute(CHAIN_LOCK)
        found = (await conn.execute(_FOUND, {"key_id": new.key_id})).first()
        if found is not None and found.valid_until is not None:
            raise ReceiptKeyError(f"receipt signing key {new.key_id} was retired before: a key is never reused")
        retired = None
        if found is None:
            retired = (await conn.execute(_RETIRE)).scalar_one_or_none()
            await conn.execute(_PUBLISH, {"key_id": new.key_id, "public_key": new.public_pem})
            await append_audit_event(
                conn,
                actor=actor,
                action="rotate the receipt signing key",
                target=f"receipt-signing-keys/{new.key_id}",
                request_id=command_request_id(),
            )
        valid_from = (await conn.execute(_VALID_FROM, {"key_id": new.key_id})).scalar_one()
    if staged is not None:
        # Only now: until the new key is published, workers keep signing with the one in the key file.
        os.replace(staged, key_file(settings))
        _fsync_directory(staged.parent)
    return Rotation(key_id=new.key_id, published=found is None, retired=retired, valid_from=valid_from)


async def _rotate_command(settings: Settings) -> str:
    engine = make_engine(settings.database_url, pool_size=1, max_overflow=0)
    try:
        rotation = await rotate(settings, engine, command_actor())
    finally:
        await engine.dispose()
    if not rotation.published:
        return f"receipt signing key {rotation.key_id} is current (since {rotation.valid_from.isoformat()})"
    how = (
        "give the workers this RECEIPT_SIGNING_KEY and restart them; until then they leave receipts waiting"
        if settings.receipt_signing_key
        else f"workers reading {key_file(settings)} sign with it from their next receipt"
    )
    retired = f"; {rotation.retired} is retired" if rotation.retired else ""
    return f"receipt signing key {rotation.key_id} is current{retired}. Next: {how}."


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lifecycle.deletion.receipt_keys", description=__doc__.split("\n")[0]
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("rotate", help="make a new receipt signing key current and retire the current one")
    parser.parse_args(argv)
    try:
        print(asyncio.run(_rotate_command(get_settings())))
    except ReceiptKeyError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
