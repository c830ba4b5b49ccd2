"""Legal holds: what a hold is in the database, and how a deletion is told that one changed.

The hold and its reason live in `legal_holds` (migration 0019), one in force per account at most. A deletion never
carries the reason: the API signals its runs with `LEGAL_HOLD_CHANGED` (no payload) after every change, and a run
asks PostgreSQL whether a hold is in force (activities/deletion/legal_holds.py), on that signal, at its start and on
a durable timer while held, so a lost signal delays a release by one timer at most.
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import exists, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from lifecycle.db.models import LegalHold

# The signal both deletion workflows take: "a hold of your account was placed or released; ask again".
LEGAL_HOLD_CHANGED = "legal_hold_changed"

# A hold is in force from its placing until its release.
IN_FORCE = LegalHold.released_at.is_(None)


def in_force(account_id: uuid.UUID | str) -> Any:
    """The SQL expression `a hold is in force on the account`, for a SELECT of one's own."""
    return exists().where(LegalHold.account_id == uuid.UUID(str(account_id)), IN_FORCE)


async def is_held(conn: AsyncConnection | AsyncSession, account_id: uuid.UUID | str) -> bool:
    return bool(await conn.scalar(select(in_force(account_id))))
