"""Each account's requests per second on the API (ACCOUNT_REQUESTS_PER_SECOND), for calls made with one of its
keys: past it, 429 with `Retry-After`.

Counted by `limits` in the memory of each API process, in fixed one-second windows: N API processes let an
account make up to N times the limit, and a burst across a window's edge up to twice it. Admin credentials and
unauthenticated calls are not counted.
"""

from __future__ import annotations

import math
import time
import uuid

from limits import RateLimitItemPerSecond
from limits.aio.storage import MemoryStorage
from limits.aio.strategies import FixedWindowRateLimiter

from api.problems import ProblemError


class AccountRateLimit:
    def __init__(self, per_second: int) -> None:
        # 0: no limit.
        self._item = RateLimitItemPerSecond(per_second) if per_second else None
        self._limiter = FixedWindowRateLimiter(MemoryStorage())

    async def take(self, account_id: uuid.UUID) -> None:
        """Count one request of the account; a ProblemError 429 if it is one too many."""
        if self._item is None or await self._limiter.hit(self._item, str(account_id)):
            return
        reset = (await self._limiter.get_window_stats(self._item, str(account_id))).reset_time
        raise ProblemError(
            429,
            f"This account makes more than {self._item.amount} requests a second; retry after the time "
            "`Retry-After` says.",
            title="Too many requests",
            headers={"Retry-After": str(max(1, math.ceil(reset - time.time())))},
        )
