"""What an account deletion does once the account's data is gone, around its first receipt: the copies it does
not keep are removed before the receipt, and the processors are told after it (without waiting for them)."""

from __future__ import annotations

from dataclasses import replace

from temporalio import workflow
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    import workflows.activity_presets as presets
    from activities.deletion.processors import ProcessorErasures
    from activities.exports.steps import AccountExportActivities
    from lifecycle.deletion.contracts import BeginErasureInput, ProcessorErasureInput
    from lifecycle.deletion.workflow_types import processor_erasure_options
    from workflows.deletion.processors import ProcessorErasureWorkflow


async def before_receipt(account_id: str) -> ProcessorErasureInput:
    """Remove the account's exports that no deletion asked for first (`export_first` keeps its own, which the
    receipt lists), then record the processors to tell, each `pending` on the receipt."""
    await workflow.execute_activity_method(
        AccountExportActivities.remove_account_exports,
        account_id,
        **presets.STEP,
        summary=f"remove the earlier exports of account {account_id}",
    )
    info = workflow.info()
    return await workflow.execute_activity_method(
        ProcessorErasures.begin_processor_erasure,
        BeginErasureInput(
            workflow_id=info.workflow_id, first_run_id=info.first_execution_run_id, account_id=account_id
        ),
        **presets.STEP,
        summary=f"record the processors to tell of account {account_id}'s deletion",
    )


async def tell_processors(erasure: ProcessorErasureInput, receipt_id: str) -> None:
    """Start the run that tells them and signs the follow-up receipt; it outlives this deletion (ABANDON), which
    never waits for a processor. A reset or a retry that meets it running or done leaves it be."""
    if not erasure.processors:
        return
    try:
        await workflow.start_child_workflow(
            ProcessorErasureWorkflow.run,
            replace(erasure, receipt_id=receipt_id),
            **processor_erasure_options(erasure.deletion_workflow_id, erasure.account_id).child(
                parent_close_policy=ParentClosePolicy.ABANDON
            ),
        )
    except WorkflowAlreadyStartedError:
        workflow.logger.info("the processors of %s are already being told", erasure.deletion_workflow_id)
