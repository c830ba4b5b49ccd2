"""Site creation as a saga: each step registers its undo before it runs; a failure or a cancellation
undoes, in reverse order, the finished steps and the one in flight."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, is_cancelled_exception
from temporalio.workflow import ActivityCancellationType

with workflow.unsafe.imports_passed_through():
    from lifecycle.contracts import SITE_STEPS, SiteCreationInput, SiteProgress, SiteRef, SiteRollbackInput
    from lifecycle.search_attributes import LIFECYCLE_STATUS
    from lifecycle.workflow_types import SITE_CREATION_WORKFLOW
    from workflows import site_policies as policies
    from workflows.site_shield import uninterruptible


@dataclass(frozen=True)
class _Step:
    name: str
    activity: str
    undo: str


METADATA = _Step("metadata", "save_site_metadata", "release_site_domain")
FILESYSTEM = _Step("filesystem", "create_site_filesystem", "remove_site_filesystem")
DATABASE = _Step("database", "create_site_database", "drop_site_database")
BOOTSTRAP = _Step("bootstrap", "bootstrap_site", "drop_site_tables")


@workflow.defn(name=SITE_CREATION_WORKFLOW)
class SiteCreationWorkflow:
    def __init__(self) -> None:
        self._status = "provisioning"
        self._steps = dict.fromkeys(SITE_STEPS, "pending")
        self._error: str | None = None
        self._undos: list[_Step] = []
        self._failed_step: str | None = None

    @workflow.query(name="progress")
    def progress(self) -> SiteProgress:
        return SiteProgress(status=self._status, steps=dict(self._steps), error=self._error)

    @workflow.run
    async def run(self, input: SiteCreationInput) -> SiteProgress:
        site = SiteRef(input.site_id)
        self._publish()
        try:
            await self._step(site, METADATA)
            await self._parallel(self._step(site, FILESYSTEM), self._step(site, DATABASE))
            await self._step(site, BOOTSTRAP)
        except (ActivityError, asyncio.CancelledError) as err:
            cancelled = is_cancelled_exception(err)
            reason = "cancelled" if cancelled else f"{self._failed_step} failed: {_cause(err)}"
            await uninterruptible(self._roll_back(site, reason))
            if cancelled:
                raise
            raise ApplicationError(f"site rolled back: {reason}", type="SiteRolledBack", non_retryable=True) from err
        # The site exists in full from here on: a late cancellation no longer undoes it.
        await uninterruptible(self._finish(site))
        return self.progress()

    async def _step(self, site: SiteRef, step: _Step) -> None:
        self._undos.append(step)
        self._set_step(step.name, "running")
        try:
            await workflow.execute_activity(
                step.activity,
                site,
                start_to_close_timeout=policies.STEP_TIMEOUT,
                retry_policy=policies.STEP_RETRY,
                # The undo must not start while the step may still be running on a worker.
                cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
                summary=f"{step.name}: create",
            )
        except ActivityError as err:
            if not is_cancelled_exception(err):
                self._failed_step = step.name
                self._set_step(step.name, "failed")
            raise
        self._set_step(step.name, "done")

    @staticmethod
    async def _parallel(*steps: Coroutine[Any, Any, None]) -> None:
        # Wait for every parallel step to settle, so that none is still running when the undos start.
        results = await asyncio.gather(*steps, return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result

    async def _roll_back(self, site: SiteRef, reason: str) -> None:
        self._error = reason
        self._set_status("rolling_back")
        await self._undo_activity(
            "begin_site_rollback",
            SiteRollbackInput(site.site_id, reason, self._failed_step),
            "record rollback",
        )
        for step in reversed(self._undos):
            self._set_step(step.name, "compensating")
            await self._undo_activity(step.undo, site, f"{step.name}: undo")
            self._set_step(step.name, "compensated")
        self._set_status("rolled_back")

    async def _finish(self, site: SiteRef) -> None:
        await self._undo_activity("activate_site", site, "mark active")
        self._set_status("active")
        try:
            await workflow.execute_activity(
                "send_site_ready_email",
                site,
                start_to_close_timeout=policies.EMAIL_TIMEOUT,
                retry_policy=policies.EMAIL_RETRY,
                summary="send the site-ready email",
            )
        except ActivityError as err:
            # The site works; a lost email is worth a log line, not a rollback.
            workflow.logger.warning("site-ready email not sent: %s", _cause(err))

    @staticmethod
    async def _undo_activity(name: str, arg: object, summary: str) -> None:
        await workflow.execute_activity(
            name,
            arg,
            start_to_close_timeout=policies.UNDO_TIMEOUT,
            retry_policy=policies.UNDO_RETRY,
            summary=summary,
        )

    def _set_step(self, step: str, status: str) -> None:
        self._steps[step] = status
        self._publish()

    def _set_status(self, status: str) -> None:
        self._status = status
        workflow.upsert_search_attributes([LIFECYCLE_STATUS.value_set(status)])
        self._publish()

    def _publish(self) -> None:
        steps = "; ".join(f"{name}: {status}" for name, status in self._steps.items())
        workflow.set_current_details(f"{self._status}. {steps}" + (f". error: {self._error}" if self._error else ""))


def _cause(err: BaseException) -> str:
    cause = err.cause if isinstance(err, ActivityError) and err.cause is not None else err
    return str(cause)
