"""A copy of every deletion receipt in the object store, where a restore of the product's database cannot reach it.

A restore of an older dump rolls `deletion_receipts` back with everything else: the receipts of the deletions
made since are gone from PostgreSQL, and the next receipt would chain to the restored, stale head. So each
receipt is also written to the object store (a different system, with its own backups that a database restore
does not touch), once committed, under `deletion-receipts/<chain id>/after-<previous sha256>.json`
(`first.json` for the chain's first): the key names the link, so

- a worker about to sign the receipt after head H asks for `after-<H>.json`; if it exists the database is behind
  its copies (restored) and the receipt waits, retried, until `python -m lifecycle.deletion.reapply` has put the missing
  receipts back (ChainBehindCopies);
- `python -m lifecycle.deletion.reapply` reads every copy, verifies the chain and restores what the database lacks
  (lifecycle/deletion/after_restore.py).

The chain id is the one row of `deletion_receipt_chain` (migration 0020), restored with the database, so a
restored database finds its own chain's copies and two databases sharing a bucket never mix theirs.
"""

from __future__ import annotations

import base64
import json
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

import rfc8785
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from lifecycle.object_keys import receipt_copies_prefix, receipt_copy_key
from lifecycle.object_store import ObjectStore

_CHAIN_ID = text("SELECT id FROM deletion_receipt_chain")
# A `deletion_receipts` row's columns in ReceiptRecord's order: `ReceiptRecord(*row)`.
RECORD_COLUMNS = (
    "id::text, receipt_key, subject_kind, subject_id::text, account_id::text, workflow_id, canonical, sha256,"
    " signature, created_at"
)


class ChainBehindCopies(Exception):
    """The database's last receipt is followed by another in the object store: it was restored from an older dump,
    and a receipt signed now would fork the chain. Retried until `python -m lifecycle.deletion.reapply` restores it."""


class UnreadableCopy(Exception):
    """An object under the chain's prefix that is not a receipt's copy: the message names its key."""


@dataclass(frozen=True)
class ReceiptRecord:
    """One row of `deletion_receipts`, as stored in PostgreSQL and in its copy: enough to put the row back."""

    id: str
    receipt_key: str
    subject_kind: str
    subject_id: str
    account_id: str
    workflow_id: str
    canonical: bytes
    sha256: str
    signature: str
    created_at: datetime

    @property
    def body(self) -> dict[str, Any]:
        return dict(json.loads(self.canonical))

    @property
    def previous_sha256(self) -> str | None:
        previous = self.body.get("previous_sha256")
        return None if previous is None else str(previous)

    def to_json(self) -> bytes:
        fields = asdict(self)
        fields["canonical"] = base64.b64encode(self.canonical).decode()
        fields["created_at"] = self.created_at.isoformat()
        return rfc8785.dumps(fields)

    @classmethod
    def from_json(cls, raw: bytes) -> ReceiptRecord:
        fields = json.loads(raw)
        fields["canonical"] = base64.b64decode(fields["canonical"])
        fields["created_at"] = datetime.fromisoformat(fields["created_at"])
        return cls(**fields)


async def chain_id(conn: AsyncConnection) -> str:
    return str((await conn.execute(_CHAIN_ID)).scalar_one())


class ReceiptCopies:
    """The copies of one chain, in one bucket."""

    def __init__(self, store: ObjectStore, chain: str) -> None:
        self._store = store
        self._chain = chain

    async def put(self, record: ReceiptRecord) -> None:
        """Idempotent: the same receipt writes the same bytes under the same key."""
        await self._store.put_bytes(receipt_copy_key(self._chain, record.previous_sha256), record.to_json())

    async def raise_if_followed(self, head_sha256: str | None) -> None:
        """ChainBehindCopies if a copy follows `head_sha256`, the database's last receipt (None: it has none)."""
        if await self._store.size(receipt_copy_key(self._chain, head_sha256)) is not None:
            raise ChainBehindCopies(
                "the receipts in PostgreSQL end before their copies in the object store (a restore of an older"
                " dump?): a receipt signed now would fork the chain. Run `python -m lifecycle.deletion.reapply`, which"
                " puts the missing receipts back; this receipt waits for it"
            )

    async def read_all(self) -> dict[str, ReceiptRecord]:
        """Every copy of the chain, by its object key."""
        found = {}
        for key in await self._store.keys(receipt_copies_prefix(self._chain)):
            raw = await self._store.read(key)
            if raw is None:
                continue
            try:
                found[key] = ReceiptRecord.from_json(raw)
            except (ValueError, KeyError, TypeError) as err:
                raise UnreadableCopy(f"the copy {key} is not a receipt's copy ({err!r})") from err
        return found

    def key_of(self, record: ReceiptRecord) -> str:
        return receipt_copy_key(self._chain, record.previous_sha256)
