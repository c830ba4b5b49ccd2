"""After a deletion service registers: the deletions that wait for one (`waiting`, no deletion service registered)
are signalled to read the registry now. Best-effort: with Temporal down, or a signal that fails, the registration
still answers, and each run reads the registry again on its own timer anyway (workflows/deletion/registry_wait.py).
"""

from __future__ import annotations

import asyncio
import logging

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from temporalio.client import Client
from temporalio.service import RPCError

from api.dependencies import TemporalConnection
from api.holds.holds import SIGNALS_AT_ONCE
from api.temporal_client import TemporalUnavailable
from lifecycle.db.models import DeletionRequest
from lifecycle.deletion.registry import NO_SERVICE_REGISTERED, SERVICE_REGISTERED
from lifecycle.statuses import DeletionState

log = logging.getLogger(__name__)


async def tell_waiting_deletions(session: AsyncSession, temporal: TemporalConnection) -> None:
    waiting = list(
        await session.scalars(
            select(DeletionRequest.workflow_id).where(
                DeletionRequest.status == DeletionState.WAITING.value,
                DeletionRequest.status_reason == NO_SERVICE_REGISTERED,
            )
        )
    )
    # Nothing of the database is held while Temporal answers.
    await session.close()
    if not waiting:
        return
    try:
        client = await temporal.get()
    except TemporalUnavailable as err:
        log.warning(
            "%d deletions waiting for a deletion service not told (their timers read the registry): %s",
            len(waiting),
            err,
        )
        return
    for start in range(0, len(waiting), SIGNALS_AT_ONCE):
        await asyncio.gather(
            *(_signal(client, workflow_id) for workflow_id in waiting[start : start + SIGNALS_AT_ONCE])
        )


async def _signal(client: Client, workflow_id: str) -> None:
    try:
        await client.get_workflow_handle(workflow_id).signal(SERVICE_REGISTERED)
    except RPCError as err:
        log.warning(
            "%s not told that a deletion service registered (its timer reads the registry): %s", workflow_id, err
        )
