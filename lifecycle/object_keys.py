"""Object keys built from stored data (a document's storage key, an archive's name) stay under their prefix.

A stored value is data, not a key anyone checked. In the object store, documents live under
`documents/<bot id>/` and export archives under `exports/`; a storage key that names another bot's document, one
with an empty, `.` or `..` segment (SeaweedFS's filer resolves such paths, so `<bot>/../<other bot>/x` would
reach another bot's object), an absolute one, or one with a control character is refused with ObjectKeyRefused,
never used. The disk-based StoredRoot (lifecycle/stored_paths.py) kept the same promise for a directory.
"""

from __future__ import annotations

import uuid

DOCUMENTS_PREFIX = "documents/"
EXPORTS_PREFIX = "exports/"
RECEIPTS_PREFIX = "deletion-receipts/"
# The copy of a chain's first receipt, which follows no other.
_FIRST_RECEIPT = "first"
# S3's limit on a key's length, in UTF-8 bytes.
MAX_KEY_BYTES = 1024


class ObjectKeyRefused(ValueError):
    """Stored data that names no object under its prefix; the message names the rule broken, never the value."""


def _checked_segments(stored: str) -> list[str]:
    if not stored:
        raise ObjectKeyRefused("it is empty")
    if any(ord(char) < 0x20 or ord(char) == 0x7F for char in stored):
        raise ObjectKeyRefused("it holds a NUL byte or another control character")
    if stored.startswith("/"):
        raise ObjectKeyRefused("it is an absolute path")
    segments = stored.split("/")
    if any(segment in ("", ".", "..") for segment in segments):
        raise ObjectKeyRefused("it has an empty, `.` or `..` segment")
    return segments


def bot_documents_prefix(bot_id: str) -> str:
    """`documents/<bot id>/`: every object of the bot's documents, and nothing else."""
    return f"{DOCUMENTS_PREFIX}{uuid.UUID(bot_id)}/"


def document_key(bot_id: str, storage_key: str) -> str:
    """The object of a document of `bot_id` whose stored key is `storage_key` (`<bot id>/<name>...`)."""
    segments = _checked_segments(storage_key)
    if len(segments) < 2 or segments[0] != str(uuid.UUID(bot_id)):
        raise ObjectKeyRefused("it lies outside its bot's prefix")
    key = DOCUMENTS_PREFIX + storage_key
    if len(key.encode()) > MAX_KEY_BYTES:
        raise ObjectKeyRefused("it is longer than an object key may be")
    return key


def archive_name(export_id: str) -> str:
    return f"{uuid.UUID(export_id)}.zip"


def export_archive_key(stored_name: str) -> str:
    """The object of an export archive whose stored name is `stored_name` (one segment, `<export id>.zip`)."""
    if len(_checked_segments(stored_name)) != 1:
        raise ObjectKeyRefused("it names something under another prefix")
    return EXPORTS_PREFIX + stored_name


def export_parts_prefix(export_id: str) -> str:
    """`exports/<export id>/`: where each registered service writes its part of one export
    (ExportRequest.object_key_prefix), naming the object itself; deleted once the archive holds them or the export
    ends."""
    return f"{EXPORTS_PREFIX}{uuid.UUID(export_id)}/"


def service_part_key(prefix: str, object_key: str) -> str:
    """A service's answer to ExportSubjectData names its object: one object directly under the prefix it was
    given, or the part is refused (a service must not point the archive at another's objects)."""
    if not object_key.startswith(prefix) or len(_checked_segments(object_key[len(prefix) :])) != 1:
        raise ObjectKeyRefused("it lies outside the prefix the export gave")
    return object_key


def receipt_copies_prefix(chain_id: str) -> str:
    """`deletion-receipts/<chain id>/`: the copies of one database's chain of receipts, and nothing else."""
    return f"{RECEIPTS_PREFIX}{uuid.UUID(chain_id)}/"


def receipt_copy_key(chain_id: str, previous_sha256: str | None) -> str:
    """The copy of the receipt chained after `previous_sha256` (None: the chain's first). Named by its link, so a
    second receipt after the same one (a fork) would land on the same key, and a restored database finds the
    receipt that followed its head by one request."""
    if previous_sha256 is None:
        return f"{receipt_copies_prefix(chain_id)}{_FIRST_RECEIPT}.json"
    if len(previous_sha256) != 64 or any(char not in "0123456789abcdef" for char in previous_sha256):
        raise ObjectKeyRefused("it is not a SHA-256 in lowercase hex")
    return f"{receipt_copies_prefix(chain_id)}after-{previous_sha256}.json"
