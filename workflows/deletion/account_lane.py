"""A DELETE /bots deletion takes one of its account's lanes before it reaches any service, and waits `queued`
until it has one (activities/deletion/account_lanes.py).

The bound is what keeps one account's mass deletion from delaying everyone else's work end to end: task-queue
fairness orders the activities and a run's first workflow task by account, but a run's later workflow tasks
queue first in, first out on the worker's sticky queue, where only fewer runs at once help. A queued run holds no
slot and makes no workflow task while it waits: it is woken by the signal of the run that let it in, and by a
durable timer besides, for a lane freed without a signal (a terminated run).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import FailureError

with workflow.unsafe.imports_passed_through():
    import workflows.activity_presets as presets
    from activities.deletion.account_lanes import AccountLanes
    from lifecycle.deletion.contracts import ACCOUNT_LANE_OPENED, AccountLaneRequest


class AccountLane:
    def __init__(self, account_id: str, recheck: timedelta, *, takes_one: bool, held: bool) -> None:
        self._account_id = account_id
        self._recheck = recheck
        self._takes_one = takes_one
        # The run holds its lane (taken by this run or one it continued from, or one that needs none).
        self.held = held or not takes_one
        self.queued = False
        self._opened = False

    def opened(self) -> None:
        """The signal of the run that let this one into a lane: ask now rather than at the next timer."""
        self._opened = True

    async def take(self, show_status: Callable[[], None], give_up: Callable[[], bool]) -> bool:
        """True once the run holds a lane (at once for a run that takes none); False if `give_up` (time to
        continue as new) while it waits. `show_status` publishes `queued` as the run begins to wait."""
        if self.held:
            return True
        while True:
            # Cleared before asking, so a signal that arrives while the answer comes back is not lost.
            self._opened = False
            answer = await workflow.execute_local_activity_method(
                AccountLanes.take_account_lane,
                AccountLaneRequest(workflow_id=workflow.info().workflow_id, account_id=self._account_id),
                **presets.ACCOUNT_LANE,
                summary="take one of the account's deletion lanes",
            )
            await _tell(answer.opened_for)
            if answer.taken or give_up():
                break
            if not self.queued:
                self.queued = True
                show_status()
            # A timeout is the recheck: the lane is asked for again either way.
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(
                    lambda: self._opened, timeout=self._recheck, timeout_summary="ask for an account lane again"
                )
        # The caller shows the status it goes on in: `held`, say, never `running` first.
        self.queued = False
        self.held = answer.taken
        return answer.taken

    async def hand_on(self) -> None:
        """Once the run's closed status is recorded (which frees its lane): let the next of the account's
        deletions in, and tell them."""
        if not self._takes_one:
            return
        opened = await workflow.execute_local_activity_method(
            AccountLanes.open_account_lanes,
            self._account_id,
            **presets.ACCOUNT_LANE,
            summary="let the account's next deletions into their lanes",
        )
        await _tell(opened)


async def _tell(workflow_ids: list[str]) -> None:
    async def signal(workflow_id: str) -> None:
        try:
            await workflow.get_external_workflow_handle(workflow_id).signal(ACCOUNT_LANE_OPENED)
        except FailureError as err:
            # Closed meanwhile: it needs no lane any more.
            workflow.logger.info("%s was not told of its lane: %s", workflow_id, err)

    await asyncio.gather(*(signal(workflow_id) for workflow_id in workflow_ids))
