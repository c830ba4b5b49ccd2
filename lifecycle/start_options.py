"""How each workflow type is started: one function per type gives its id, id reuse policy, search attributes,
fairness key and the UI's summary. The API, the reconciler, a parent workflow (as child options) and the tests
all start runs through these, so a run started anywhere looks the same.

Every start joins the open run under its id (USE_EXISTING): a repeated request never makes a second one. What a
start does once the last run closed is chosen per type (the table in docs/design.md, "How the work runs").
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.client import Client, WorkflowHandle
from temporalio.common import (
    Priority,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from temporalio.workflow import ParentClosePolicy

from lifecycle.priorities import deletion_priority
from lifecycle.search_attributes import (
    deletion_search_attributes,
    export_search_attributes,
    site_search_attributes,
)
from lifecycle.statuses import DeletionState, SiteStatus
from lifecycle.workflow_ids import (
    account_deletion_id,
    bot_deletion_id,
    deletion_preview_id,
    processor_erasure_id,
    reapplied_deletion_id,
    site_creation_id,
    site_db_pool_id,
    site_deletion_id,
)
from lifecycle.workflow_types import (
    ACCOUNT_DELETION_WORKFLOW,
    ACCOUNT_EXPORT_WORKFLOW,
    BOT_DELETION_WORKFLOW,
    DELETION_PREVIEW_WORKFLOW,
    PROCESSOR_ERASURE_WORKFLOW,
    SITE_CREATION_WORKFLOW,
    SITE_DB_POOL_WORKFLOW,
    SITE_DELETION_WORKFLOW,
)

# A start while a run is open joins it.
ON_CONFLICT = WorkflowIDConflictPolicy.USE_EXISTING

# Bot and account deletion: a closed run may be followed by a new one, whatever way it closed. The gate is the bot
# or account row, not the run: the row is deleted only once none of its data remains, and a run is started only
# while it exists (lifecycle/deletion/starts.py). So a repeat after a cancel, a terminate, a failure, a completion
# whose services an operator skipped, or a restore starts a run that finishes from wherever the data stands, while
# a repeat after a real completion finds no row and starts nothing. ALLOW_DUPLICATE_FAILED_ONLY would refuse after
# an operator's skip, which completes the run with data left.
DELETION_REUSE = WorkflowIDReusePolicy.ALLOW_DUPLICATE
# Site creation: a completed run settled the site (active or rolled back) for good. One that was terminated, failed
# or timed out left it half-built or half-undone: a new run under the same id finishes or rolls it back.
SITE_CREATION_REUSE = WorkflowIDReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY
# Site teardown, the same for the API, the reconciler and the account deletion's children: a completed teardown
# left the site `deleted` for good (its domain may belong to another site by now), so it never runs again; one that
# was terminated, failed or cancelled left the database, files or row behind, and every teardown step is
# idempotent, so it can run again. An account deletion that meets a completed teardown waits for it instead
# (await_site_deletion), which returns at once.
SITE_DELETION_REUSE = WorkflowIDReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY
# Account export: a run terminated before its archive was ready can run again (its parts are kept); a completed
# one (its archive expired) never does; a new request makes a new export under a new id.
EXPORT_REUSE = WorkflowIDReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY
# A server's warm pool: one long-lived run per server (it continues as new); whatever closed the last run, a poke
# starts a new one, which carries on from the pool's rows.
POOL_REUSE = WorkflowIDReusePolicy.ALLOW_DUPLICATE
# Telling the processors: one run per deletion, and a completed one (every processor answered or skipped, the
# follow-up receipt signed) never runs again; one terminated or failed can, every step being idempotent.
PROCESSOR_ERASURE_REUSE = WorkflowIDReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY
# Deletion preview: it changes nothing, so every request after the last one closed counts afresh.
PREVIEW_REUSE = WorkflowIDReusePolicy.ALLOW_DUPLICATE


@dataclass(frozen=True)
class StartOptions:
    """A run's identity and labels, for a client's start or a parent's child start."""

    workflow_type: str
    id: str
    id_reuse_policy: WorkflowIDReusePolicy
    search_attributes: TypedSearchAttributes
    static_summary: str
    static_details: str
    # Background work carries its account as the task-queue fairness key (lifecycle/priorities.py).
    priority: Priority = Priority.default

    async def start(
        self,
        client: Client,
        arg: Any,
        *,
        task_queue: str,
        result_type: type | None = None,
        execution_timeout: timedelta | None = None,
        start_signal: str | None = None,
    ) -> WorkflowHandle[Any, Any]:
        """Start the run, or join the open one. `execution_timeout` bounds a run someone waits for (a preview);
        `start_signal` sends that signal to the run, starting it first if none is open (the warm pool's pokes,
        and tests)."""
        return await client.start_workflow(
            self.workflow_type,
            arg,
            id=self.id,
            task_queue=task_queue,
            result_type=result_type,
            execution_timeout=execution_timeout,
            start_signal=start_signal,
            id_conflict_policy=ON_CONFLICT,
            id_reuse_policy=self.id_reuse_policy,
            search_attributes=self.search_attributes,
            priority=self.priority,
            static_summary=self.static_summary,
            static_details=self.static_details,
        )

    def child(
        self, *, parent_close_policy: ParentClosePolicy, task_queue: str | None = None
    ) -> workflow.ChildWorkflowConfig:
        """Options for `workflow.execute_child_workflow`; no `task_queue`: the parent's."""
        return workflow.ChildWorkflowConfig(
            id=self.id,
            task_queue=task_queue,
            id_reuse_policy=self.id_reuse_policy,
            parent_close_policy=parent_close_policy,
            search_attributes=self.search_attributes,
            priority=self.priority,
            static_summary=self.static_summary,
            static_details=self.static_details,
        )


def _reapplying(receipt_id: str | None) -> str:
    return f" again, after a restore brought back what receipt {receipt_id} records as deleted" if receipt_id else ""


def bot_deletion_options(
    bot_id: str, account_id: str, *, within_account: bool = False, reapplies: str | None = None
) -> StartOptions:
    """`within_account`: a child of the account's deletion. `reapplies`: the receipt of the deletion this one
    makes again after a restore (python -m lifecycle.reapply), under an id of its own."""
    workflow_id = bot_deletion_id(bot_id)
    return StartOptions(
        workflow_type=BOT_DELETION_WORKFLOW,
        id=reapplied_deletion_id(workflow_id, reapplies) if reapplies else workflow_id,
        id_reuse_policy=DELETION_REUSE,
        search_attributes=deletion_search_attributes(account_id, bot_id),
        priority=deletion_priority(account_id),
        static_summary=f"Delete bot {bot_id}{' again' if reapplies else ''}",
        static_details=f"Part of deleting account {account_id}."
        if within_account
        else f"Deletes every row and file of bot {bot_id} (account {account_id}), by service{_reapplying(reapplies)}.",
    )


def account_deletion_options(
    account_id: str, *, deletes_at: datetime | None = None, reapplies: str | None = None
) -> StartOptions:
    """`deletes_at`: the end of a grace period still to come (None: none, or it is over). `reapplies`: the receipt
    of the deletion this one makes again after a restore (python -m lifecycle.reapply), under an id of its own."""
    workflow_id = account_deletion_id(account_id)
    return StartOptions(
        workflow_type=ACCOUNT_DELETION_WORKFLOW,
        id=reapplied_deletion_id(workflow_id, reapplies) if reapplies else workflow_id,
        id_reuse_policy=DELETION_REUSE,
        search_attributes=deletion_search_attributes(
            account_id, status=DeletionState.SCHEDULED if deletes_at else DeletionState.ACCEPTED
        ),
        priority=deletion_priority(account_id),
        static_summary=f"Delete account {account_id}"
        + (f" after {deletes_at:%Y-%m-%d %H:%M:%S} UTC" if deletes_at else "")
        + (" again" if reapplies else ""),
        static_details=(
            f"Deletes every bot of account {account_id} (child workflows), then the account row once "
            f"nothing of it remains, then emails the confirmation once{_reapplying(reapplies)}."
        ),
    )


def site_creation_options(site_id: str, account_id: str, *, roll_back: bool = False) -> StartOptions:
    return StartOptions(
        workflow_type=SITE_CREATION_WORKFLOW,
        id=site_creation_id(site_id),
        id_reuse_policy=SITE_CREATION_REUSE,
        search_attributes=site_search_attributes(account_id, site_id, SiteStatus.PROVISIONING),
        static_summary=f"{'Roll back' if roll_back else 'Create'} site {site_id}",
        static_details=f"Provision site {site_id} for account {account_id}: metadata, files, "
        "database, WordPress; rolls back on failure or cancellation.",
    )


def site_deletion_options(site_id: str, account_id: str, *, within_account: bool = False) -> StartOptions:
    """`within_account`: a child of the account's deletion."""
    return StartOptions(
        workflow_type=SITE_DELETION_WORKFLOW,
        id=site_deletion_id(site_id),
        id_reuse_policy=SITE_DELETION_REUSE,
        search_attributes=site_search_attributes(account_id, site_id, SiteStatus.DELETING),
        static_summary=f"Delete site {site_id}",
        static_details=f"Part of deleting account {account_id}."
        if within_account
        else f"Tear down site {site_id} of account {account_id}: database and role, files, metadata; frees the domain.",
    )


def account_export_options(export_id: str, account_id: str, workflow_id: str) -> StartOptions:
    """`workflow_id`: the export's, allocated with its row (lifecycle/exports/starts.py)."""
    return StartOptions(
        workflow_type=ACCOUNT_EXPORT_WORKFLOW,
        id=workflow_id,
        id_reuse_policy=EXPORT_REUSE,
        search_attributes=export_search_attributes(account_id),
        priority=deletion_priority(account_id),
        static_summary=f"Export account {account_id}",
        static_details=(
            f"Writes export {export_id} of account {account_id} (every bot's rows as JSON lines and every "
            "document file) into one ZIP, emails a signed link once, and deletes the archive when it expires."
        ),
    )


def site_db_pool_options(server: str) -> StartOptions:
    return StartOptions(
        workflow_type=SITE_DB_POOL_WORKFLOW,
        id=site_db_pool_id(server),
        id_reuse_policy=POOL_REUSE,
        search_attributes=TypedSearchAttributes.empty,
        static_summary=f"Warm pool of site-database server {server}",
        static_details=f"Keeps {server}'s pool_target databases ready to claim, at a bounded rate; drops the "
        "unclaimed ones when the server drains; removes half-made ones.",
    )


def deletion_preview_options(subject_kind: str, subject_id: str, account_id: str) -> StartOptions:
    """`subject_kind`: `bot` or `account`. No search attributes: a preview is no deletion, and nothing that lists
    deletions (the reconciler, operators' queries by status) should find it."""
    return StartOptions(
        workflow_type=DELETION_PREVIEW_WORKFLOW,
        id=deletion_preview_id(subject_kind, subject_id),
        id_reuse_policy=PREVIEW_REUSE,
        search_attributes=TypedSearchAttributes.empty,
        priority=deletion_priority(account_id),
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
        priority=deletion_priority(account_id),
        static_summary=f"Tell the processors of account {account_id}",
        static_details=f"Sends every registered processor one signed erasure request for {deletion_workflow_id}, "
        "retried until it acknowledges (or an operator skips it), then signs the follow-up receipt.",
    )
