"""A deletion run records each status it enters in PostgreSQL (deletion_requests.status), where the API and the
streams read it: scheduled, running, paused, waiting (with its reason), waiting for an operator, and how it ends.

Changes are recorded one at a time, in the order the run made them, from a task of its own: a signal handler
changes the status without waiting, and a pause and a resume that arrive together cost one write, or none. A
run waits for the record before it ends or continues as new, so a closed run's status is always recorded.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from temporalio import workflow
from temporalio.exceptions import is_cancelled_exception

with workflow.unsafe.imports_passed_through():
    import workflows.activity_presets as presets
    from activities.deletion.records import DeletionRecords
    from lifecycle.shared_contracts import DeletionStatusChange
    from lifecycle.statuses import DeletionState
    from workflows.sites.shield import uninterruptible


# A status, and why the deletion is in it where the status alone does not say (deletion_requests.status_reason).
Recorded = tuple[DeletionState, str | None]


class StatusRecorder:
    def __init__(self) -> None:
        self._wanted: Recorded | None = None
        self._recorded: Recorded | None = None
        self._writer: asyncio.Task[None] | None = None

    def set(self, status: DeletionState, reason: str | None = None) -> None:
        """Record `status` (and its `reason`) soon; only the latest of several changes in a row is written."""
        self._wanted = (status, reason)
        if self._writer is None:
            self._writer = asyncio.create_task(self._write())

    def is_recorded(self) -> bool:
        return self._recorded == self._wanted

    async def recorded(self) -> None:
        """Until the latest status is in the database."""
        await workflow.wait_condition(self.is_recorded)

    async def record_if_cancelled(self, stop: BaseException, set_status: Callable[[DeletionState], None]) -> None:
        """Record `cancelled` (with the run's `set_status`, which also publishes it) if `stop` is the run's own
        cancel, wherever it reached the run: a wait, a call (an ActivityError), a child (a ChildWorkflowError).
        Waited for whatever further cancellations reach the run meanwhile, so the run closes only once it is in."""
        if workflow.cancellation_reason() is None or not is_cancelled_exception(stop):
            return
        set_status(DeletionState.CANCELLED)
        await uninterruptible(self.recorded())

    async def _write(self) -> None:
        while True:
            await workflow.wait_condition(lambda: self._recorded != self._wanted)
            wanted = self._wanted
            assert wanted is not None
            status, reason = wanted
            await workflow.execute_local_activity_method(
                DeletionRecords.record_deletion_status,
                DeletionStatusChange(workflow_id=workflow.info().workflow_id, status=status, reason=reason),
                **presets.DELETION_STATUS,
                summary=f"record status {status}" + (f": {reason}" if reason else ""),
            )
            self._recorded = wanted
