"""A deleter's pace: each batch is reserved from the shared deletion budget, and slowed further while the
database shows pressure (lifecycle/deletion/budget.py says which signals and why)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from sqlalchemy.ext.asyncio import AsyncConnection

from lifecycle.deletion.budget import pressure, reserve
from lifecycle.deletion.contracts import MIN_BATCH_SIZE
from lifecycle.statuses import Throttle

# The pressure signals are read at most this often per deleter: one cheap catalog query a second.
PRESSURE_CHECK_EVERY = 1.0
# With no budget, the budget row is read again this often, so a new budget applies within about a second.
UNLIMITED_RECHECK_EVERY = 1.0
# A wait for budget is cut into pieces this long, with a heartbeat after each: the deleter stays visibly alive,
# and a cancel reaches it between two pieces.
WAIT_PIECE = 1.0


class Pacer:
    def __init__(self, table: str, heartbeat: Callable[[], None]) -> None:
        self._table = table
        self._heartbeat = heartbeat
        self._limited = True
        self._recheck_at = 0.0
        self._pressure_checked_at = float("-inf")
        self._pressure: Throttle | None = None
        # What slowed the last batch: shown as `throttled`.
        self.throttled: Throttle | None = None

    async def next_batch(self, conn: AsyncConnection, max_rows: int) -> int:
        """Rows the next batch may delete, once the budget allows it to start."""
        now = time.monotonic()
        if not self._limited and now < self._recheck_at:
            return max_rows
        if now - self._pressure_checked_at >= PRESSURE_CHECK_EVERY:
            self._pressure = await pressure(conn, self._table)
            self._pressure_checked_at = now
        reservation = await reserve(conn, max_rows, min(MIN_BATCH_SIZE, max_rows), pressured=self._pressure is not None)
        await conn.commit()
        self._limited = reservation.rows_per_second is not None
        if not self._limited:
            # No budget: no back-off either (the benches, a maintenance window); see docs/deletion-budget.md.
            self._recheck_at = now + UNLIMITED_RECHECK_EVERY
            self.throttled = None
            return max_rows
        self.throttled = self._pressure or (Throttle.BUDGET if reservation.wait > 0 else None)
        await self._wait(reservation.wait)
        return reservation.rows

    async def _wait(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            await asyncio.sleep(min(left, WAIT_PIECE))
            self._heartbeat()
