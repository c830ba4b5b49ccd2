"""The deletion confirmation email, sent at most once per deletion whatever retries or resets happen."""

from __future__ import annotations

import asyncio
import smtplib
from email.message import EmailMessage

from sqlalchemy import text
from temporalio import activity

from activities.errors import as_transient, is_transient
from activities.resources import ActivityResources
from lifecycle.contracts import DeletionEmailInput
from lifecycle.settings import Settings


def notification_key(workflow_id: str) -> str:
    """One key per deletion: retries, resets and new runs of the same workflow id share it."""
    return f"deletion-confirmation:{workflow_id}"


def _compose(settings: Settings, to: str, counts: dict[str, int]) -> EmailMessage:
    message = EmailMessage()
    message["From"] = settings.mail_from
    message["To"] = to
    message["Subject"] = "Your account has been deleted"
    lines = [f"  {service}: {count:,}" for service, count in sorted(counts.items())]
    message.set_content(
        "Your account and all its data have been deleted.\n\nRecords deleted per service:\n" + "\n".join(lines) + "\n"
    )
    return message


def _send(settings: Settings, message: EmailMessage) -> None:
    with smtplib.SMTP(settings.smtp_host, settings.smtp_port, timeout=30) as smtp:
        smtp.send_message(message)


class Notifications:
    def __init__(self, resources: ActivityResources) -> None:
        self._resources = resources

    @activity.defn(name="send_deletion_confirmation")
    async def send_deletion_confirmation(self, request: DeletionEmailInput) -> bool:
        """Send the confirmation unless already sent; return whether this call sent it.

        The key is inserted, the mail sent, then both committed: a concurrent attempt blocks on the key's
        row lock, and a failed send rolls the key back so a retry sends it.
        """
        settings = self._resources.settings
        try:
            async with self._resources.engine.begin() as conn:
                claimed = await conn.execute(
                    text("INSERT INTO sent_notifications (key) VALUES (:key) ON CONFLICT DO NOTHING RETURNING key"),
                    {"key": notification_key(request.workflow_id)},
                )
                if claimed.first() is None:
                    return False
                address = await conn.execute(
                    text("SELECT notify_email FROM deletion_requests WHERE workflow_id = :workflow_id"),
                    {"workflow_id": request.workflow_id},
                )
                to = address.scalar_one_or_none()
                if to is None:
                    activity.logger.warning("no confirmation address recorded for %s", request.workflow_id)
                    return False
                await asyncio.to_thread(_send, settings, _compose(settings, to, request.deleted_per_service))
                # The address was kept only for this email.
                await conn.execute(
                    text("UPDATE deletion_requests SET notify_email = NULL WHERE workflow_id = :workflow_id"),
                    {"workflow_id": request.workflow_id},
                )
        except Exception as exc:
            if is_transient(exc) or isinstance(exc, smtplib.SMTPException):
                raise as_transient(exc) from exc
            raise
        return True
