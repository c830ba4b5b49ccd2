"""The deletion confirmation email: sent at least once, always with the same Message-ID (activities/mail.py)."""

from __future__ import annotations

import smtplib
from email.message import EmailMessage

from sqlalchemy import text
from temporalio import activity

from activities.errors import as_transient, is_transient
from activities.heartbeat import heartbeats
from activities.mail import send_once
from activities.resources import ActivityResources
from lifecycle.deletion.contracts import DeletionEmailInput
from lifecycle.settings import Settings

_ADDRESS = text("SELECT notify_email FROM deletion_requests WHERE workflow_id = :workflow_id")
# The address was kept only for this email.
_FORGET_ADDRESS = text("UPDATE deletion_requests SET notify_email = NULL WHERE workflow_id = :workflow_id")


def notification_key(workflow_id: str) -> str:
    """One key per deletion: retries, resets and new runs of the same workflow id share it."""
    return f"deletion-confirmation:{workflow_id}"


def _compose(settings: Settings, to: str, counts: dict[str, int], receipt_id: str | None) -> EmailMessage:
    message = EmailMessage()
    message["From"] = settings.mail_from
    message["To"] = to
    message["Subject"] = "Your account has been deleted"
    lines = [f"  {service}: {count:,}" for service, count in sorted(counts.items())]
    receipt = f"\nDeletion receipt: {receipt_id} (signed; ask us for it by this id)\n" if receipt_id else ""
    message.set_content(
        "Your account and all its data have been deleted.\n\nRecords deleted per service:\n"
        + "\n".join(lines)
        + "\n"
        + receipt
    )
    return message


class Notifications:
    def __init__(self, resources: ActivityResources) -> None:
        self._resources = resources

    @activity.defn(name="send_deletion_confirmation")
    @heartbeats
    async def send_deletion_confirmation(self, request: DeletionEmailInput) -> bool:
        """Send the confirmation unless already sent; return whether this call handed it to the SMTP server.

        No transaction is open across the SMTP call (send_once); the address is read from deletion_requests,
        never carried in history, and forgotten once the message is sent.
        """
        settings = self._resources.settings
        engine = self._resources.engine

        async def compose() -> EmailMessage | None:
            async with engine.connect() as conn:
                to = (await conn.execute(_ADDRESS, {"workflow_id": request.workflow_id})).scalar_one_or_none()
            if to is None:
                activity.logger.warning("no confirmation address recorded for %s", request.workflow_id)
                return None
            return _compose(settings, to, request.deleted_per_service, request.receipt_id)

        try:
            sent = await send_once(engine, settings, notification_key(request.workflow_id), compose)
            async with engine.begin() as conn:
                await conn.execute(_FORGET_ADDRESS, {"workflow_id": request.workflow_id})
        except Exception as exc:
            if is_transient(exc) or isinstance(exc, smtplib.SMTPException):
                raise as_transient(exc) from exc
            raise
        return sent
