"""Where a deletion waits while a legal hold is in force on its account: a bot deletion at every batch boundary
(before each slice of each service), an account deletion before it deletes anything, between waves of bots, before
its sites and before its last step.

The run never holds the hold's reason, only whether one is in force, as PostgreSQL answers it (the
`legal_hold_in_force` activity). It asks at its first boundary, after every `legal_hold_changed` signal (the API
sends one to the account's runs after placing or releasing a hold), and, while held, again on a durable timer: a lost
signal, a worker restart or a reset delays a release by one timer at most and never strands the deletion.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    import workflows.activity_presets as presets
    from activities.deletion.legal_holds import LegalHolds


def _never() -> bool:
    return False


class LegalHoldGate:
    def __init__(self, account_id: str, recheck_after: timedelta, on_change: Callable[[], None]) -> None:
        self._account_id = account_id
        self._recheck_after = recheck_after
        # Called once `held` changed: the run shows its status.
        self._on_change = on_change
        self.held = False
        # Whether the answer may be out of date: until the run's first question, and after each signal.
        self._stale = True
        # Answers so far: a waiter wakes on one that a signal's handler asked for.
        self._answers = 0
        # One question at a time, and one waiter on the timer: the services of a bot deletion reach their
        # boundaries together, and the others find the answer once the first has it.
        self._asking = asyncio.Lock()
        self._waiting = asyncio.Lock()

    def changed(self) -> None:
        """The signal: a hold on the account was placed or released; ask again at the next boundary."""
        self._stale = True

    async def refresh(self) -> None:
        """Ask PostgreSQL until the answer is current: a signal that arrives during a question asks again."""
        async with self._asking:
            while self._stale:
                self._stale = False
                held = await workflow.execute_activity_method(
                    LegalHolds.legal_hold_in_force,
                    self._account_id,
                    **presets.STEP,
                    summary=f"is a legal hold in force on account {self._account_id}?",
                )
                self._answers += 1
                if held != self.held:
                    self.held = held
                    self._on_change()

    async def wait_until_released(self, give_up: Callable[[], bool] = _never) -> bool:
        """At once if no hold is in force; else once it is released (True). False if `give_up` said so while the
        hold was still in force (the run's history is long: it continues as new, and the next run waits on)."""
        async with self._waiting:
            return await self._wait(give_up)

    async def _wait(self, give_up: Callable[[], bool]) -> bool:
        await self.refresh()
        while self.held:
            if give_up():
                return False
            try:
                # Woken by a signal, or by the answer a signal's handler asked for (the account deletion's).
                await workflow.wait_condition(
                    self._news_since(self._answers),
                    timeout=self._recheck_after,
                    timeout_summary=f"legal hold on account {self._account_id}: ask again (or on its release)",
                )
            except TimeoutError:
                # The periodic question: a release whose signal never came is seen here.
                self._stale = True
            await self.refresh()
        return True

    def _news_since(self, answered: int) -> Callable[[], bool]:
        """A signal came, or an answer after the `answered` first ones."""
        return lambda: self._stale or self._answers != answered
