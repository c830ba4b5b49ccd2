"""Processors: the recipients of the accounts' data (GDPR Art. 19 and 28) that every account deletion tells.

Each is told with one erasure request, signed as the Standard Webhooks specification says
(https://www.standardwebhooks.com/): `webhook-id`, `webhook-timestamp` and `webhook-signature: v1,<base64
HMAC-SHA256 of "{id}.{timestamp}.{body}">`, keyed with the base64 part of the `whsec_` secret given at
registration. The `webhook-id` is derived from the deletion and the processor, so every retry to that processor
carries the same one: it is the processor's idempotency key.
"""

from __future__ import annotations

import base64
import binascii
import uuid
from datetime import datetime
from typing import Any, Final

import orjson
from standardwebhooks.webhooks import Webhook

SECRET_PREFIX: Final = "whsec_"
# The Standard Webhooks specification asks for keys of 24 to 64 bytes.
SECRET_MIN_BYTES: Final = 24
SECRET_MAX_BYTES: Final = 64
URL_MAX_LENGTH: Final = 2000
# The longest `reference` kept from a processor's answer; a longer one is cut.
REFERENCE_MAX_LENGTH: Final = 200

# Erasure ids are derived from the deletion (the receipt key: workflow id and first run id), so a retry, a reset or
# a continue-as-new of the deletion names the same erasure and sends nothing twice.
_ERASURE_IDS = uuid.UUID("0d6a8f55-3c1e-4a52-8f7e-5b3f1c9a2e74")


def secret_problem(secret: str) -> str | None:
    """Why `secret` is no Standard Webhooks secret, or None if it is one."""
    if not secret.startswith(SECRET_PREFIX):
        return f"the secret must start with {SECRET_PREFIX!r}"
    try:
        key = base64.b64decode(secret[len(SECRET_PREFIX) :], validate=True)
    except (binascii.Error, ValueError):
        return f"the secret must be {SECRET_PREFIX!r} followed by standard base64"
    if not SECRET_MIN_BYTES <= len(key) <= SECRET_MAX_BYTES:
        return f"the secret's key must be {SECRET_MIN_BYTES} to {SECRET_MAX_BYTES} bytes, not {len(key)}"
    return None


def erasure_id(deletion_workflow_id: str, first_run_id: str) -> uuid.UUID:
    return uuid.uuid5(_ERASURE_IDS, f"{deletion_workflow_id}:{first_run_id}")


def webhook_id(erasure: uuid.UUID, processor: str) -> str:
    """The `webhook-id` of `erasure`'s request to `processor`: the same on every retry."""
    return f"msg_{uuid.uuid5(erasure, processor).hex}"


def erasure_body(erasure: uuid.UUID, account_id: uuid.UUID | str, requested_at: datetime) -> bytes:
    """The request's JSON: ids and a time, no personal data."""
    body: dict[str, Any] = {
        "erasure_id": str(erasure),
        "subject": {"kind": "account", "id": str(account_id)},
        "requested_at": requested_at.isoformat().replace("+00:00", "Z"),
    }
    return orjson.dumps(body)


def signed_headers(secret: str, message_id: str, sent_at: datetime, body: bytes) -> dict[str, str]:
    """The Standard Webhooks headers of one attempt (its timestamp is the attempt's own)."""
    signature = Webhook(secret).sign(msg_id=message_id, timestamp=sent_at, data=body.decode())
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(int(sent_at.timestamp())),
        "webhook-signature": signature,
        "content-type": "application/json",
    }
