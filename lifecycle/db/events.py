"""The `lifecycle_events` log: one row per change of a site or a deletion (its recorded status, its completion, a
service's progress), appended by PostgreSQL triggers (migrations 0005, 0006 and 0009) in the same transaction as
the change, with a `pg_notify` that wakes the API's listener. Nothing else writes it: reading a status never does.

The row id is the Server-Sent Events id: it only grows, so `Last-Event-ID` says exactly where a stream was.
A site's row carries the site as its status answer shows it (`state`); a deletion's row only names the
deletion, and the stream recomputes the answer (see api/streams/router.py).
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any, Final

from sqlalchemy import BigInteger, DateTime, Identity, Index, String, delete, func, select
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession
from sqlalchemy.orm import Mapped, mapped_column

from lifecycle.db.models import Base

# The channel the triggers notify; the payload is empty, the table is the message.
NOTIFY_CHANNEL: Final = "lifecycle_events"

SITE: Final = "site"
DELETION: Final = "deletion"


class LifecycleEvent(Base):
    __tablename__ = "lifecycle_events"
    __table_args__ = (
        # A subject's events after an id (a stream and its resume), an account's, and pruning by age.
        Index("ix_lifecycle_events_subject", "subject_kind", "subject_id", "id"),
        Index("ix_lifecycle_events_account", "account_id", "id"),
        Index("ix_lifecycle_events_created_at", "created_at"),
    )

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    subject_kind: Mapped[str] = mapped_column(String(20))
    subject_id: Mapped[str] = mapped_column(String(100))
    account_id: Mapped[uuid.UUID | None] = mapped_column()
    state: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


async def site_events(
    session: AsyncSession, site_id: uuid.UUID, *, after: int | None
) -> list[tuple[int, dict[str, Any]]]:
    """The site's snapshots after `after`, oldest first; with no `after`, only the latest one."""
    query = select(LifecycleEvent.id, LifecycleEvent.state).where(
        LifecycleEvent.subject_kind == SITE, LifecycleEvent.subject_id == str(site_id)
    )
    if after is None:
        query = query.order_by(LifecycleEvent.id.desc()).limit(1)
    else:
        query = query.where(LifecycleEvent.id > after).order_by(LifecycleEvent.id)
    rows = [(event_id, state) for event_id, state in await session.execute(query) if state is not None]
    return sorted(rows, key=lambda row: row[0])


async def latest_deletion_event(
    session: AsyncSession, *, workflow_id: str | None = None, account_id: uuid.UUID | None = None
) -> int:
    """The id of the newest change of one deletion (by workflow id) or of an account's deletions; 0 if none."""
    query = select(func.max(LifecycleEvent.id)).where(LifecycleEvent.subject_kind == DELETION)
    if workflow_id is not None:
        query = query.where(LifecycleEvent.subject_id == workflow_id)
    if account_id is not None:
        query = query.where(LifecycleEvent.account_id == account_id)
    return (await session.execute(query)).scalar_one() or 0


async def prune_events(engine: AsyncEngine, retention: timedelta) -> int:
    """Delete events older than `retention` (indexed on created_at); a stream resuming from a pruned id still
    gets the current state. Answers how many rows went."""
    async with engine.begin() as connection:
        result = await connection.execute(
            delete(LifecycleEvent).where(LifecycleEvent.created_at < func.now() - retention)
        )
    return int(result.rowcount or 0)
