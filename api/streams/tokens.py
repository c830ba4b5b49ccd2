"""Short-lived tokens that open one event stream from a browser, whose EventSource cannot send `Authorization`.

A token names one stream (its kind and resource id), the account it belongs to, the API key that minted it (none
for the admin token) and when it expires, signed with
HMAC-SHA256 under a key derived from EXPORT_SIGNING_KEY, which every API process shares: any process can check
a token another one minted, with nothing stored. It carries ids only. It is minted by an authenticated POST and
travels preferably in an HttpOnly, SameSite=Strict cookie scoped to the stream's path (never readable by
scripts, never sent by another site), or else in the stream's query string as `access_token`, which the access
log redacts (lifecycle/logging_setup.py) and which answers with `Cache-Control: no-store`.

A token opens its stream only while the key that minted it opens the account, and the stream it opened ends at
its expiry or soon after that key stops opening the account (api/streams/credentials.py).
"""

from __future__ import annotations

import hashlib
import hmac
import time
import uuid
from dataclasses import dataclass
from enum import StrEnum

from lifecycle.settings import Settings

COOKIE_NAME = "stream_token"
QUERY_PARAMETER = "access_token"
_KEY_PURPOSE = b"lifecycle stream token v2"


class StreamKind(StrEnum):
    SITE = "site"
    BOT_DELETION = "bot-deletion"
    ACCOUNT_DELETION = "account-deletion"


@dataclass(frozen=True)
class StreamGrant:
    kind: StreamKind
    resource_id: uuid.UUID
    account_id: uuid.UUID
    # The account key that minted it; None when the admin token did.
    key_id: uuid.UUID | None
    expires: int


class StreamTokensUnavailable(RuntimeError):
    """No EXPORT_SIGNING_KEY: tokens could not be checked by another process, so none are minted."""


def _key(settings: Settings) -> bytes:
    if not settings.export_signing_key:
        raise StreamTokensUnavailable("EXPORT_SIGNING_KEY is not set")
    return hmac.new(settings.export_signing_key.encode(), _KEY_PURPOSE, hashlib.sha256).digest()


def _key_text(key_id: uuid.UUID | None) -> str:
    return "" if key_id is None else str(key_id)


def _signature(settings: Settings, grant: StreamGrant) -> str:
    message = f"{grant.kind}:{grant.resource_id}:{grant.account_id}:{_key_text(grant.key_id)}:{grant.expires}"
    return hmac.new(_key(settings), message.encode(), hashlib.sha256).hexdigest()


def mint(
    settings: Settings, kind: StreamKind, resource_id: uuid.UUID, account_id: uuid.UUID, key_id: uuid.UUID | None
) -> StreamGrant:
    expires = int(time.time() + settings.stream_token_ttl.total_seconds())
    return StreamGrant(kind, resource_id, account_id, key_id, expires)


def encode(settings: Settings, grant: StreamGrant) -> str:
    return f"{grant.account_id}.{_key_text(grant.key_id)}.{grant.expires}.{_signature(settings, grant)}"


def verify(settings: Settings, token: str, kind: StreamKind, resource_id: uuid.UUID) -> StreamGrant | None:
    """What the token grants on this stream, or None if it is malformed, forged, expired or another's. Whether
    its key still opens the account is the caller's to check (it takes a database read)."""
    try:
        account, key, expires_text, given = token.split(".")
        grant = StreamGrant(kind, resource_id, uuid.UUID(account), uuid.UUID(key) if key else None, int(expires_text))
    except ValueError:
        return None
    if grant.expires < time.time() or not settings.export_signing_key:
        return None
    return grant if hmac.compare_digest(_signature(settings, grant), given) else None
