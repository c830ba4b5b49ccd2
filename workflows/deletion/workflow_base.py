"""What the bot and the account deletion workflows share: the status a run records and publishes, the operator's
`pause`, `resume`, `retry` and `skip`, the `progress` query, and when a run continues as new.

A workflow says where it differs through a few overrides: its open status (`_open_status`, `_show_status`), its
current details (`_details`), what the query counts (`_services`, `_pace`), what it keeps of an operator's
messages (`_record`, `_set_paused`), what an update answers (`_answer`), and where an operator's decision goes
when the run itself asks nothing (`_unasked`, `_refusal`). The message names and payloads are the operators' and
the API's contract, the same for both workflow types.

The handlers are coroutines; one that never awaits runs to its end at once, as a plain function would, so a
workflow whose overrides do not await issues its commands where a synchronous handler would.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import NoReturn

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from lifecycle.deletion.contracts import (
        AccountDeletionInput,
        BotDeletionInput,
        DeletionStatus,
        ServiceProgress,
    )
    from lifecycle.deletion.pace import Pace
    from lifecycle.deletion.registry import NO_SERVICE_REGISTERED
    from lifecycle.search_attributes import LIFECYCLE_STATUS
    from lifecycle.shared_contracts import AlertInput
    from lifecycle.statuses import DeletionState
    from workflows.deletion.legal_hold import LegalHoldGate
    from workflows.deletion.operator_gate import Decision, OperatorGate
    from workflows.deletion.registry_wait import RegistryMessages, RegistryWait
    from workflows.deletion.status_recorder import StatusRecorder


class DeletionWorkflowBase(RegistryMessages):
    # Rows per DELETE, as the query shows it: the bot deletion's own; an account deletion has none (its bots do).
    _batch_size = 0

    def __init__(self, request: BotDeletionInput | AccountDeletionInput, *, nothing_to_reach: bool) -> None:
        # An operator's pause outlives continue-as-new (the input's `paused`).
        self._paused = request.paused
        self._continue_as_new_after = request.continue_as_new_after_events
        # None until the run's first step publishes one as the search attribute and records it.
        self._status: DeletionState | None = None
        self._recorder = StatusRecorder()
        self._gate = OperatorGate()
        # One operator question at a time: the operator's signals and updates act on the single thing in `waiting_on`.
        self._asking = asyncio.Lock()
        self._hold = LegalHoldGate(
            request.account_id, timedelta(seconds=request.legal_hold_recheck_seconds), self._show_status
        )
        self._registry_wait = RegistryWait(
            timedelta(seconds=request.registry_recheck_seconds),
            timedelta(seconds=request.registry_settle_seconds),
            nothing_to_reach=nothing_to_reach,
            alerted=request.no_service_alerted,
        )

    def _time_to_continue_as_new(self) -> bool:
        """The history is long, or a new version became current (the next run starts on it)."""
        info = workflow.info()
        return (
            info.get_current_history_length() >= self._continue_as_new_after
            or info.is_continue_as_new_suggested()
            or info.is_target_worker_deployment_version_changed()
        )

    @staticmethod
    def _continue_on_current_version(next_input: BotDeletionInput | AccountDeletionInput) -> NoReturn:
        # The next run starts on the current version, not pinned to this one: how a long deletion upgrades.
        workflow.continue_as_new(
            next_input, initial_versioning_behavior=workflow.ContinueAsNewVersioningBehavior.AUTO_UPGRADE
        )

    def _open_status(self) -> DeletionState:
        """The status while no operator question waits: a legal hold shows first, then a wait for a deletion
        service, before an operator's pause."""
        if self._hold.held:
            return DeletionState.HELD
        if self._registry_wait.waiting:
            return DeletionState.WAITING
        return DeletionState.PAUSED if self._paused else DeletionState.RUNNING

    @property
    def _shown_status(self) -> DeletionState:
        return self._status or self._open_status()

    def _show_status(self) -> None:
        """Show the open status as it changed, unless an operator question waits (it shows `waiting_for_operator`)."""
        if self._gate.waiting_on is None:
            self._set_status(self._open_status())

    def _set_status(self, status: DeletionState) -> None:
        if status != self._status:
            self._record_status(status)
        self._publish_details()

    def _record_status(self, status: DeletionState) -> None:
        """Publish `status` as the search attribute and record it in PostgreSQL."""
        self._status = status
        workflow.upsert_search_attributes([LIFECYCLE_STATUS.value_set(status.value)])
        # `waiting` is the only open status with a reason: no service to reach yet.
        self._recorder.set(status, NO_SERVICE_REGISTERED if status == DeletionState.WAITING else None)

    def _details(self) -> str:
        """The run's current details, as the UI shows them."""
        raise NotImplementedError

    def _publish_details(self) -> None:
        line = self._details()
        workflow.set_current_details(f"{line}; {self._gate.ignored}" if self._gate.ignored else line)

    def _services(self) -> dict[str, ServiceProgress]:
        """What the progress query counts per service."""
        raise NotImplementedError

    def _pace(self) -> Pace:
        """How fast the run deletes now, for the progress query; unmeasured unless a workflow measures it."""
        return Pace()

    async def _ask(self, waiting_on: str, alert: AlertInput) -> Decision:
        """An operator's `retry` or `skip` on `waiting_on`, shown as `waiting_for_operator` until it comes."""
        async with self._asking:
            decision = await self._gate.ask(
                waiting_on, alert, lambda: self._set_status(DeletionState.WAITING_FOR_OPERATOR)
            )
            self._set_status(self._open_status())
            return decision

    def _record(self, action: str, target: str | None = None) -> None:
        """An operator's message the run acts on, for a receipt that lists them; kept by those that do."""

    async def _set_paused(self, paused: bool) -> None:
        self._record("pause" if paused else "resume")
        self._paused = paused
        self._show_status()

    async def _decide(self, decision: Decision) -> str:
        """The run's own question takes `decision` if one waits; else `_unasked` has it."""
        waiting_on = self._gate.waiting_on
        if waiting_on is None:
            return await self._unasked(decision)
        self._record(decision.value, waiting_on)
        self._gate.deliver(decision)
        self._publish_details()
        return self._answer(decision, waiting_on)

    async def _unasked(self, decision: Decision) -> str:
        """A decision while nothing waits for one: logged and shown as ignored."""
        self._gate.deliver(decision)
        self._publish_details()
        return f"ignored: {self._gate.ignored}"

    def _answer(self, decision: Decision, waiting_on: str) -> str:
        """What the update answers once the run's own question took `decision`."""
        return f"{decision}: {waiting_on}"

    def _refusal(self, decision: Decision) -> str | None:
        """Why an update `decision` is refused now, or None if it would be taken."""
        return self._gate.refusal(decision)

    def _validate(self, decision: Decision) -> None:
        if (refused := self._refusal(decision)) is not None:
            raise ValueError(refused)

    @workflow.signal
    async def pause(self) -> None:
        """Stop after the current slice of batches (at most DELETER_SLICE); an account deletion's bots do, and its
        new ones start paused."""
        await self._set_paused(True)

    @workflow.signal
    async def resume(self) -> None:
        await self._set_paused(False)

    @workflow.signal
    async def retry(self) -> None:
        """Operator: go on with what waits for an operator, calling a stuck service again or going around again
        (ignored, logged and shown if nothing waits)."""
        await self._decide(Decision.RETRY)

    @workflow.signal
    async def skip(self) -> None:
        """Operator: leave what waits for an operator in place and go on; the deletion ends `incomplete`."""
        await self._decide(Decision.SKIP)

    @workflow.update(name="retry")
    async def retry_update(self) -> str:
        """`retry` that answers: refused by the validator while nothing can take it."""
        return await self._decide(Decision.RETRY)

    @retry_update.validator
    def _validate_retry(self) -> None:
        self._validate(Decision.RETRY)

    @workflow.update(name="skip")
    async def skip_update(self) -> str:
        """`skip` that answers: refused by the validator while nothing can take it."""
        return await self._decide(Decision.SKIP)

    @skip_update.validator
    def _validate_skip(self) -> None:
        self._validate(Decision.SKIP)

    @workflow.query
    def progress(self) -> DeletionStatus:
        pace = self._pace()
        eta = pace.estimated_completion(workflow.now())
        return DeletionStatus(
            status=self._shown_status,
            services=self._services(),
            batch_size=self._batch_size,
            waiting_on=self._gate.waiting_on,
            ignored_message=self._gate.ignored,
            rows_per_second=pace.rows_per_second,
            throttled=pace.throttled,
            estimated_completion=None if eta is None else eta.isoformat(),
        )
