"""Site creation as a saga: each step registers its undo before it runs; a failure or a cancellation
undoes, in reverse order, the finished steps and the one in flight.

Each forward step, and the site-ready email, runs through `first_try_here` (workflows/sites/first_try.py): once
inside the workflow task, then, if need be, as a regular activity with its retries, which the saga acts on.

A database step whose server does not answer moves the site to another healthy server when the step never touched
that server, and runs there at once; otherwise the step waits for its server.

Safe under resets: every step answers the site's status, and a run that finds the site settled (active,
rolled back, deleted, being deleted) finishes as that status without building or undoing anything; one that
finds a rollback interrupted (rolling back, rollback failed) finishes the rollback. Undos run only while the
site is rolling back, so they never touch a site that lives or that another run settled.

Compensation runs to the end: an undo that fails for good is recorded and the remaining undos still run; the
domain is freed only when every other undo succeeded. Otherwise the site ends `rollback_failed` and the run
waits for an operator's `retry` (an update; a signal too, for tctl), which runs the failed undos again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import VersioningBehavior
from temporalio.exceptions import ActivityError, ApplicationError, is_cancelled_exception

with workflow.unsafe.imports_passed_through():
    import workflows.activity_presets as presets
    from activities.alerts import Alerts
    from activities.sites.steps import SiteActivities
    from lifecycle.search_attributes import LIFECYCLE_STATUS
    from lifecycle.shared_contracts import AlertInput
    from lifecycle.sites.contracts import (
        SERVER_BACK_SIGNAL,
        SITE_STEPS,
        SiteCreationInput,
        SiteMove,
        SiteProgress,
        SiteRef,
        SiteRollbackFailure,
        SiteRollbackInput,
    )
    from lifecycle.sites.errors import NO_DATABASE_SERVER_ERROR, SERVER_UNREACHABLE_ERROR, SiteErrorCode, step_failed
    from lifecycle.sites.workflow_types import SITE_CREATION_WORKFLOW
    from lifecycle.statuses import SiteStatus, StepStatus
    from workflows.sites.first_try import first_try_here
    from workflows.sites.shield import cancel_pending, uninterruptible
    from workflows.sites.steps import ALL_STEPS, BOOTSTRAP, DATABASE, FILESYSTEM, METADATA, SiteStep

# A step whose site-database server does not answer runs again after 1 s, then 1.5, 2.25, … up to a minute
# between tries, for as long as the outage lasts, or at once when the health check signals the server back: a blip
# costs seconds, and about 11 history events a minute once at the cap, so a run could wait about three days before
# nearing Temporal's 50,000-event limit.
_SERVER_WAIT_FIRST = timedelta(seconds=1)
_SERVER_WAIT_GROWTH = 1.5
_SERVER_WAIT_CAP = timedelta(minutes=1)

# A rollback that a reset or a terminate interrupted: this run finishes it.
_ROLLBACK_INTERRUPTED = (SiteStatus.ROLLING_BACK, SiteStatus.ROLLBACK_FAILED)


class _UndoFailed(Exception):
    def __init__(self, step: SiteStep, cause: str) -> None:
        super().__init__(f"{step.name} undo failed: {cause}")
        self.step = step


# Pinned: a run takes seconds to minutes (a failed rollback waits for an operator), so it ends on its version.
@workflow.defn(name=SITE_CREATION_WORKFLOW, versioning_behavior=VersioningBehavior.PINNED)
class SiteCreationWorkflow:
    def __init__(self) -> None:
        self._status = SiteStatus.PROVISIONING
        self._steps: dict[str, StepStatus] = dict.fromkeys(SITE_STEPS, StepStatus.PENDING)
        self._error: str | None = None  # the cause, for the operator (details, the progress query)
        self._error_code = SiteErrorCode.FAILED  # what the customer is told
        self._undos: list[SiteStep] = []
        self._failed_step: str | None = None
        self._waiting_for_retry = False
        self._retry_requested = False
        self._note: str | None = None
        self._waiting_for_server: str | None = None
        self._server_back = False

    @workflow.query(name="progress")
    def progress(self) -> SiteProgress:
        return SiteProgress(status=self._status, steps=dict(self._steps), error=self._error)

    @workflow.update(name="retry")
    def retry(self) -> str:
        self._retry_requested = True
        return "running the failed undos again"

    @retry.validator
    def _retry_only_when_waiting(self) -> None:
        if not self._waiting_for_retry:
            raise ValueError(f"nothing waits for a retry: the site is {self._status}")

    @workflow.signal(name="retry")
    def retry_signal(self) -> None:
        """For tctl users; unlike the update, a signal cannot be refused, so an unneeded one is logged."""
        if self._waiting_for_retry:
            self._retry_requested = True
            return
        self._note = f"a retry signal arrived while nothing waited (site {self._status}); it was ignored"
        workflow.logger.warning(self._note)
        self._publish()

    @workflow.signal(name=SERVER_BACK_SIGNAL)
    def server_back(self) -> None:
        """The health check saw the site's server answer again: a step waiting for it tries now."""
        self._server_back = True

    @workflow.run
    async def run(self, input: SiteCreationInput) -> SiteProgress:
        site = SiteRef(input.site_id)
        self._publish()
        if input.roll_back:
            # The reconciler's rule: a creation that closed without completing is rolled back, as a cancel
            # would have done. Every undo is idempotent, so all of them run.
            await uninterruptible(
                self._roll_back(site, SiteErrorCode.INTERRUPTED, "creation closed without completing", list(ALL_STEPS))
            )
            return self.progress()
        try:
            found = await self._build(site)
        except (ActivityError, asyncio.CancelledError) as err:
            cancelled = is_cancelled_exception(err) or cancel_pending()
            reason = "cancelled" if cancelled else f"{self._failed_step} failed: {_cause(err)}"
            code = SiteErrorCode.CANCELLED if cancelled else self._failed_code(err)
            await uninterruptible(self._roll_back(site, code, reason, self._undos))
            if cancelled:
                raise
            if self._status != SiteStatus.ROLLED_BACK:
                # Another run settled the site first; this one changed nothing and says what it found.
                return self.progress()
            raise ApplicationError(f"site rolled back: {reason}", type="SiteRolledBack", non_retryable=True) from err
        if found in (SiteStatus.PROVISIONING, SiteStatus.ACTIVE):
            # The site exists in full from here on: a late cancellation no longer undoes it.
            await uninterruptible(self._finish(site))
        elif found in _ROLLBACK_INTERRUPTED:
            await uninterruptible(
                self._roll_back(site, SiteErrorCode.INTERRUPTED, "an interrupted rollback, resumed", list(ALL_STEPS))
            )
        else:
            self._set_status(found)
        return self.progress()

    async def _build(self, site: SiteRef) -> SiteStatus:
        """Run the forward steps while the site provisions; the status that stopped them, or provisioning."""
        status = await self._step(site, METADATA)
        if status == SiteStatus.PROVISIONING:
            statuses = await self._parallel(self._step(site, FILESYSTEM), self._step(site, DATABASE))
            status = next((found for found in statuses if found != SiteStatus.PROVISIONING), status)
        if status == SiteStatus.PROVISIONING:
            status = await self._step(site, BOOTSTRAP)
        return status

    async def _step(self, site: SiteRef, step: SiteStep) -> SiteStatus:
        self._undos.append(step)
        self._set_step(step.name, StepStatus.RUNNING)
        wait = _SERVER_WAIT_FIRST
        moved = False
        while True:
            try:
                found = await first_try_here(step.activity, site, presets.SITE_STEP, f"{step.name}: create")
                break
            except ActivityError as err:
                if _server_unreachable(err) and not cancel_pending():
                    # One move between two waits: a site whose new server does not answer either waits before it
                    # moves again, rather than going from one dead server to another without pause.
                    if step is DATABASE and not moved and await self._moved(site, err):
                        moved = True
                        continue  # placed on another server, which holds nothing of it yet: the step runs there
                    moved = False
                    # An outage of the site's server, not a failure of the step: wait for it, holding no worker
                    # slot, and run the step again with its retries whole. A cancellation still rolls back.
                    self._waiting_for_server = f"{step.name} waits for its database server: {_cause(err)}"
                    self._publish()
                    self._server_back = False
                    try:
                        await workflow.wait_condition(
                            lambda: self._server_back,
                            timeout=wait,
                            timeout_summary=f"{step.name}: wait for the database server",
                        )
                    except TimeoutError:
                        pass  # the wait is over: try again
                    finally:
                        self._waiting_for_server = None
                    wait = min(wait * _SERVER_WAIT_GROWTH, _SERVER_WAIT_CAP)
                    continue
                if not is_cancelled_exception(err):
                    self._failed_step = step.name
                    self._set_step(step.name, StepStatus.FAILED)
                raise
        status = SiteStatus(found)
        if status in (SiteStatus.PROVISIONING, SiteStatus.ACTIVE):
            self._set_step(step.name, StepStatus.DONE)
        return status

    @staticmethod
    async def _moved(site: SiteRef, err: ActivityError) -> bool:
        """Whether the site left the server that did not answer its database step, which it does only while the
        step never touched that server (activities/sites/placement.py)."""
        details = err.cause.details if isinstance(err.cause, ApplicationError) else ()
        if not details:
            return False
        moved: bool = await workflow.execute_activity_method(
            SiteActivities.move_site_database_server,
            SiteMove(site.site_id, str(details[0])),
            **presets.SITE_UNDO,
            summary="database: place on another server",
        )
        return moved

    @staticmethod
    async def _parallel(*steps: Coroutine[Any, Any, SiteStatus]) -> list[SiteStatus]:
        # Wait for every parallel step to settle, so that none is still running when the undos start.
        results = await asyncio.gather(*steps, return_exceptions=True)
        statuses = []
        for result in results:
            if isinstance(result, BaseException):
                raise result
            statuses.append(result)
        return statuses

    def _failed_code(self, err: BaseException) -> SiteErrorCode:
        cause = err.cause if isinstance(err, ActivityError) else None
        if isinstance(cause, ApplicationError) and cause.type == NO_DATABASE_SERVER_ERROR:
            return SiteErrorCode.NO_DATABASE_SERVER
        return step_failed(self._failed_step) if self._failed_step else SiteErrorCode.FAILED

    async def _roll_back(self, site: SiteRef, code: SiteErrorCode, reason: str, steps: list[SiteStep]) -> None:
        self._error, self._error_code = reason, code
        self._set_status(SiteStatus.ROLLING_BACK)
        status = await self._bookkeeping(
            SiteActivities.begin_site_rollback,
            SiteRollbackInput(site.site_id, reason, self._failed_step, code),
            "record rollback",
        )
        if status != SiteStatus.ROLLING_BACK:
            # The site is not this run's to undo (active, rolled back, deleted): touch nothing.
            self._set_status(SiteStatus(status))
            return
        pending = [step for step in reversed(steps) if step is not METADATA]
        free_domain = METADATA in steps
        while True:
            failed = await self._run_undos(site, pending)
            if not failed and free_domain:
                # The domain goes last, and only once nothing else of the site is left.
                try:
                    released = await self._undo(site, METADATA)
                except _UndoFailed as err:
                    failed = [err]
                else:
                    self._set_status(SiteStatus(released))
                    return
            if not failed:
                self._set_status(SiteStatus.ROLLED_BACK)
                return
            if not await self._wait_for_retry(site, failed):
                return
            pending = [err.step for err in failed if err.step is not METADATA]

    async def _run_undos(self, site: SiteRef, steps: list[SiteStep]) -> list[_UndoFailed]:
        """Every undo runs, whatever the others do; the ones that failed for good are returned."""
        failed = []
        for step in steps:
            try:
                await self._undo(site, step)
            except _UndoFailed as err:
                failed.append(err)
        return failed

    async def _undo(self, site: SiteRef, step: SiteStep) -> Any:
        self._set_step(step.name, StepStatus.COMPENSATING)
        try:
            result = await workflow.execute_activity_method(
                step.undo,
                site,
                **presets.SITE_UNDO,
                summary=f"{step.name}: undo",
            )
        except ActivityError as err:
            # Undos retry without limit, so only a non-retryable failure gets here.
            self._set_step(step.name, StepStatus.COMPENSATION_FAILED)
            raise _UndoFailed(step, _cause(err)) from err
        self._set_step(step.name, StepStatus.COMPENSATED)
        return result

    async def _wait_for_retry(self, site: SiteRef, failed: list[_UndoFailed]) -> bool:
        """Hand the failed undos to an operator; True once a `retry` came and the site rolls back again."""
        reason = "; ".join(str(err) for err in failed)
        status = await self._bookkeeping(
            SiteActivities.mark_site_rollback_failed,
            SiteRollbackFailure(site.site_id, [err.step.name for err in failed], reason),
            "record rollback failure",
        )
        self._set_status(SiteStatus(status))
        if status != SiteStatus.ROLLBACK_FAILED:
            return False
        # Waiting first, alert second: an alert that cannot be delivered never keeps the operator out.
        self._waiting_for_retry = True
        self._publish()
        await self._alert(f"site {site.site_id} rollback failed", reason)
        await workflow.wait_condition(lambda: self._retry_requested)
        self._waiting_for_retry = False
        self._retry_requested = False
        status = await self._bookkeeping(
            SiteActivities.begin_site_rollback,
            SiteRollbackInput(site.site_id, self._error or reason, None, self._error_code),
            "record rollback retry",
        )
        self._set_status(SiteStatus(status))
        return status == SiteStatus.ROLLING_BACK

    async def _alert(self, subject: str, reason: str) -> None:
        try:
            await workflow.execute_activity_method(
                Alerts.raise_alert,
                AlertInput(workflow_id=workflow.info().workflow_id, subject=subject, reason=reason),
                **presets.SITE_ALERT,
                summary="alert: a site rollback needs an operator",
            )
        except ActivityError as err:
            workflow.logger.warning("alert not delivered: %s", _cause(err))

    async def _finish(self, site: SiteRef) -> None:
        # A local activity (one UPDATE): the worker runs it inside the workflow task that saw bootstrap finish,
        # which saves a workflow task and an activity dispatch on the path a customer waits on (bench.sites). The
        # metadata step stays a regular activity: a cancellation must be able to land while it retries, and its
        # undo must wait for it.
        status = await workflow.execute_local_activity_method(
            SiteActivities.activate_site,
            site,
            **presets.SITE_ACTIVATION,
            summary="mark active",
        )
        self._set_status(SiteStatus(status))
        if self._status != SiteStatus.ACTIVE:
            return
        try:
            await first_try_here(
                SiteActivities.send_site_ready_email, site, presets.SITE_READY_EMAIL, "send the site-ready email"
            )
        except ActivityError as err:
            # The site works; a lost email is worth a log line, not a rollback.
            workflow.logger.warning("site-ready email not sent: %s", _cause(err))

    @staticmethod
    async def _bookkeeping(activity: Callable[[SiteActivities, Any], Awaitable[Any]], arg: object, summary: str) -> Any:
        return await workflow.execute_activity_method(
            activity,
            arg,
            **presets.SITE_UNDO,
            summary=summary,
        )

    def _set_step(self, step: str, status: StepStatus) -> None:
        self._steps[step] = status
        self._publish()

    def _set_status(self, status: SiteStatus) -> None:
        self._status = status
        workflow.upsert_search_attributes([LIFECYCLE_STATUS.value_set(status)])
        self._publish()

    def _publish(self) -> None:
        steps = "; ".join(f"{name}: {status}" for name, status in self._steps.items())
        details = f"{self._status}. {steps}" + (f". error: {self._error}" if self._error else "")
        if self._waiting_for_retry:
            details += ". Waiting for an operator: `temporal workflow update execute --name retry`"
        if self._waiting_for_server:
            details += f". {self._waiting_for_server}"
        if self._note:
            details += f". {self._note}"
        workflow.set_current_details(details)


def _server_unreachable(err: ActivityError) -> bool:
    return isinstance(err.cause, ApplicationError) and err.cause.type == SERVER_UNREACHABLE_ERROR


def _cause(err: BaseException) -> str:
    cause = err.cause if isinstance(err, ActivityError) and err.cause is not None else err
    return str(cause)
