"""Signed, expiring download links for account exports: HMAC-SHA256 over the export id and the expiry.

The link works without an API key (the account may be deleted right after the export), so the signature is
the only credential: it is compared in constant time, and a link past its expiry is refused however valid.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from urllib.parse import urlencode

from lifecycle.settings import Settings


class SigningKeyMissing(RuntimeError):
    """EXPORT_SIGNING_KEY is not set (the local stack generates one into the data directory)."""


def _key(settings: Settings) -> bytes:
    if not settings.export_signing_key:
        raise SigningKeyMissing("EXPORT_SIGNING_KEY is not set: exports cannot be linked or downloaded")
    return settings.export_signing_key.encode()


def signature(settings: Settings, export_id: str, expires: int) -> str:
    return hmac.new(_key(settings), f"{export_id}\n{expires}".encode(), hashlib.sha256).hexdigest()


def signature_valid(settings: Settings, export_id: str, expires: int, given: str, *, now: float | None = None) -> bool:
    """True for this export's signature at this expiry, while the expiry is in the future."""
    expected = signature(settings, export_id, expires)
    matches = hmac.compare_digest(expected.encode(), given.encode())
    return matches and expires > (time.time() if now is None else now)


def download_path(settings: Settings, export_id: str, expires: int) -> str:
    query = urlencode({"expires": expires, "signature": signature(settings, export_id, expires)})
    return f"/exports/{export_id}/download?{query}"


def download_url(settings: Settings, export_id: str, expires: int) -> str:
    base = settings.public_base_url or f"http://{settings.api_host}:{settings.api_port}"
    return base.rstrip("/") + download_path(settings, export_id, expires)
