"""Deleting one bot: every registered service at once, each in slices where the registry says it answers (its own
task queue, or a Nexus endpoint into its own namespace), pausable, with an operator path. The workflow names no
service: it calls those the registry held when the deletion began."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import timedelta

from temporalio import workflow
from temporalio.common import VersioningBehavior
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    CancelledError,
    ChildWorkflowError,
    FailureError,
    NexusOperationError,
)
from temporalio.exceptions import TimeoutError as CallTimeoutError

with workflow.unsafe.imports_passed_through():
    import workflows.activity_presets as presets
    import workflows.deletion.policies as policies
    import workflows.deletion.registered_calls as registered_calls
    import workflows.deletion.service_transport as transport
    from activities.deletion.records import DeletionRecords
    from lifecycle.deletion.contracts import (
        ACCOUNT_LANE_OPENED,
        MAX_BATCH_SIZE,
        MIN_BATCH_SIZE,
        TRANSIENT_ERROR,
        BotDeletionInput,
        BotDeletionResult,
        FinishBotDeletionInput,
        FinishBotDeletionResult,
        OperatorAction,
        ReceiptSubject,
        RegisteredService,
        ServiceProgress,
        ServiceVerification,
    )
    from lifecycle.deletion.legal_holds import LEGAL_HOLD_CHANGED
    from lifecycle.deletion.pace import Pace
    from lifecycle.deletion.registry import NOTHING_TO_REACH
    from lifecycle.deletion.workflow_types import BOT_DELETION_WORKFLOW
    from lifecycle.shared_contracts import AlertInput
    from lifecycle.statuses import DeletionState, strongest_throttle
    from workflows.deletion.account_lane import AccountLane
    from workflows.deletion.operator_gate import Decision
    from workflows.deletion.receipt_step import issue_receipt
    from workflows.deletion.workflow_base import DeletionWorkflowBase
    from workflows.sites.shield import uninterruptible


def is_transient(err: FailureError) -> bool:
    """Infrastructure, not the data: a service's database or object store out (its TransientError), or a worker
    that died or stalled mid-call (a timeout), on either transport.

    A run of worker kills exhausts a call's attempts with timeouts; that is no poison pill, so the workflow calls
    again, from the cursor the service last answered (its ledger counts what the lost calls deleted), instead of
    asking an operator.
    """
    cause = transport.cause_of(err)
    if isinstance(cause, CallTimeoutError):
        return True
    return isinstance(cause, ApplicationError) and cause.type == TRANSIENT_ERROR and not cause.non_retryable


def describe_progress(services: dict[str, ServiceProgress], status: str) -> str:
    """One line for the UI's current details, e.g.
    'search-index: 420,000 of 1,000,000 deleted; running; 20,000 rows/s, throttled: budget, done by 12:04:10Z'."""
    current = next((name for name, p in services.items() if not p.done), None)
    if current is None:
        done = sum(p.deleted for p in services.values())
        line = f"all services: {done:,} rows deleted; {status}"
    else:
        p = services[current]
        line = f"{current}: {p.deleted:,} of {p.total:,} deleted; {status}"
        if status == DeletionState.RUNNING and (pace := pace_of(services)).rows_per_second:
            throttled = f", throttled: {pace.throttled}" if pace.throttled else ""
            line += f"; {pace.rows_per_second:,} rows/s{throttled}"
            if (eta := pace.estimated_completion(workflow.now())) is not None:
                line += f", done by {eta:%H:%M:%S}Z"
    return line


def pace_of(services: dict[str, ServiceProgress]) -> Pace:
    """The pace of the services under way, as their last deleter calls measured it."""
    under_way = [p for p in services.values() if not p.done]
    return Pace(
        rows_per_second=sum(p.rows_per_second for p in under_way),
        remaining=sum(max(p.total - p.deleted, 0) for p in under_way),
        throttled=strongest_throttle(p.throttled for p in under_way),
    )


# Pinned: a run never meets new code mid-history; it runs for hours and continues as new at slice boundaries,
# where it moves to a new current version (_continue_as_new).
@workflow.defn(name=BOT_DELETION_WORKFLOW, versioning_behavior=VersioningBehavior.PINNED)
class BotDeletionWorkflow(DeletionWorkflowBase):
    @workflow.init
    def __init__(self, request: BotDeletionInput) -> None:
        super().__init__(
            request,
            # An account deletion's operator decided it for the account's bots (workflows/deletion/account.py).
            nothing_to_reach=any(action.action == NOTHING_TO_REACH for action in request.operator_actions),
        )
        # The registered services, once the first run has read them (run's first step); carried on after that.
        self._registry = request.registry
        registered = [service.name for service in self._registry.services] if self._registry else []
        self._progress = {s: replace(request.progress.get(s, ServiceProgress())) for s in registered}
        # What the registered services' VerifySubjectErased counted, for the receipt.
        self._verified: dict[str, ServiceVerification] = {}
        self._batch_size = request.batch_size
        self._operator_actions = list(request.operator_actions)
        self._lane = AccountLane(
            request.account_id,
            timedelta(seconds=request.account_lane_recheck_seconds),
            takes_one=request.takes_account_lane,
            held=request.holds_account_lane,
        )

    @workflow.run
    async def run(self, request: BotDeletionInput) -> BotDeletionResult:
        try:
            # First, in the run's first workflow task (local activities): a queued run costs its account's backlog
            # nothing more until it is let in.
            if not await self._lane.take(self._show_status, give_up=self._time_to_continue_as_new):
                await self._continue_as_new(request)
            # Asked before any other status, so a deletion of a held account shows `held`, never `running` first.
            await self._hold.refresh()
            self._set_status(self._open_status())
            if self._registry is None:
                await self._read_registry(request)
            rounds = 0
            while True:
                await self._delete_every_service(request)
                # Each service counts what it still holds (VerifySubjectErased): the services go around again if
                # some do. The gateway cannot look into their stores, so their own count is the check.
                remaining = await self._verify_registered_services(request)
                if not remaining:
                    break
                # A writer raced a service's deletion, or a service still holds something: delete those services
                # again, a bounded number of times.
                rounds += 1
                workflow.logger.warning("rows remain after deleting, round %d: %s", rounds, remaining)
                if rounds >= policies.FINISH_ROUNDS:
                    rounds = 0
                    if await self._ask_about_remaining(remaining) == Decision.SKIP:
                        self._skip(remaining)
                        continue
                for service in remaining:
                    # From the cursor the service last answered: after `done`, a service goes around its store
                    # again from wherever it sees fit (the project's services from the bottom, services/runtime/
                    # ledger.py), and its ledger keeps counting every row once.
                    self._progress[service] = replace(self._progress[service], done=False)
            # Not even the bot row goes while a hold is in force; a long hold continues as new, every service done.
            if not await self._hold.wait_until_released(give_up=self._time_to_continue_as_new):
                await self._continue_as_new(request)
            await self._finish(request)
            # A deletion that reached no service (an operator's nothing_to_reach) is `incomplete`, never
            # `completed`: nobody confirmed that nothing of the bot remains, and its receipt says so.
            final = DeletionState.INCOMPLETE if self._skipped() or not self._registered else DeletionState.COMPLETED
            await issue_receipt(
                ReceiptSubject.BOT,
                request.bot_id,
                request.account_id,
                self._operator_actions,
                list(self._verified.values()),
                list(self._registered.values()),
            )
        except (asyncio.CancelledError, ActivityError, NexusOperationError, ChildWorkflowError) as stop:
            # Wherever the cancel reached the run (a call, a wait, the hold's gate, the receipt), its stop is
            # recorded as it stops: the status never shows the run open after it closed.
            await self._recorder.record_if_cancelled(stop, self._set_status)
            if self._status == DeletionState.CANCELLED:
                await uninterruptible(self._lane.hand_on())
            raise
        self._set_status(final)
        await self._recorder.recorded()
        await self._lane.hand_on()
        return BotDeletionResult(bot_id=request.bot_id, services=self._progress, status=final)

    @property
    def _registered(self) -> dict[str, RegisteredService]:
        return {service.name: service for service in self._registry.services} if self._registry else {}

    async def _read_registry(self, request: BotDeletionInput) -> None:
        """Once per deletion: every later run and every replay calls the services this read found. An empty
        registry is waited on (workflows/deletion/registry_wait.py); a long wait continues as new, unread."""
        registry = await self._registry_wait.read(
            lambda: self._set_status(self._open_status()), give_up=self._time_to_continue_as_new
        )
        if registry is None:
            await self._continue_as_new(request)
            return
        self._registry = registry
        for service in self._registry.services:
            self._progress[service.name] = replace(self._registry.recorded.get(service.name, ServiceProgress()))
        self._registry.recorded = {}
        # The UI's current details name the services from now on, also while the run stays paused.
        self._publish_details()

    async def _delete_every_service(self, request: BotDeletionInput) -> None:
        # The services share nothing, so they are deleted side by side: one service's file unlinks
        # and another's DELETEs use the machine at once.
        await transport.side_by_side(self._delete_service(request, service) for service in self._progress)
        if not all(p.done for p in self._progress.values()):
            await self._continue_as_new(request)

    def _skipped(self) -> list[str]:
        return [name for name, p in self._progress.items() if p.skipped]

    def _finish_input(self, request: BotDeletionInput) -> FinishBotDeletionInput:
        return FinishBotDeletionInput(
            workflow_id=workflow.info().workflow_id,
            bot_id=request.bot_id,
            delete_bot_row=not self._skipped(),
            skipped_services=self._skipped(),
        )

    async def _finish(self, request: BotDeletionInput) -> FinishBotDeletionResult:
        return await workflow.execute_activity_method(
            DeletionRecords.finish_bot_deletion,
            self._finish_input(request),
            **presets.STEP,
            summary=f"remove bot row {request.bot_id}, record completion",
        )

    async def _delete_service(self, request: BotDeletionInput, service: str) -> None:
        """Slices until the service is done, or until it is time to continue as new."""
        while not self._progress[service].done:
            await workflow.wait_condition(lambda: not self._paused)
            # A batch boundary: a legal hold placed meanwhile stops the deletion here until its release.
            await self._hold.wait_until_released(give_up=self._time_to_continue_as_new)
            if self._time_to_continue_as_new():
                return
            if self._paused:  # paused while it was held
                continue
            await self._delete_slice(request, service)

    async def _delete_slice(self, request: BotDeletionInput, service: str) -> None:
        assert self._registry is not None
        try:
            self._progress[service] = await registered_calls.delete_slice(
                self._registered[service],
                registered_calls.bot_subject(request.bot_id),
                self._progress[service],
                batch_rows=self._batch_size,
                rows_per_second=registered_calls.rows_per_second(self._registry, service, self._deleting()),
            )
            await self._record_service(service, answered=True)
        except transport.ServiceCallError as err:
            await self._after_failure(service, "deleting", err)
        except transport.EndpointMissing:
            await self._wait_for_endpoint(service)
        self._publish_details()

    async def _wait_for_endpoint(self, service: str) -> None:
        """The service's Nexus endpoint does not exist (yet): it shows waiting, as a service no worker of which
        takes its calls does, and is asked about again after a while, until an operator creates it (or retires the
        service)."""
        await self._waiting_for(service)
        await workflow.sleep(transport.ENDPOINT_RECHECK)

    async def _after_failure(self, service: str, doing: str, err: FailureError) -> None:
        """A failed call of a service: wait for its worker, call again, or ask an operator (poison pill)."""
        if isinstance(err.cause, CancelledError):
            # The workflow itself is being cancelled: end as cancelled, not as a poison pill.
            raise asyncio.CancelledError() from err
        if transport.no_worker_took_it(err):
            # The service's worker is down: call again without end; the status shows it waiting.
            await self._waiting_for(service)
            return
        if is_transient(err):
            # Another round of backoff: transient failures retry without end, from where the call got to.
            workflow.logger.warning("transient failure %s %s; retrying: %s", doing, service, transport.cause_of(err))
            return
        alert = AlertInput(
            workflow_id=workflow.info().workflow_id,
            subject=f"bot deletion stuck on {service}",
            reason=str(transport.cause_of(err) or err),
        )
        if await self._ask(service, alert) == Decision.SKIP:
            self._skip([service])

    async def _record_service(self, service: str, *, answered: bool) -> None:
        assert self._registry is not None
        await registered_calls.record(self._registry, service, self._progress[service], answered=answered)

    def _deleting(self) -> list[str]:
        """The services still at work, which share the budget (a service done leaves its share to the others)."""
        return [name for name, progress in self._progress.items() if not progress.done]

    async def _waiting_for(self, service: str) -> None:
        """Shows the service as waiting, from the first call no worker took until one answers; leaves it once an
        operator retired it: an operator's decision, on the receipt as `retire`, with what the service still holds
        not counted (activities/deletion/receipts.py), never a silent skip."""
        if await registered_calls.retired(service):
            workflow.logger.warning("%s was retired while this deletion waited for it; leaving it", service)
            self._record("retire", service)
            self._skip([service])
            await self._record_service(service, answered=False)
            return
        if self._progress[service].waiting_since is not None:
            return
        workflow.logger.warning("no worker of %s takes its calls; waiting for one", service)
        self._progress[service] = replace(self._progress[service], waiting_since=workflow.now().isoformat())
        await self._record_service(service, answered=False)

    async def _verify_registered_services(self, request: BotDeletionInput) -> list[str]:
        """The services that still hold something of the bot, by their own count, but for those an operator
        skipped: counted too, so the receipt says what they keep, but never deleted again."""
        await transport.side_by_side(self._verify(request, service) for service in self._registered.values())
        return [
            name
            for name in self._registered
            if not self._progress[name].skipped
            and (found := self._verified.get(name)) is not None
            and found.remaining_rows + found.remaining_files
        ]

    async def _verify(self, request: BotDeletionInput, service: RegisteredService) -> None:
        while True:
            try:
                self._verified[service.name] = await registered_calls.verify(
                    service, registered_calls.bot_subject(request.bot_id)
                )
            except (*transport.ServiceCallError, transport.EndpointMissing) as err:
                if self._progress[service.name].skipped:
                    # An operator left this service: what it keeps goes uncounted rather than asked about again.
                    return
                if isinstance(err, transport.EndpointMissing):
                    await self._wait_for_endpoint(service.name)
                else:
                    await self._after_failure(service.name, "verifying", err)
                continue
            if self._progress[service.name].waiting_since is not None:
                self._progress[service.name] = replace(self._progress[service.name], waiting_since=None)
            await self._record_service(service.name, answered=True)
            return

    async def _ask_about_remaining(self, remaining: list[str]) -> Decision:
        services = ", ".join(remaining)
        alert = AlertInput(
            workflow_id=workflow.info().workflow_id,
            subject="bot deletion: rows keep arriving",
            reason=f"rows of {services} remained after {policies.FINISH_ROUNDS} rounds of deleting",
        )
        return await self._ask(services, alert)

    def _skip(self, services: list[str]) -> None:
        for service in services:
            self._progress[service] = replace(self._progress[service], done=True, skipped=True)

    async def _continue_as_new(self, request: BotDeletionInput) -> None:
        """Called once every service has stopped at a slice boundary, so no deleter call is in flight."""
        # The next run records its own status; this one's last change goes in first, never after it.
        await self._recorder.recorded()
        self._continue_on_current_version(
            replace(
                request,
                batch_size=self._batch_size,
                progress=self._progress,
                paused=self._paused,
                operator_actions=self._operator_actions,
                registry=self._registry,
                no_service_alerted=self._registry_wait.alerted,
                holds_account_lane=self._lane.held,
            )
        )

    def _open_status(self) -> DeletionState:
        """A turn in the account's lanes shows first (a held account's deletion that has one waits `held`)."""
        return DeletionState.QUEUED if self._lane.queued else super()._open_status()

    def _details(self) -> str:
        return describe_progress(self._progress, self._shown_status)

    def _services(self) -> dict[str, ServiceProgress]:
        return self._progress

    def _pace(self) -> Pace:
        return pace_of(self._progress) if self._status == DeletionState.RUNNING else Pace()

    def _record(self, action: str, target: str | None = None) -> None:
        """An operator's message the run acts on, for the receipt."""
        self._operator_actions.append(OperatorAction(action, workflow.now().isoformat(), target))

    def _answer(self, decision: Decision, waiting_on: str) -> str:
        if decision == Decision.SKIP:
            return f"skipping {waiting_on}; its rows and the bot row stay"
        return f"retrying {waiting_on}"

    @workflow.signal(name=ACCOUNT_LANE_OPENED)
    def account_lane_opened(self) -> None:
        """Another deletion of the account let this one into a lane."""
        self._lane.opened()

    @workflow.signal(name=LEGAL_HOLD_CHANGED)
    def legal_hold_changed(self) -> None:
        """The API placed or released a hold on the account: asked again at the next batch boundary."""
        self._hold.changed()

    def _took_nothing_to_reach(self, action: OperatorAction) -> None:
        self._operator_actions.append(action)

    @workflow.update
    def set_batch_size(self, size: int) -> int:
        """Rows per DELETE from the next slice on; allowed at any time, typically while paused."""
        self._batch_size = size
        return size

    @set_batch_size.validator
    def _validate_batch_size(self, size: int) -> None:
        if not MIN_BATCH_SIZE <= size <= MAX_BATCH_SIZE:
            raise ValueError(f"batch size must be between {MIN_BATCH_SIZE} and {MAX_BATCH_SIZE}, got {size}")
