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

    def estimated_completion(self, now: datetime) -> datetime | None:
        """At the current rate; None while nothing is measured (not started, paused, waiting or finished)."""
        if self.rows_per_second <= 0 or self.remaining <= 0:
            return None
        return now + timedelta(seconds=self.remaining / self.rows_per_second)
