"""The audit trail: one row per admin act and per service registration (audit_events), appended and never
changed. Who acted (the credential's name), what they did, to what, when, and under which request. Never a secret,
and never a text beyond the act's own names and ids: a legal hold's reason stays in its own table.

The API appends a row for every change an admin or a service credential makes (api/admin/audit.py); the
operators' commands that change state append their own (`python -m lifecycle.deletion.receipt_keys rotate`,
`python -m lifecycle.deletion.reapply`), as `command:<user>`.
"""

from __future__ import annotations

import getpass
import uuid

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

_APPEND = text(
    "INSERT INTO audit_events (actor, action, target, account_id, request_id)"
    " VALUES (:actor, :action, :target, :account_id, :request_id)"
)


async def append_audit_event(
    conn: AsyncConnection | AsyncSession,
    *,
    actor: str,
    action: str,
    target: str,
    request_id: str,
    account_id: uuid.UUID | None = None,
) -> None:
    await conn.execute(
        _APPEND,
        {"actor": actor, "action": action, "target": target, "account_id": account_id, "request_id": request_id},
    )


def command_actor() -> str:
    """An operator's command is recorded as run by the operating-system user who ran it."""
    try:
        return f"command:{getpass.getuser()}"
    except (KeyError, OSError):
        return "command:unknown"


def command_request_id() -> str:
    return f"command-{uuid.uuid4()}"
