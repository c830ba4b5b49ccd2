"""Deleting one bot: every service's rows at once, each in slices of batches, pausable, with an operator path."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError

with workflow.unsafe.imports_passed_through():
    from lifecycle.contracts import (
        DELETION_SERVICES,
        MAX_BATCH_SIZE,
        MIN_BATCH_SIZE,
        TRANSIENT_ERROR,
        AlertInput,
        BotDeletionInput,
        BotDeletionResult,
        DeleteServiceInput,
        DeletionStatus,
        FinishBotDeletionInput,
        ServiceProgress,
    )
    from lifecycle.search_attributes import LIFECYCLE_STATUS
    from lifecycle.workflow_types import BOT_DELETION_WORKFLOW
    from workflows import policies

RETRY = "retry"
SKIP = "skip"


def is_transient(err: ActivityError) -> bool:
    cause = err.cause
    return isinstance(cause, ApplicationError) and cause.type == TRANSIENT_ERROR and not cause.non_retryable


def _progress_carried_by(err: ActivityError, known: ServiceProgress) -> ServiceProgress:
    """A deleter that failed transiently reports how far it got; never step back from what is known."""
    cause = err.cause
    if not isinstance(cause, ApplicationError) or not cause.details:
        return known
    reported = cause.details[0]
    if isinstance(reported, dict):
        reported = ServiceProgress(**reported)
    if not isinstance(reported, ServiceProgress) or reported.deleted < known.deleted:
        return known
    return reported


def describe_progress(services: dict[str, ServiceProgress], status: str) -> str:
    """One line for the UI's current details, e.g. 'messages: 420,000 of 1,000,000 deleted; paused'."""
    current = next((name for name, p in services.items() if not p.done), None)
    if current is None:
        done = sum(p.deleted for p in services.values())
        return f"all services: {done:,} rows deleted; {status}"
    p = services[current]
    return f"{current}: {p.deleted:,} of {p.total:,} deleted; {status}"


@workflow.defn(name=BOT_DELETION_WORKFLOW)
class BotDeletionWorkflow:
    @workflow.init
    def __init__(self, request: BotDeletionInput) -> None:
        self._progress = {s: replace(request.progress.get(s, ServiceProgress())) for s in DELETION_SERVICES}
        self._paused = request.paused
        self._batch_size = request.batch_size
        self._status = ""
        self._waiting_on: str | None = None
        self._decision: str | None = None
        self._operator = asyncio.Lock()

    @workflow.run
    async def run(self, request: BotDeletionInput) -> BotDeletionResult:
        self._set_status("paused" if self._paused else "running")
        try:
            # The services share nothing, so they are deleted side by side: one service's file unlinks
            # and another's DELETEs use the machine at once.
            await asyncio.gather(*(self._delete_service(request, service) for service in DELETION_SERVICES))
            if not all(p.done for p in self._progress.values()):
                self._continue_as_new(request)
            await workflow.execute_activity(
                "finish_bot_deletion",
                FinishBotDeletionInput(
                    workflow_id=workflow.info().workflow_id,
                    bot_id=request.bot_id,
                    delete_bot_row=not any(p.skipped for p in self._progress.values()),
                ),
                start_to_close_timeout=policies.STEP_TIMEOUT,
                retry_policy=policies.STEP_RETRY,
                summary=f"remove bot row {request.bot_id}, record completion",
            )
        except asyncio.CancelledError:
            self._set_status("cancelled")
            raise
        self._set_status("completed")
        return BotDeletionResult(bot_id=request.bot_id, services=self._progress)

    async def _delete_service(self, request: BotDeletionInput, service: str) -> None:
        """Slices until the service is done, or until the history is long enough to continue as new."""
        while not self._progress[service].done:
            await workflow.wait_condition(lambda: not self._paused)
            if self._history_is_long(request):
                return
            await self._delete_slice(request, service)

    async def _delete_slice(self, request: BotDeletionInput, service: str) -> None:
        try:
            self._progress[service] = await workflow.execute_activity(
                "delete_bot_service",
                DeleteServiceInput(
                    workflow_id=workflow.info().workflow_id,
                    bot_id=request.bot_id,
                    service=service,
                    batch_size=self._batch_size,
                    progress=self._progress[service],
                ),
                result_type=ServiceProgress,
                start_to_close_timeout=policies.DELETER_START_TO_CLOSE,
                heartbeat_timeout=policies.DELETER_HEARTBEAT,
                retry_policy=policies.DELETER_RETRY,
                summary=f"delete {service} of bot {request.bot_id}",
            )
        except ActivityError as err:
            if isinstance(err.cause, CancelledError):
                # The workflow itself is being cancelled: end as cancelled, not as a poison pill.
                raise asyncio.CancelledError() from err
            if is_transient(err):
                # Another round of backoff: transient failures retry without end, from where the call got to.
                workflow.logger.warning("transient failure deleting %s; retrying: %s", service, err.cause)
                self._progress[service] = _progress_carried_by(err, self._progress[service])
                return
            # One operator question at a time: the signals act on the single service in `waiting_on`.
            async with self._operator:
                await self._wait_for_operator(service, err)
        self._publish_details()

    async def _wait_for_operator(self, service: str, err: ActivityError) -> None:
        await workflow.execute_activity(
            "raise_alert",
            AlertInput(
                workflow_id=workflow.info().workflow_id,
                subject=f"bot deletion stuck on {service}",
                reason=str(err.cause or err),
            ),
            start_to_close_timeout=policies.STEP_TIMEOUT,
            retry_policy=policies.STEP_RETRY,
            summary=f"alert: {service} deletion needs an operator",
        )
        self._waiting_on = service
        self._set_status("waiting_for_operator")
        await workflow.wait_condition(lambda: self._decision is not None)
        if self._decision == SKIP:
            self._progress[service] = replace(self._progress[service], done=True, skipped=True)
        self._decision = None
        self._waiting_on = None
        self._set_status("paused" if self._paused else "running")

    @staticmethod
    def _history_is_long(request: BotDeletionInput) -> bool:
        info = workflow.info()
        return (
            info.get_current_history_length() >= request.continue_as_new_after_events
            or info.is_continue_as_new_suggested()
        )

    def _continue_as_new(self, request: BotDeletionInput) -> None:
        """Called once every service has stopped at a slice boundary, so no deleter call is in flight."""
        workflow.continue_as_new(
            replace(request, batch_size=self._batch_size, progress=self._progress, paused=self._paused)
        )

    def _set_status(self, status: str) -> None:
        if status != self._status:
            self._status = status
            workflow.upsert_search_attributes([LIFECYCLE_STATUS.value_set(status)])
        self._publish_details()

    def _publish_details(self) -> None:
        workflow.set_current_details(describe_progress(self._progress, self._status))

    @workflow.signal
    def pause(self) -> None:
        """Stop after the current slice of batches (at most DELETER_SLICE)."""
        self._paused = True
        if self._waiting_on is None:
            self._set_status("paused")

    @workflow.signal
    def resume(self) -> None:
        self._paused = False
        if self._waiting_on is None:
            self._set_status("running")

    @workflow.signal
    def retry(self) -> None:
        """Operator: call the stuck service's deleter again."""
        if self._waiting_on is not None:
            self._decision = RETRY

    @workflow.signal
    def skip(self) -> None:
        """Operator: leave the stuck service's rows (and so the bot row) in place and go on."""
        if self._waiting_on is not None:
            self._decision = SKIP

    @workflow.query
    def progress(self) -> DeletionStatus:
        return DeletionStatus(
            status=self._status,
            services=self._progress,
            batch_size=self._batch_size,
            waiting_on=self._waiting_on,
        )

    @workflow.update
    def set_batch_size(self, size: int) -> int:
        """Rows per DELETE from the next slice on; allowed at any time, typically while paused."""
        self._batch_size = size
        return size

    @set_batch_size.validator
    def _validate_batch_size(self, size: int) -> None:
        if not MIN_BATCH_SIZE <= size <= MAX_BATCH_SIZE:
            raise ValueError(f"batch size must be between {MIN_BATCH_SIZE} and {MAX_BATCH_SIZE}, got {size}")
