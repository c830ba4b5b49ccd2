"""Waiting for a dependency that does not answer yet (Temporal, PostgreSQL), as every process starts."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

logger = logging.getLogger(__name__)

T = TypeVar("T")

# A process started while a dependency is down waits for it rather than exiting: 0.5 s, then twice as long each
# time, up to this.
BACKOFF_MAX_SECONDS = 10.0


async def until_it_answers(
    attempt: Callable[[], Awaitable[T]], *, transient: Callable[[Exception], bool], doing: str
) -> T:
    """`attempt()`'s result, trying again after each failure `transient` accepts; any other failure is raised."""
    delay = 0.5
    while True:
        try:
            return await attempt()
        except Exception as err:
            if not transient(err):
                raise
            logger.warning("%s: %s; retrying in %.1f s", doing, err, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, BACKOFF_MAX_SECONDS)
