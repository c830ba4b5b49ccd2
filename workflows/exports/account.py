"""Exporting an account's data: write the parts, assemble one ZIP, mark it ready, mail a signed link once,
then keep the archive for the retention period on a durable timer (an operator's `expire_now` cuts it short)
and delete it."""

from __future__ import annotations

import contextlib
from datetime import timedelta

from temporalio import workflow
from temporalio.common import VersioningBehavior

with workflow.unsafe.imports_passed_through():
    import workflows.activity_presets as presets
    from activities.exports.steps import AccountExportActivities
    from lifecycle.exports.contracts import (
        AccountExportInput,
        AccountExportResult,
        ArchiveFacts,
        AssembleInput,
        ExportRef,
        MarkReadyInput,
        WritePartsInput,
    )
    from lifecycle.exports.workflow_types import ACCOUNT_EXPORT_WORKFLOW
    from lifecycle.search_attributes import LIFECYCLE_STATUS
    from lifecycle.statuses import ExportStatus
    from workflows.exports.service_parts import export_service_parts


# Pinned: writing takes minutes; the retention wait after it (export_retention, 7 days by default) keeps the
# version's workers needed until the archive expires or an operator sends `expire_now` (docs/versioning.md).
@workflow.defn(name=ACCOUNT_EXPORT_WORKFLOW, versioning_behavior=VersioningBehavior.PINNED)
class AccountExportWorkflow:
    def __init__(self) -> None:
        self._status = ExportStatus.PENDING
        self._expire_now = False

    @workflow.run
    async def run(self, request: AccountExportInput) -> AccountExportResult:
        ref = ExportRef(export_id=request.export_id)
        plan = await workflow.execute_activity_method(
            AccountExportActivities.begin_account_export,
            request,
            **presets.STEP,
            summary=f"list what export {request.export_id} holds",
        )
        if plan.settled is not None:
            # A reset of a finished export: its archive is gone for good, and nothing is written again.
            self._set_status(ExportStatus(plan.settled), "settled by an earlier run")
            return AccountExportResult(export_id=request.export_id, status=plan.settled)
        if not plan.found:
            self._set_status(ExportStatus.FAILED, "the account was gone before the export began")
            return await workflow.execute_activity_method(
                AccountExportActivities.mark_export_failed,
                ref,
                **presets.STEP,
                summary="mark the export failed",
            )
        self._set_status(ExportStatus.WRITING, f"writing {len(plan.parts)} parts")
        await workflow.execute_activity_method(
            AccountExportActivities.write_export_parts,
            WritePartsInput(export_id=request.export_id, account_id=request.account_id, parts=plan.parts),
            **presets.EXPORT_WRITE,
            summary=f"write {len(plan.parts)} parts as JSON lines",
        )
        self._set_status(ExportStatus.WRITING, "asking the registered services for their parts")
        service_parts = await export_service_parts(
            request.export_id,
            request.account_id,
            plan.bot_ids,
            lambda details: self._set_status(ExportStatus.WRITING, details),
        )
        self._set_status(ExportStatus.WRITING, "assembling the ZIP")
        facts: ArchiveFacts = await workflow.execute_activity_method(
            AccountExportActivities.assemble_export_archive,
            AssembleInput(export_id=request.export_id, parts=plan.parts, service_parts=service_parts),
            **presets.EXPORT_WRITE,
            summary="assemble the ZIP and its checksum",
        )
        retention = timedelta(seconds=request.retention_seconds)
        expires_at = int((workflow.now() + retention).timestamp())
        await workflow.execute_activity_method(
            AccountExportActivities.mark_export_ready,
            MarkReadyInput(export_id=request.export_id, facts=facts, expires_at=expires_at),
            **presets.STEP,
            summary="mark the export ready",
        )
        self._set_status(ExportStatus.READY, f"ready: {facts.size_bytes:,} bytes, {facts.entries} entries")
        await workflow.execute_activity_method(
            AccountExportActivities.send_export_ready_email,
            ref,
            **presets.STEP,
            summary="email the download link (once)",
        )
        self._set_status(ExportStatus.READY, f"ready and mailed: {facts.size_bytes:,} bytes; kept until {expires_at}")
        # The retention timer: durable, so a restart of anything keeps the deadline.
        with contextlib.suppress(TimeoutError):
            await workflow.wait_condition(
                lambda: self._expire_now, timeout=retention, timeout_summary="archive retention"
            )
        await workflow.execute_activity_method(
            AccountExportActivities.expire_account_export,
            ref,
            **presets.STEP,
            summary="delete the archive",
        )
        self._set_status(ExportStatus.EXPIRED, "expired: archive deleted")
        # An `expire_now` in flight answers before the run closes.
        await workflow.wait_condition(workflow.all_handlers_finished)
        return AccountExportResult(
            export_id=request.export_id, status=ExportStatus.EXPIRED, size_bytes=facts.size_bytes, sha256=facts.sha256
        )

    def _set_status(self, status: ExportStatus, details: str) -> None:
        if status != self._status:
            self._status = status
            workflow.upsert_search_attributes([LIFECYCLE_STATUS.value_set(status.value)])
        workflow.set_current_details(f"{status}: {details}" if not details.startswith(status) else details)

    @workflow.update(name="expire_now")
    async def expire_now(self) -> str:
        """Delete the archive now instead of at the end of its retention (the link then answers 410)."""
        self._expire_now = True
        await workflow.wait_condition(lambda: self._status == ExportStatus.EXPIRED)
        return "archive deleted; the export is expired"

    @expire_now.validator
    def _validate_expire_now(self) -> None:
        if self._status != ExportStatus.READY:
            raise ValueError(f"the export is {self._status}: only a ready archive can be expired")
