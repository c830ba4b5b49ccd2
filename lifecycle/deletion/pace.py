"""How fast a deletion goes and when it should finish: shared by the status API and the workflows' query."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from lifecycle.statuses import Throttle


@dataclass(frozen=True)
class Pace:
    """How fast a deletion goes now, from the rates its deleters measured over their last windows."""

    rows_per_second: int = 0
    # Rows still to delete in the services under way (estimated while a service runs).
    remaining: int = 0
    # The strongest reason it is slowed: a pressure signal before the budget; None when nothing slows it.
    throttled: Throttle | None = None

    def seconds_left(self) -> float | None:
        """The rows remaining at the rate; None without a rate or without rows to go. The one rule for how long
        deleting takes: the status's expected end and a preview's duration both use it."""
        if self.rows_per_second <= 0 or self.remaining <= 0:
            return None
        return self.remaining / self.rows_per_second

    def estimated_completion(self, now: datetime) -> datetime | None:
        """At the current rate; None while nothing is measured (not started, paused, waiting or finished)."""
        seconds = self.seconds_left()
        return None if seconds is None else now + timedelta(seconds=seconds)
