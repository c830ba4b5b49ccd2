"""Notifications sent at least once, deduplicated by Message-ID: the guarantee SMTP allows.

A notification has a key (one per business event, shared by retries, resets and new runs). Sending:
1. claim the key in `sent_notifications` as `sending`, in a short transaction of its own;
2. send over SMTP with a Message-ID derived from the key, with no transaction or row lock held;
3. mark the key `sent`.
A `sent` key is never sent again. A crash between 2 and 3 repeats the send on the next attempt, with the
same Message-ID, so the recipient's mail system sees one message.
"""

from __future__ import annotations

import asyncio
import hashlib
import smtplib
from collections.abc import Awaitable, Callable
from email.message import EmailMessage

from opentelemetry.trace import SpanKind
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from activities.step_log import step_skipped
from lifecycle.settings import Settings
from lifecycle.statuses import NotificationState
from lifecycle.tracing import tracer

# Claim, or find the claim; `state` says whether an earlier attempt finished the send.
_CLAIM = text(
    "INSERT INTO sent_notifications (key, message_id, state) VALUES (:key, :message_id, :sending)"
    " ON CONFLICT (key) DO UPDATE SET key = EXCLUDED.key RETURNING state"
)
_MARK_SENT = text("UPDATE sent_notifications SET state = :sent, sent_at = now() WHERE key = :key")


def message_id(key: str, settings: Settings) -> str:
    """The same for every attempt of one notification, different for every other notification."""
    domain = settings.mail_from.rpartition("@")[2] or "lifecycle.local"
    return f"<{hashlib.sha256(key.encode()).hexdigest()[:40]}@{domain}>"


def _send(settings: Settings, message: EmailMessage) -> None:
    with smtplib.SMTP(settings.smtp_host, settings.smtp_port, timeout=30) as smtp:
        smtp.send_message(message)


async def send_once(
    engine: AsyncEngine,
    settings: Settings,
    key: str,
    compose: Callable[[], Awaitable[EmailMessage | None]],
) -> bool:
    """Send the notification `key` unless it was sent; True when this call handed it to the SMTP server.

    `compose` reads what it needs (address, counts) and returns the message, or None if there is nothing
    to send (no address recorded). It runs only when the key is not yet `sent`.
    """
    # Each of the two statements is a transaction of its own: autocommit spares a BEGIN and a COMMIT round trip.
    autocommit = engine.execution_options(isolation_level="AUTOCOMMIT")
    async with autocommit.connect() as conn:
        state = (
            await conn.execute(
                _CLAIM, {"key": key, "message_id": message_id(key, settings), "sending": NotificationState.SENDING}
            )
        ).scalar_one()
    if state == NotificationState.SENT:
        step_skipped("already sent")
        return False
    message = await compose()
    if message is None:
        return False
    message["Message-ID"] = message_id(key, settings)
    if message["From"] is None:
        message["From"] = settings.mail_from
    # The SMTP conversation as a span of its own, a child of the activity's: slow mail servers show up there.
    with tracer().start_as_current_span(
        "smtp send",
        kind=SpanKind.CLIENT,
        attributes={"server.address": settings.smtp_host, "server.port": settings.smtp_port},
    ):
        await asyncio.to_thread(_send, settings, message)
    async with autocommit.connect() as conn:
        await conn.execute(_MARK_SENT, {"key": key, "sent": NotificationState.SENT})
    return True
