"""Secrets only the workers read: processors' webhook secrets (`processors.secret`) and site-database servers'
administrative URLs with their passwords (`site_db_servers.admin_url`), stored sealed to the workers' X25519 key
(libsodium's sealed box, PyNaCl). The API seals with the public key the workers publish in `sealing_keys`, and
cannot open what it stored; PostgreSQL's column privileges keep it from reading it at all (lifecycle/migrate.py).

A sealed value reads `sealed:<key id>:<base64 box>`. The workers' keys come from secrets (a key's private half is
the secret's SHA-256): SEALING_KEYS, comma-separated, else the key file DATA_DIR/sealing_keys, one a line, made on a
worker's first start. The first is the newest; the others open values still sealed to older keys. At start a
worker publishes its first key if none is (else it checks it holds the published one), then re-seals to the
published key every value sealed to another key, or not sealed at all (rows from before sealing).

    python -m lifecycle.sealing rotate

publishes a new key and re-seals every row to it: with the key file, it makes the key, puts it first in the file,
and drops the older keys from the file once no row needs them; with SEALING_KEYS, the new secret goes first in
the variable of the workers and of the command beforehand, and the old one is removed afterwards
(docs/operations.md, "Sealing keys").
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import secrets
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nacl.exceptions import CryptoError
from nacl.public import PrivateKey, PublicKey, SealedBox
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession

from lifecycle.audit import append_audit_event, command_actor, command_request_id
from lifecycle.db.engine import make_engine
from lifecycle.deletion.receipt_keys import write_private_file
from lifecycle.settings import MIN_SECRET_BYTES, SEALING_KEYS_FILE, Settings, get_settings

SEALED_PREFIX = "sealed:"
# (table, key column, sealed column): every column holding a sealed secret. Names, never user input.
SEALED_COLUMNS = (("processors", "name", "secret"), ("site_db_servers", "name", "admin_url"))
# Exclusive for a publication or a rotation, shared for a sealing: a value sealed while a rotation waits is
# written before the rotation commits, so the re-seal that follows it finds the value.
_PUBLISHING = text("SELECT pg_advisory_xact_lock(hashtext('sealing_keys'))")
_SEALING = text("SELECT pg_advisory_xact_lock_shared(hashtext('sealing_keys'))")
_PUBLISHED = text("SELECT key_id, public_key FROM sealing_keys")
_REPLACE = text("DELETE FROM sealing_keys")
_PUBLISH = text("INSERT INTO sealing_keys (key_id, public_key) VALUES (:key_id, :public_key)")
_KEY_ID_HEX_DIGITS = 32


class SealingKeyError(Exception):
    """A sealing key problem a person must act on: the message says what to do."""


class NoSealingKey(Exception):
    """No worker has published its key yet: the API cannot store a secret (503)."""


@dataclass(frozen=True)
class PublishedKey:
    key_id: str
    public: PublicKey

    def seal(self, plaintext: str) -> str:
        box = SealedBox(self.public).encrypt(plaintext.encode())
        return f"{SEALED_PREFIX}{self.key_id}:{base64.b64encode(box).decode()}"


def _key_id(public: PublicKey) -> str:
    return hashlib.sha256(bytes(public)).hexdigest()[:_KEY_ID_HEX_DIGITS]


def _published(row: Any) -> PublishedKey:
    return PublishedKey(row.key_id, PublicKey(base64.b64decode(row.public_key)))


def sealed_to(value: str) -> str | None:
    """The id of the key `value` is sealed to; None for a value not sealed."""
    if not value.startswith(SEALED_PREFIX):
        return None
    return value[len(SEALED_PREFIX) :].split(":", 1)[0]


@dataclass(frozen=True)
class SealingKey:
    private: PrivateKey
    key_id: str

    @classmethod
    def from_secret(cls, secret: str) -> SealingKey:
        private = PrivateKey(hashlib.sha256(secret.encode()).digest())
        return cls(private, _key_id(private.public_key))

    @property
    def published(self) -> PublishedKey:
        return PublishedKey(self.key_id, self.private.public_key)


def key_file(settings: Settings) -> Path:
    return settings.data_dir / SEALING_KEYS_FILE


def _secrets(settings: Settings) -> list[str]:
    """SEALING_KEYS' secrets, else the key file's (made with one new secret if there is none); newest first."""
    if settings.sealing_keys:
        found, where = settings.sealing_keys.split(","), "SEALING_KEYS"
    else:
        path = key_file(settings)
        if not path.exists():
            write_private_file(path, secrets.token_hex(32) + "\n", replace=False)
        found, where = path.read_text().splitlines(), str(path)
    kept = [secret.strip() for secret in found if secret.strip()]
    if not kept or any(len(secret.encode()) < MIN_SECRET_BYTES for secret in kept):
        raise SealingKeyError(
            f"{where} must hold one or more secrets of at least {MIN_SECRET_BYTES} bytes each (the newest first);"
            " restore it from a backup: rows sealed to a lost key cannot be opened, register them again"
        )
    return list(dict.fromkeys(kept))


class KeyRing:
    """A worker's keys, newest first: read at start, and read again when a value names a key it does not hold (a
    rotation may have put a new one in the key file)."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self.keys = [SealingKey.from_secret(secret) for secret in _secrets(settings)]

    @property
    def newest(self) -> SealingKey:
        return self.keys[0]

    def held(self, key_id: str) -> SealingKey | None:
        found = next((key for key in self.keys if key.key_id == key_id), None)
        if found is None:
            self.keys = [SealingKey.from_secret(secret) for secret in _secrets(self._settings)]
            found = next((key for key in self.keys if key.key_id == key_id), None)
        return found

    def open(self, sealed: str) -> str:
        """The secret `sealed` holds; SealingKeyError for a value not sealed, or sealed to a key not held."""
        key_id = sealed_to(sealed)
        if key_id is None:
            raise SealingKeyError("a stored secret is not sealed: a worker's start seals it (python worker.py)")
        key = self.held(key_id)
        if key is None:
            raise SealingKeyError(
                f"a stored secret is sealed to key {key_id}, which this worker does not hold: give it the key"
                " (SEALING_KEYS or its key file) and restart it"
            )
        try:
            return SealedBox(key.private).decrypt(base64.b64decode(sealed.rsplit(":", 1)[1])).decode()
        except (CryptoError, ValueError) as err:
            raise SealingKeyError(f"a stored secret sealed to key {key_id} does not open: {err}") from None


async def seal_for_workers(conn: AsyncSession | AsyncConnection, plaintext: str) -> str:
    """`plaintext` sealed to the published key, in the transaction that stores it; NoSealingKey if there is none."""
    await conn.execute(_SEALING)
    row = (await conn.execute(_PUBLISHED)).first()
    if row is None:
        raise NoSealingKey(
            "No worker has published its sealing key yet, so secrets cannot be stored: start a worker"
            " (it publishes the key as it starts), then try again."
        )
    return _published(row).seal(plaintext)


async def publish_at_start(engine: AsyncEngine, ring: KeyRing) -> None:
    """Publish the worker's newest key if none is; else check that the worker holds the published one."""
    async with engine.begin() as conn:
        await conn.execute(_PUBLISHING)
        row = (await conn.execute(_PUBLISHED)).first()
        if row is None:
            await conn.execute(_PUBLISH, _row(ring.newest))
        elif ring.held(row.key_id) is None:
            raise SealingKeyError(
                f"the published sealing key is {row.key_id}, which this worker does not hold: give it that key"
                " (SEALING_KEYS or DATA_DIR/sealing_keys), or finish a rotation with `python -m lifecycle.sealing"
                " rotate`"
            )


def _row(key: SealingKey) -> dict[str, str]:
    return {"key_id": key.key_id, "public_key": base64.b64encode(bytes(key.private.public_key)).decode()}


async def reseal(engine: AsyncEngine, ring: KeyRing) -> int:
    """Seal to the published key every stored secret sealed to another key or not sealed; how many were."""
    resealed = 0
    async with engine.begin() as conn:
        await conn.execute(_SEALING)
        row = (await conn.execute(_PUBLISHED)).first()
        if row is None:
            return 0
        published = _published(row)
        for table, key, column in SEALED_COLUMNS:
            stale = await conn.execute(
                text(f"SELECT {key}, {column} FROM {table} WHERE {column} NOT LIKE :current FOR UPDATE"),
                {"current": f"{SEALED_PREFIX}{published.key_id}:%"},
            )
            for name, value in stale.all():
                plaintext = value if sealed_to(value) is None else ring.open(value)
                await conn.execute(
                    text(f"UPDATE {table} SET {column} = :sealed WHERE {key} = :name"),
                    {"sealed": published.seal(plaintext), "name": name},
                )
                resealed += 1
    return resealed


@dataclass(frozen=True)
class Rotation:
    key_id: str
    published: bool  # False when the key was published already: a rotation finished again
    resealed: int
    dropped: int  # older keys removed from the key file (always 0 with SEALING_KEYS)


async def rotate(settings: Settings, engine: AsyncEngine, actor: str) -> Rotation:
    """Publish the newest key (with the key file, a new one first), re-seal every row to it, then drop the older
    keys from the key file. Run again after a crash, it finishes the same rotation."""
    ring = KeyRing(settings)
    async with engine.connect() as conn:
        row = (await conn.execute(_PUBLISHED)).first()
    if not settings.sealing_keys and len(ring.keys) == 1 and (row is None or row.key_id == ring.newest.key_id):
        # The key file holds the published key alone: no rotation is under way, this one makes the next key.
        lines = [secrets.token_hex(32), *_secrets(settings)]
        write_private_file(key_file(settings), "".join(f"{line}\n" for line in lines), replace=True)
        ring = KeyRing(settings)
    if row is not None and ring.held(row.key_id) is None:
        raise SealingKeyError(
            f"the published sealing key {row.key_id} is not among the command's keys: SEALING_KEYS (or the key"
            " file) must hold it after the new one, to re-seal what is sealed to it"
        )
    new = ring.newest
    published = row is None or row.key_id != new.key_id
    if published:
        async with engine.begin() as conn:
            await conn.execute(_PUBLISHING)
            await conn.execute(_REPLACE)
            await conn.execute(_PUBLISH, _row(new))
            await append_audit_event(
                conn,
                actor=actor,
                action="rotate the sealing key",
                target=f"sealing-keys/{new.key_id}",
                request_id=command_request_id(),
            )
    resealed = await reseal(engine, ring)
    dropped = 0
    if not settings.sealing_keys and len(ring.keys) > 1:
        dropped = len(ring.keys) - 1
        write_private_file(key_file(settings), _secrets(settings)[0] + "\n", replace=True)
    return Rotation(key_id=new.key_id, published=published, resealed=resealed, dropped=dropped)


async def _rotate_command(settings: Settings) -> str:
    engine = make_engine(settings.database_url, pool_size=1, max_overflow=0)
    try:
        rotation = await rotate(settings, engine, command_actor())
    finally:
        await engine.dispose()
    done = "is published" if rotation.published else "was published already"
    summary = f"sealing key {rotation.key_id} {done}; {rotation.resealed} stored secrets re-sealed to it"
    if settings.sealing_keys:
        return f"{summary}. Next: remove the older secrets from the workers' SEALING_KEYS and restart them."
    return f"{summary}; {rotation.dropped} older keys dropped from {key_file(settings)}."


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lifecycle.sealing", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("rotate", help="publish a new sealing key and re-seal every stored secret to it")
    parser.parse_args(argv)
    try:
        print(asyncio.run(_rotate_command(get_settings())))
    except SealingKeyError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
