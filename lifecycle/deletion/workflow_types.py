"""Deletion's workflow types, each with everything a start of it needs: its type name, workflow id, id reuse
policy, search attributes, fairness key and the function that returns its StartOptions (lifecycle/start_options.py).

Every deletion run carries its account id as the fairness key (account_fairness), so one account's mass deletion
does not starve another's. A deletion starts `accepted` in LifecycleStatus and publishes `running` (or `held`,
`paused`) as its run begins.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from uuid import UUID

from temporalio.common import SearchAttributePair, TypedSearchAttributes, WorkflowIDReusePolicy

from lifecycle.search_attributes import ACCOUNT_ID, BOT_ID, LIFECYCLE_STATUS
from lifecycle.start_options import ScheduledStart, StartOptions, account_fairness
from lifecycle.statuses import DeletionState

BOT_DELETION_WORKFLOW = "BotDeletion"
ACCOUNT_DELETION_WORKFLOW = "AccountDeletion"
DELETION_PREVIEW_WORKFLOW = "DeletionPreview"
PROCESSOR_ERASURE_WORKFLOW = "ProcessorErasure"
RECONCILER_WORKFLOW = "DeletionReconciler"

# Bot and account deletion: a closed run may be followed by a new one, whatever way it closed. The gate is the bot
# or account row, not the run: the row is deleted only once none of its data remains, and a run is started only
# while it exists (lifecycle/deletion/starts.py). So a repeat after a cancel, a terminate, a failure, a completion
# whose services an operator skipped, or a restore starts a run that finishes from wherever the data stands, while
# a repeat after a real completion finds no row and starts nothing. ALLOW_DUPLICATE_FAILED_ONLY would refuse after
# an operator's skip, which completes the run with data left.
DELETION_REUSE = WorkflowIDReusePolicy.ALLOW_DUPLICATE
# Deletion preview: it changes nothing, so every request after the last one closed counts afresh.
PREVIEW_REUSE = WorkflowIDReusePolicy.ALLOW_DUPLICATE
# Telling the processors: one run per deletion, and a completed one (every processor answered or skipped, the
# follow-up receipt signed) never runs again; one terminated or failed can, every step being idempotent.
PROCESSOR_ERASURE_REUSE = WorkflowIDReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY


def bot_deletion_id(bot_id: UUID | str) -> str:
    return f"bot-deletion-{bot_id}"


def account_deletion_id(account_id: UUID | str) -> str:
    return f"account-deletion-{account_id}"


def reapplied_deletion_id(deletion_id: str, receipt_id: UUID | str) -> str:
    """A deletion made again after a restore brought its subject back (python -m lifecycle.deletion.reapply):
    named by the receipt of the deletion it repeats, so running the re-apply twice joins one run, and it never meets
    the runs of the first deletion (their progress, the services' ledgers) under their id."""
    return f"{deletion_id}-reapply-{UUID(str(receipt_id))}"


def deletion_preview_id(subject_kind: str, subject_id: UUID | str) -> str:
    """A preview of deleting a bot or an account: a repeat while one runs joins it (it counts the same things)."""
    return f"deletion-preview-{subject_kind}-{subject_id}"


def processor_erasure_id(deletion_workflow_id: str) -> str:
    """The run that tells the processors of one account deletion and waits for their answers."""
    return f"processor-erasure-{deletion_workflow_id}"


def deletion_search_attributes(
    account_id: str, bot_id: str | None = None, status: DeletionState = DeletionState.ACCEPTED
) -> TypedSearchAttributes:
    pairs = [
        SearchAttributePair(ACCOUNT_ID, account_id),
        SearchAttributePair(LIFECYCLE_STATUS, status.value),
    ]
    if bot_id is not None:
        pairs.append(SearchAttributePair(BOT_ID, bot_id))
    return TypedSearchAttributes(pairs)


def _reapplying(receipt_id: str | None) -> str:
    return f" again, after a restore brought back what receipt {receipt_id} records as deleted" if receipt_id else ""


def bot_deletion_options(
    bot_id: str, account_id: str, *, within_account: bool = False, reapplies: str | None = None
) -> StartOptions:
    """`within_account`: a child of the account's deletion. `reapplies`: the receipt of the deletion this one
    makes again after a restore (python -m lifecycle.deletion.reapply), under an id of its own."""
    workflow_id = bot_deletion_id(bot_id)
    return StartOptions(
        workflow_type=BOT_DELETION_WORKFLOW,
        id=reapplied_deletion_id(workflow_id, reapplies) if reapplies else workflow_id,
        id_reuse_policy=DELETION_REUSE,
        search_attributes=deletion_search_attributes(account_id, bot_id),
        priority=account_fairness(account_id),
        static_summary=f"Delete bot {bot_id}{' again' if reapplies else ''}",
        static_details=f"Part of deleting account {account_id}."
        if within_account
        else f"Deletes every row and file of bot {bot_id} (account {account_id}), by service{_reapplying(reapplies)}.",
    )


def account_deletion_options(
    account_id: str, *, deletes_at: datetime | None = None, reapplies: str | None = None
) -> StartOptions:
    """`deletes_at`: the end of a grace period still to come (None: none, or it is over). `reapplies`: the receipt
    of the deletion this one makes again after a restore (python -m lifecycle.deletion.reapply), under an id of
    its own."""
    workflow_id = account_deletion_id(account_id)
    return StartOptions(
        workflow_type=ACCOUNT_DELETION_WORKFLOW,
        id=reapplied_deletion_id(workflow_id, reapplies) if reapplies else workflow_id,
        id_reuse_policy=DELETION_REUSE,
        search_attributes=deletion_search_attributes(
            account_id, status=DeletionState.SCHEDULED if deletes_at else DeletionState.ACCEPTED
        ),
        priority=account_fairness(account_id),
        static_summary=f"Delete account {account_id}"
        + (f" after {deletes_at:%Y-%m-%d %H:%M:%S} UTC" if deletes_at else "")
        + (" again" if reapplies else ""),
        static_details=(
            f"Deletes every bot of account {account_id} (child workflows), then the account row once "
            f"nothing of it remains, then emails the confirmation once{_reapplying(reapplies)}."
        ),
    )


def deletion_preview_options(subject_kind: str, subject_id: str, account_id: str) -> StartOptions:
    """`subject_kind`: `bot` or `account`. No search attributes: a preview is no deletion, and nothing that lists
    deletions (the reconciler, operators' queries by status) should find it."""
    return StartOptions(
        workflow_type=DELETION_PREVIEW_WORKFLOW,
        id=deletion_preview_id(subject_kind, subject_id),
        id_reuse_policy=PREVIEW_REUSE,
        search_attributes=TypedSearchAttributes.empty,
        priority=account_fairness(account_id),
        static_summary=f"Preview deleting {subject_kind} {subject_id}",
        static_details=f"Asks every registered service what it holds of {subject_kind} {subject_id} "
        f"(account {account_id}); deletes and records nothing.",
    )


def processor_erasure_options(deletion_workflow_id: str, account_id: str) -> StartOptions:
    """No search attributes: it deletes nothing, and what lists deletions (the reconciler) must not find it."""
    return StartOptions(
        workflow_type=PROCESSOR_ERASURE_WORKFLOW,
        id=processor_erasure_id(deletion_workflow_id),
        id_reuse_policy=PROCESSOR_ERASURE_REUSE,
        search_attributes=TypedSearchAttributes.empty,
        priority=account_fairness(account_id),
        static_summary=f"Tell the processors of account {account_id}",
        static_details=f"Sends every registered processor one signed erasure request for {deletion_workflow_id}, "
        "retried until it acknowledges (or an operator skips it), then signs the follow-up receipt.",
    )


# The reconciler of all three features (workflows/reconciler.py), on the deletion queue; every five minutes gives
# recovery within minutes, not a day, and a consistent database makes each run one cheap query.
RECONCILER_SCHEDULE = ScheduledStart(
    schedule_id="deletion-reconciler",
    workflow_type=RECONCILER_WORKFLOW,
    id="deletion-reconciler-run",
    every=timedelta(minutes=5),
    static_summary="Start deletions marked in the database but missing in Temporal",
)
