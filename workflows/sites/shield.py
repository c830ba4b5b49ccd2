"""Run work that a workflow cancellation must not interrupt: rollbacks, teardowns, the final steps."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any


async def uninterruptible(work: Coroutine[Any, Any, None]) -> None:
    """Run `work` in its own task and wait for it, whatever cancellations reach the caller meanwhile.

    The workflow's cancellation cancels the task running `run`; the shield keeps it away from `work`,
    whose activities then run and retry to the end.
    """
    task = asyncio.create_task(work)
    while True:
        try:
            await asyncio.shield(task)
            return
        except asyncio.CancelledError:
            if task.cancelled():
                raise


def cancel_pending() -> bool:
    """Whether this run's cancellation is on its way: a step's failed attempt and the cancellation can arrive in
    one activation, and the failure is then raised first. It is still a cancellation, and the site says so."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
