"""Telling the processors of one account deletion, and waiting for their answers (GDPR Art. 19).

Started by the account deletion once the account's data is gone and its first receipt is signed (that receipt
lists every processor `pending`), and left running when the deletion closes: the data and the first receipt never
wait for a processor. Each processor gets one erasure request, retried by the server with back-off (the
PROCESSOR_RETRY_* settings: seconds at first, at most an hour apart, without end) until it acknowledges; an operator
is alerted once one has not acknowledged for PROCESSOR_ALERT_AFTER, and may `skip_processor` it for this deletion.
Once every processor answered or was skipped, the follow-up receipt is signed and chained to the first.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta

from temporalio import workflow
from temporalio.common import VersioningBehavior
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    import workflows.activity_presets as presets
    from activities.alerts import Alerts
    from activities.deletion.follow_up import PROCESSORS_ANSWERED, FollowUpReceipts, follow_up_key
    from activities.deletion.processors import ProcessorErasures
    from lifecycle.deletion.contracts import ErasureDelivery, FollowUpInput, ProcessorErasureInput
    from lifecycle.deletion.workflow_types import PROCESSOR_ERASURE_WORKFLOW
    from lifecycle.shared_contracts import AlertInput
    from lifecycle.statuses import ProcessorAnswer


# Pinned: a run may wait days for a processor; it finishes on the code it started with (docs/versioning.md).
@workflow.defn(name=PROCESSOR_ERASURE_WORKFLOW, versioning_behavior=VersioningBehavior.PINNED)
class ProcessorErasureWorkflow:
    @workflow.init
    def __init__(self, request: ProcessorErasureInput) -> None:
        self._answers = dict.fromkeys(request.processors, ProcessorAnswer.PENDING)
        self._skips: set[str] = set()

    @workflow.run
    async def run(self, request: ProcessorErasureInput) -> dict[str, ProcessorAnswer]:
        self._publish()
        await asyncio.gather(*(self._tell(request, name) for name in request.processors))
        if request.processors:
            await workflow.execute_activity_method(
                FollowUpReceipts.issue_follow_up_receipt,
                FollowUpInput(
                    receipt_id=request.receipt_id,
                    key=follow_up_key(PROCESSORS_ANSWERED, request.erasure_id),
                    reason=PROCESSORS_ANSWERED,
                ),
                **presets.STEP,
                summary="sign the follow-up receipt: every processor answered or was skipped",
            )
        # A `skip_processor` in flight answers before the run closes.
        await workflow.wait_condition(workflow.all_handlers_finished)
        return self._answers

    async def _tell(self, request: ProcessorErasureInput, name: str) -> None:
        delivery = ErasureDelivery(erasure_id=request.erasure_id, processor=name)
        sending = workflow.start_activity_method(
            ProcessorErasures.deliver_erasure_request,
            delivery,
            **presets.processor_delivery(
                timedelta(seconds=request.retry_first_seconds),
                timedelta(seconds=request.retry_cap_seconds),
                timedelta(seconds=request.request_timeout_seconds),
            ),
            summary=f"tell processor {name} (retried until it acknowledges)",
        )
        try:
            await workflow.wait_condition(
                lambda: sending.done() or name in self._skips,
                timeout=timedelta(seconds=request.alert_after_seconds),
                timeout_summary=f"alert an operator if {name} has not acknowledged by then",
            )
        except TimeoutError:
            self._alert(request, name)
            await workflow.wait_condition(lambda: sending.done() or name in self._skips)
        if not sending.done():
            sending.cancel()
            with contextlib.suppress(ActivityError):
                await sending
            # What PostgreSQL recorded: an acknowledgement that arrived before the skip stands.
            self._answers[name] = await workflow.execute_activity_method(
                ProcessorErasures.skip_processor_erasure,
                delivery,
                **presets.STEP,
                summary=f"record the operator's skip of {name}",
            )
        else:
            self._answers[name] = await sending
        self._publish()

    def _alert(self, request: ProcessorErasureInput, name: str) -> None:
        alerting = workflow.start_activity_method(
            Alerts.raise_alert,
            AlertInput(
                workflow_id=workflow.info().workflow_id,
                subject="processor has not acknowledged an erasure",
                reason=f"processor {name} has not acknowledged erasure {request.erasure_id} of account "
                f"{request.account_id} after {request.alert_after_seconds:.0f} s; requests go on being retried. "
                f"`skip_processor` with {name!r} marks it skipped for this deletion",
            ),
            **presets.OPERATOR_ALERT,
            summary=f"alert: {name} has not acknowledged",
        )
        # The requests go on whatever becomes of the alert.
        alerting.add_done_callback(lambda done: done.cancelled() or done.exception())

    def _publish(self) -> None:
        pending = sorted(name for name, answer in self._answers.items() if answer == ProcessorAnswer.PENDING)
        workflow.set_current_details(f"waiting for {', '.join(pending)}" if pending else "every processor answered")

    @workflow.update
    def skip_processor(self, name: str) -> str:
        """An operator's decision: stop asking `name` for this deletion; the receipt shows it skipped."""
        self._skips.add(name)
        return f"{name} skipped for this deletion"

    @skip_processor.validator
    def _validate_skip_processor(self, name: str) -> None:
        if name not in self._answers:
            raise ValueError(f"{name!r} is not told of this deletion: {', '.join(sorted(self._answers)) or 'none'}")
        if self._answers[name] != ProcessorAnswer.PENDING or name in self._skips:
            raise ValueError(f"{name} is no longer pending")

    @workflow.query
    def processors(self) -> dict[str, ProcessorAnswer]:
        return self._answers
