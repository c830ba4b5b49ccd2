"""Where a deletion waits for an operator: `retry` and `skip`, as signals (for tctl) and as updates that answer.

The run shows `waiting_for_operator` before the alert goes out, and the alert never holds the run up: it is
recorded and delivered in the background (activities/alerts.py), while the run already listens.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from enum import StrEnum

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    import workflows.activity_presets as presets
    from activities.alerts import Alerts
    from lifecycle.shared_contracts import AlertInput


class Decision(StrEnum):
    RETRY = "retry"
    SKIP = "skip"


class OperatorGate:
    def __init__(self) -> None:
        # What the run waits on (a service, or what remains), None while nothing waits.
        self.waiting_on: str | None = None
        # The last message that arrived while nothing waited: logged, and shown in the run's details.
        self.ignored: str | None = None
        self._decision: Decision | None = None

    def refusal(self, decision: Decision) -> str | None:
        """Why an update `decision` is refused now, or None if it would be taken."""
        if self.waiting_on is None:
            return f"nothing is waiting for an operator: {decision} refused"
        if self._decision is not None:
            return f"{self._decision} was already sent for {self.waiting_on}"
        return None

    def deliver(self, decision: Decision) -> bool:
        """Take a signal's or an update's decision; one that arrives while nothing waits is kept as ignored."""
        refused = self.refusal(decision)
        if refused is not None:
            workflow.logger.warning("operator message ignored: %s", refused)
            self.ignored = refused
            return False
        self._decision = decision
        return True

    async def ask(self, waiting_on: str, alert: AlertInput, announce: Callable[[], None]) -> Decision:
        """Wait for `retry` or `skip`; `announce` publishes the waiting status before the alert is raised."""
        self.waiting_on = waiting_on
        self.ignored = None
        announce()
        raising = workflow.start_activity_method(
            Alerts.raise_alert,
            alert,
            **presets.OPERATOR_ALERT,
            summary=f"alert: {alert.subject}",
        )
        raising.add_done_callback(log_alert_failure)
        await workflow.wait_condition(lambda: self._decision is not None)
        decision = self._decision
        assert decision is not None
        self._decision = None
        self.waiting_on = None
        return decision


def log_alert_failure(raising: asyncio.Future[None]) -> None:
    # The run goes on regardless: it already shows the status the alert is about.
    if not raising.cancelled() and raising.exception() is not None:
        workflow.logger.error("the alert could not be recorded: %s", raising.exception())
