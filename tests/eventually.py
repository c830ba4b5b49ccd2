"""The suite's one way to wait: poll something observable until it holds, or fail saying what never happened."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

T = TypeVar("T")

# Generous: the machine is shared, and the tests assert outcomes, never durations.
WITHIN_SECONDS = 120.0
# Often enough that a wait ends soon after its condition holds; rarely enough to leave the servers be.
INTERVAL_SECONDS = 0.1


def _truthy(value: object) -> bool:
    return bool(value)


@overload
async def eventually(
    probe: Callable[[], Awaitable[T | None]], what: str, *, within: float = ..., interval: float = ...
) -> T: ...


@overload
async def eventually(
    probe: Callable[[], Awaitable[T]],
    what: str,
    *,
    until: Callable[[T], bool],
    within: float = ...,
    interval: float = ...,
) -> T: ...


@overload
async def eventually(probe: Callable[[], T | None], what: str, *, within: float = ..., interval: float = ...) -> T: ...


@overload
async def eventually(
    probe: Callable[[], T], what: str, *, until: Callable[[T], bool], within: float = ..., interval: float = ...
) -> T: ...


async def eventually(
    probe: Callable[[], Any],
    what: str,
    *,
    until: Callable[[Any], bool] = _truthy,
    within: float = WITHIN_SECONDS,
    interval: float = INTERVAL_SECONDS,
) -> Any:
    """Call `probe` (sync or async) until `until` holds for its answer, and return that answer.

    Raises AssertionError naming `what` and the last answer once `within` seconds have passed.
    """
    deadline = time.monotonic() + within
    while True:
        answer = probe()
        value = await answer if inspect.isawaitable(answer) else answer
        if until(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened within {within:.0f} s: {what} (last: {value!r:.300})")
        await asyncio.sleep(interval)  # the polling interval: the one sleep of the suite's waits


async def seconds_until(probe: Callable[[], Any], what: str, *, within: float = WITHIN_SECONDS) -> float:
    """How long `probe` took to answer something truthy (for drills that report how long a thing took)."""
    started = time.monotonic()
    await eventually(probe, what, within=within)
    return time.monotonic() - started
