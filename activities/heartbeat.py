"""Heartbeating while a step works, so that what Temporal times is the worker's liveness, not the step's length.

A site step usually takes milliseconds but can block for minutes on a lock or a slow CREATE DATABASE; with
a heartbeat timeout of a few seconds, a killed worker is noticed in seconds instead of at start-to-close.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from typing import ParamSpec, TypeVar

from temporalio import activity

P = ParamSpec("P")
R = TypeVar("R")

# Steps and undos heartbeat this often; their heartbeat timeout (workflows/activity_presets.py) is a few times longer.
HEARTBEAT_EVERY = timedelta(seconds=1)


@contextlib.asynccontextmanager
async def heartbeating(details: Callable[[], object] | None = None) -> AsyncIterator[None]:
    """Heartbeat from a background task for as long as the block runs; `details()` is sent with each beat."""

    async def beat() -> None:
        if activity.info().is_local:
            return  # a local activity has no heartbeat: it keeps its workflow task alive instead
        while True:
            # The first beat after one interval, not at once: the server times the heartbeat from the start, so
            # an immediate beat says nothing new, and it cost the server and the worker an RPC (and a write of
            # the activity's state) for every step, most of which end well within a second (docs/benchmarks.md).
            await asyncio.sleep(HEARTBEAT_EVERY.total_seconds())
            if details is None:
                activity.heartbeat()
            else:
                activity.heartbeat(details())

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def heartbeats(step: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """Decorate an activity (under `@activity.defn`) so that it heartbeats in the background while it runs."""

    @functools.wraps(step)
    async def beating(*args: P.args, **kwargs: P.kwargs) -> R:
        async with heartbeating():
            return await step(*args, **kwargs)

    return beating
