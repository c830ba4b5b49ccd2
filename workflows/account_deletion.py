"""Deleting an account: every bot as a child deletion (bounded concurrency), the account row, one email."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from temporalio import workflow
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from lifecycle.contracts import (
        AccountDeletionInput,
        AccountDeletionResult,
        AwaitBotDeletionInput,
        BotDeletionInput,
        BotDeletionResult,
        DeletionEmailInput,
        DeletionStatus,
        FinishAccountDeletionInput,
        ServiceProgress,
        SiteDeletionInput,
    )
    from lifecycle.deletion_starts import ON_REUSE, deletion_search_attributes
    from lifecycle.search_attributes import LIFECYCLE_STATUS, site_search_attributes
    from lifecycle.workflow_ids import bot_deletion_id, site_deletion_id
    from lifecycle.workflow_types import (
        ACCOUNT_DELETION_WORKFLOW,
        BOT_DELETION_WORKFLOW,
        SITE_DELETION_WORKFLOW,
    )
    from workflows import policies


def _add(totals: dict[str, ServiceProgress], services: dict[str, ServiceProgress]) -> None:
    for name, progress in services.items():
        total = totals.setdefault(name, ServiceProgress())
        total.deleted += progress.deleted
        total.total += progress.total


@workflow.defn(name=ACCOUNT_DELETION_WORKFLOW)
class AccountDeletionWorkflow:
    @workflow.init
    def __init__(self, request: AccountDeletionInput) -> None:
        self._finished = list(request.finished_bot_ids)
        self._totals = {name: replace(p) for name, p in request.totals.items()}
        self._bots_total = len(self._finished)
        self._status = "running"

    @workflow.run
    async def run(self, request: AccountDeletionInput) -> AccountDeletionResult:
        workflow.upsert_search_attributes([LIFECYCLE_STATUS.value_set("running")])
        self._publish_details()
        bot_ids = await workflow.execute_activity(
            "list_account_bots",
            request.account_id,
            result_type=list[str],
            start_to_close_timeout=policies.STEP_TIMEOUT,
            retry_policy=policies.STEP_RETRY,
            summary=f"list the bots of account {request.account_id}",
        )
        pending = [bot_id for bot_id in bot_ids if bot_id not in set(self._finished)]
        self._bots_total = len(self._finished) + len(pending)
        self._publish_details()
        for start in range(0, len(pending), request.max_concurrent_bots):
            self._continue_as_new_if_long(request)
            wave = pending[start : start + request.max_concurrent_bots]
            for result in await asyncio.gather(*(self._delete_bot(request, bot_id) for bot_id in wave)):
                _add(self._totals, result.services)
                self._finished.append(result.bot_id)
            self._publish_details()

        await self._delete_sites(request)

        row_deleted = await workflow.execute_activity(
            "finish_account_deletion",
            FinishAccountDeletionInput(workflow_id=workflow.info().workflow_id, account_id=request.account_id),
            result_type=bool,
            start_to_close_timeout=policies.STEP_TIMEOUT,
            retry_policy=policies.STEP_RETRY,
            summary=f"delete the keys and row of account {request.account_id}",
        )
        await workflow.execute_activity(
            "send_deletion_confirmation",
            DeletionEmailInput(
                workflow_id=workflow.info().workflow_id,
                deleted_per_service={name: p.deleted for name, p in self._totals.items()},
            ),
            result_type=bool,
            start_to_close_timeout=policies.STEP_TIMEOUT,
            retry_policy=policies.STEP_RETRY,
            summary="email the deletion confirmation (once)",
        )
        self._status = "completed"
        workflow.upsert_search_attributes([LIFECYCLE_STATUS.value_set("completed")])
        self._publish_details()
        return AccountDeletionResult(
            account_id=request.account_id,
            bots_deleted=len(self._finished),
            services=self._totals,
            account_row_deleted=row_deleted,
        )

    async def _delete_bot(self, request: AccountDeletionInput, bot_id: str) -> BotDeletionResult:
        workflow_id = bot_deletion_id(bot_id)
        try:
            return await workflow.execute_child_workflow(
                BOT_DELETION_WORKFLOW,
                BotDeletionInput(bot_id=bot_id, account_id=request.account_id),
                id=workflow_id,
                result_type=BotDeletionResult,
                id_reuse_policy=ON_REUSE,
                # Cancelling the account deletion cancels its bots; the deleters are safe to stop anywhere.
                parent_close_policy=ParentClosePolicy.REQUEST_CANCEL,
                search_attributes=deletion_search_attributes(request.account_id, bot_id),
                static_summary=f"Delete bot {bot_id}",
                static_details=f"Part of deleting account {request.account_id}.",
            )
        except WorkflowAlreadyStartedError:
            # A DELETE /bots (or an earlier run of ours) already started it: wait for that one instead.
            return await workflow.execute_activity(
                "await_bot_deletion",
                AwaitBotDeletionInput(workflow_id=workflow_id),
                result_type=BotDeletionResult,
                start_to_close_timeout=policies.AWAIT_DELETION_TIMEOUT,
                heartbeat_timeout=policies.AWAIT_DELETION_HEARTBEAT,
                retry_policy=policies.STEP_RETRY,
                summary=f"wait for the running deletion of bot {bot_id}",
            )

    async def _delete_sites(self, request: AccountDeletionInput) -> None:
        """Creations in flight are cancelled (they roll back); every remaining site is torn down."""
        await workflow.execute_activity(
            "stop_account_site_creations",
            request.account_id,
            result_type=int,
            start_to_close_timeout=policies.AWAIT_DELETION_TIMEOUT,
            heartbeat_timeout=policies.AWAIT_DELETION_HEARTBEAT,
            retry_policy=policies.STEP_RETRY,
            summary=f"cancel the site creations of account {request.account_id}",
        )
        site_ids = await workflow.execute_activity(
            "list_account_sites",
            request.account_id,
            result_type=list[str],
            start_to_close_timeout=policies.STEP_TIMEOUT,
            retry_policy=policies.STEP_RETRY,
            summary=f"list the sites of account {request.account_id}",
        )
        for start in range(0, len(site_ids), request.max_concurrent_bots):
            wave = site_ids[start : start + request.max_concurrent_bots]
            await asyncio.gather(*(self._delete_site(request, site_id) for site_id in wave))
        self._totals["sites"] = ServiceProgress(deleted=len(site_ids), total=len(site_ids), done=True)
        self._publish_details()

    async def _delete_site(self, request: AccountDeletionInput, site_id: str) -> None:
        workflow_id = site_deletion_id(site_id)
        try:
            await workflow.execute_child_workflow(
                SITE_DELETION_WORKFLOW,
                SiteDeletionInput(site_id=site_id),
                id=workflow_id,
                id_reuse_policy=ON_REUSE,
                parent_close_policy=ParentClosePolicy.ABANDON,
                search_attributes=site_search_attributes(request.account_id, site_id, "deleting"),
                static_summary=f"Delete site {site_id}",
                static_details=f"Part of deleting account {request.account_id}.",
            )
        except WorkflowAlreadyStartedError:
            await workflow.execute_activity(
                "await_site_deletion",
                workflow_id,
                start_to_close_timeout=policies.AWAIT_DELETION_TIMEOUT,
                heartbeat_timeout=policies.AWAIT_DELETION_HEARTBEAT,
                retry_policy=policies.STEP_RETRY,
                summary=f"wait for the running deletion of site {site_id}",
            )

    def _continue_as_new_if_long(self, request: AccountDeletionInput) -> None:
        info = workflow.info()
        if info.get_current_history_length() < request.continue_as_new_after_events and not (
            info.is_continue_as_new_suggested()
        ):
            return
        workflow.continue_as_new(replace(request, finished_bot_ids=self._finished, totals=self._totals))

    def _publish_details(self) -> None:
        deleted = sum(p.deleted for p in self._totals.values())
        workflow.set_current_details(
            f"bots: {len(self._finished)} of {self._bots_total} deleted ({deleted:,} rows); {self._status}"
        )

    @workflow.query
    def progress(self) -> DeletionStatus:
        return DeletionStatus(status=self._status, services=self._totals, batch_size=0)
