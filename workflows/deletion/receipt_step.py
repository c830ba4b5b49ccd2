"""The last step of a bot's or an account's deletion: an independent check, then a signed receipt."""

from __future__ import annotations

from collections.abc import Sequence

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    import workflows.activity_presets as presets
    from activities.deletion.receipts import DeletionReceipts
    from lifecycle.deletion.contracts import (
        OperatorAction,
        ReceiptInput,
        ReceiptSubject,
        RegisteredService,
        ServiceVerification,
    )


async def issue_receipt(
    kind: ReceiptSubject,
    subject_id: str,
    account_id: str,
    operator_actions: Sequence[OperatorAction] = (),
    verified: Sequence[ServiceVerification] = (),
    registry: Sequence[RegisteredService] = (),
) -> str:
    """The receipt's id. Keyed by the run chain's first run, so a retry, a reset or a continue-as-new finds the
    receipt of this deletion rather than signing another. `verified`: the registered services' own counts;
    `registry`: the services the deletion called (none: the receipt is never complete)."""
    info = workflow.info()
    return await workflow.execute_activity_method(
        DeletionReceipts.issue_deletion_receipt,
        ReceiptInput(
            workflow_id=info.workflow_id,
            first_run_id=info.first_execution_run_id,
            run_id=info.run_id,
            subject_kind=kind,
            subject_id=subject_id,
            account_id=account_id,
            operator_actions=list(operator_actions),
            verified=list(verified),
            registry=list(registry),
        ),
        **presets.STEP,
        summary=f"check {kind} {subject_id} is gone, then sign its deletion receipt",
    )
