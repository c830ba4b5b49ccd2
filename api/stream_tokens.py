"""Short-lived tokens that open one event stream from a browser, whose EventSource cannot send `Authorization`.

A token names one stream (its kind and resource id), the account it belongs to and when it expires, signed with
HMAC-SHA256 under a key derived from EXPORT_SIGNING_KEY, which every API process shares: any process can check
a token another one minted, with nothing stored. It carries ids only. It is minted by an authenticated POST and
travels preferably in an HttpOnly, SameSite=Strict cookie scoped to the stream's path (never readable by
scripts, never sent by another site), or else in the stream's query string as `access_token`, which the access
log redacts (lifecycle/logging_setup.py) and which answers with `Cache-Control: no-store`.
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
_KEY_PURPOSE = b"lifecycle stream token v1"


class StreamKind(StrEnum):
    SITE = "site"
    BOT_DELETION = "bot-deletion"
    ACCOUNT_DELETION = "account-deletion"


@dataclass(frozen=True)
class StreamGrant:
    kind: StreamKind
    resource_id: uuid.UUID
    account_id: uuid.UUID
    expires: int


class StreamTokensUnavailable(RuntimeError):
    """No EXPORT_SIGNING_KEY: tokens could not be checked by another process, so none are minted."""


def _key(settings: Settings) -> bytes:
    if not settings.export_signing_key:
        raise StreamTokensUnavailable("EXPORT_SIGNING_KEY is not set")
    return hmac.new(settings.export_signing_key.encode(), _KEY_PURPOSE, hashlib.sha256).digest()


def _signature(
    settings: Settings, kind: StreamKind, resource_id: uuid.UUID, account_id: uuid.UUID, expires: int
) -> str:
    message = f"{kind}:{resource_id}:{account_id}:{expires}".encode()
    return hmac.new(_key(settings), message, hashlib.sha256).hexdigest()


def mint(settings: Settings, kind: StreamKind, resource_id: uuid.UUID, account_id: uuid.UUID) -> StreamGrant:
    expires = int(time.time() + settings.stream_token_ttl.total_seconds())
    return StreamGrant(kind, resource_id, account_id, expires)


def encode(settings: Settings, grant: StreamGrant) -> str:
    signature = _signature(settings, grant.kind, grant.resource_id, grant.account_id, grant.expires)
    return f"{grant.account_id}.{grant.expires}.{signature}"


def verify(settings: Settings, token: str, kind: StreamKind, resource_id: uuid.UUID) -> uuid.UUID | None:
    """The account the token opens this stream for, or None if it is malformed, forged, expired or another's."""
    try:
        account, expires_text, given = token.split(".")
        account_id = uuid.UUID(account)
        expires = int(expires_text)
    except ValueError:
        return None
    if expires < time.time() or not settings.export_signing_key:
        return None
    expected = _signature(settings, kind, resource_id, account_id, expires)
    return account_id if hmac.compare_digest(expected, given) else None
