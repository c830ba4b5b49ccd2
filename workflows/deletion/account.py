"""Deleting an account: every bot as a child deletion (bounded concurrency), its sites, then, only once
nothing of it remains, the account row and one email."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import replace
from datetime import datetime, timedelta
from typing import NoReturn

from temporalio import workflow
from temporalio.common import VersioningBehavior
from temporalio.exceptions import ActivityError, ApplicationError, ChildWorkflowError, WorkflowAlreadyStartedError
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    import workflows.activity_presets as presets
    import workflows.deletion.policies as policies
    from activities.deletion.account_sites import AccountSites
    from activities.deletion.grace import DeletionGrace
    from activities.deletion.notifications import Notifications
    from activities.deletion.records import BOT_DELETION_NOT_COMPLETED, DeletionRecords
    from activities.exports.steps import AccountExportActivities
    from lifecycle.deletion.contracts import (
        AccountDeletionInput,
        AccountDeletionResult,
        AwaitBotDeletionInput,
        BotDeletionInput,
        BotDeletionResult,
        DeletionEmailInput,
        FinishAccountDeletionInput,
        OperatorAction,
        ReceiptSubject,
        ServiceProgress,
    )
    from lifecycle.deletion.legal_holds import LEGAL_HOLD_CHANGED
    from lifecycle.deletion.workflow_types import ACCOUNT_DELETION_WORKFLOW, bot_deletion_id, bot_deletion_options
    from lifecycle.shared_contracts import AlertInput
    from lifecycle.sites.contracts import SiteDeletionInput
    from lifecycle.sites.workflow_types import site_deletion_id, site_deletion_options
    from lifecycle.statuses import DeletionState
    from workflows.deletion.after_erasure import before_receipt, tell_processors
    from workflows.deletion.bot import BotDeletionWorkflow
    from workflows.deletion.operator_gate import Decision
    from workflows.deletion.receipt_step import issue_receipt
    from workflows.deletion.workflow_base import DeletionWorkflowBase
    from workflows.sites.deletion import SiteDeletionWorkflow


def _add(totals: dict[str, ServiceProgress], services: dict[str, ServiceProgress], sign: int = 1) -> None:
    for name, progress in services.items():
        total = totals.setdefault(name, ServiceProgress())
        total.deleted += sign * progress.deleted
        total.total += sign * progress.total


def _redrive_backoff(attempt: int) -> timedelta:
    backoff = policies.CHILD_REDRIVE_BACKOFF * 2 ** (attempt - 1)
    return min(backoff, policies.CHILD_REDRIVE_BACKOFF_CAP)


# Pinned: a run never meets new code mid-history; it runs for hours or days (grace, waves of bot deletions), so
# it moves to a new current version at its next continue-as-new instead (_continue_as_new).
@workflow.defn(name=ACCOUNT_DELETION_WORKFLOW, versioning_behavior=VersioningBehavior.PINNED)
class AccountDeletionWorkflow(DeletionWorkflowBase):
    @workflow.init
    def __init__(self, request: AccountDeletionInput) -> None:
        super().__init__(request, nothing_to_reach=request.nothing_to_reach is not None)
        self._finished = list(request.finished_bot_ids)
        self._totals = {name: replace(p) for name, p in request.totals.items()}
        self._bots_total = len(self._finished)
        # The registry the account read before deleting its bots; None until then.
        self._registry = request.registry
        self._nothing_to_reach = request.nothing_to_reach
        # The grace period: `_in_grace` is true while nothing may be deleted yet and the account can still be
        # restored. Known from the input here, not in run(): an `expedite` or a `restore` handled in the run's first
        # workflow task is validated before run() starts, and was refused as "not in a grace period".
        self._grace = _grace_left(request)
        self._in_grace = self._grace is not None
        self._status = DeletionState.SCHEDULED if self._in_grace else self._open_status()
        # Bot deletions in flight (children, or runs a DELETE /bots started that we wait for): the operator's
        # signals and updates to the account reach them.
        self._bot_runs: set[str] = set()
        # What each bot deletion of this run counted, so a bot deleted again is not counted twice.
        self._counted: dict[str, dict[str, ServiceProgress]] = {}
        # Held while a message is forwarded to the bot deletions: they go out one at a time, each once the
        # previous one was delivered, so a `resume` never overtakes the `pause` sent before it.
        self._forwarding = asyncio.Lock()
        self._deletes_at = request.deletes_at
        self._expedited = False
        self._restored = False

    @workflow.run
    async def run(self, request: AccountDeletionInput) -> AccountDeletionResult:
        try:
            return await self._delete(request)
        except (asyncio.CancelledError, ActivityError, ChildWorkflowError) as stop:
            # Wherever the cancel reached the run (the grace, a wave of bots, a site, the hold's gate), its stop is
            # recorded as it stops; its bot deletions, cancelled with it, record theirs.
            await self._recorder.record_if_cancelled(stop, self._set_status)
            raise

    async def _delete(self, request: AccountDeletionInput) -> AccountDeletionResult:
        grace = self._grace
        if grace is None:
            # Asked first, so a deletion requested during a legal hold shows `held` from its start.
            await self._hold.refresh()
        # Published and recorded even where a hold found above already did: the run's first status, as it begins.
        self._record_status(self._shown_status)
        self._publish_details()
        if self._in_grace and grace is not None:
            if not await self._wait_out_grace(request, grace):
                return await self._close(request, DeletionState.RESTORED, row_deleted=False)
            if workflow.info().is_target_worker_deployment_version_changed():
                # A new version became current during the grace: delete with its code, not this run's.
                await self._continue_as_new(request)
        await self._wait_while_held(request)
        # The exports requested with `DELETE /account {"export_first": true}` are ready and mailed first.
        await self._await_exports(request)
        if self._registry is None:
            await self._read_registry(request)
        listed = await self._list_bots(request)
        await self._delete_bots(request, [bot_id for bot_id in listed if bot_id not in set(self._finished)])
        await self._delete_sites(request)

        if not (row_deleted := await self._finish_once_empty(request)):
            # An operator chose to stop with data left: the account stays, and nobody is told it is gone; the
            # receipt says what remains.
            await self._issue_receipt(request)
            return await self._close(request, DeletionState.INCOMPLETE, row_deleted=False)
        erasure = await before_receipt(request.account_id)
        receipt_id = await self._issue_receipt(request)
        await workflow.execute_activity_method(
            Notifications.send_deletion_confirmation,
            DeletionEmailInput(
                workflow_id=workflow.info().workflow_id,
                deleted_per_service={name: p.deleted for name, p in self._totals.items()},
                receipt_id=receipt_id,
            ),
            **presets.STEP,
            summary="email the deletion confirmation (once)",
        )
        await tell_processors(erasure, receipt_id)
        # Reaching no service (an operator's nothing_to_reach) is never `completed`: nobody confirmed that nothing
        # of the account's bots remains in the services; the receipt says so too.
        final = DeletionState.COMPLETED if self._registry else DeletionState.INCOMPLETE
        return await self._close(request, final, row_deleted=row_deleted)

    async def _read_registry(self, request: AccountDeletionInput) -> None:
        """Before any bot: an empty registry is waited on (workflows/deletion/registry_wait.py), once for the
        account rather than once per bot; a long wait continues as new, unread."""
        registry = await self._registry_wait.read(
            lambda: self._set_status(self._open_status()), give_up=self._time_to_continue_as_new
        )
        if registry is None:
            await self._continue_as_new(request)
        self._registry = registry.services

    async def _issue_receipt(self, request: AccountDeletionInput) -> str:
        return await issue_receipt(
            ReceiptSubject.ACCOUNT,
            request.account_id,
            request.account_id,
            [self._nothing_to_reach] if self._nothing_to_reach else [],
            registry=self._registry or [],
        )

    async def _wait_out_grace(self, request: AccountDeletionInput, grace: timedelta) -> bool:
        """False if an admin restored the account during its grace; True once deleting may begin."""
        # A timeout is the grace running out: deleting begins.
        with contextlib.suppress(TimeoutError):
            await workflow.wait_condition(
                lambda: self._expedited or self._restored,
                timeout=grace,
                timeout_summary=f"grace period of account {request.account_id}: nothing deleted until "
                f"{request.deletes_at} (admin restore or operator expedite end it)",
            )
        # Decided here, in the same workflow task as the timer or the update that ended the wait: from now on
        # a `restore` is refused, so an accepted one always means nothing was deleted.
        self._in_grace = False
        if self._restored:
            return False
        self._set_status(self._open_status())
        await workflow.execute_activity_method(
            DeletionGrace.end_account_deletion_grace,
            workflow.info().workflow_id,
            **presets.STEP,
            summary=f"record that the grace period of account {request.account_id} is over",
        )
        return True

    async def _await_exports(self, request: AccountDeletionInput) -> None:
        await workflow.execute_activity_method(
            AccountExportActivities.await_account_exports,
            request.account_id,
            **presets.AWAIT_RUN,
            summary=f"wait for the exports of account {request.account_id} requested before its deletion",
        )

    async def _close(
        self, request: AccountDeletionInput, status: DeletionState, *, row_deleted: bool
    ) -> AccountDeletionResult:
        self._set_status(status)
        await self._recorder.recorded()
        return AccountDeletionResult(
            account_id=request.account_id,
            bots_deleted=len(self._finished),
            services=self._totals,
            account_row_deleted=row_deleted,
            status=status,
        )

    async def _finish(self, request: AccountDeletionInput) -> bool:
        await self._wait_while_held(request)
        return await workflow.execute_activity_method(
            DeletionRecords.finish_account_deletion,
            FinishAccountDeletionInput(workflow_id=workflow.info().workflow_id, account_id=request.account_id),
            **presets.STEP,
            summary=f"delete the keys and row of account {request.account_id} if nothing of it remains",
        )

    async def _finish_once_empty(self, request: AccountDeletionInput) -> bool:
        """True once the account row is gone; False if an operator skipped with something left."""
        rounds = 0
        while not await self._finish(request):
            # Something remains: a bot an operator skipped, a bot created while the keys were being revoked,
            # a leftover site. List again and delete again; after a few rounds, an operator decides.
            rounds += 1
            if rounds >= policies.FINISH_ROUNDS:
                rounds = 0
                if await self._ask_operator(request) == Decision.SKIP:
                    return False
            await self._delete_bots(request, await self._list_bots(request))
            await self._delete_sites(request)
        return True

    async def _ask_operator(self, request: AccountDeletionInput) -> Decision:
        alert = AlertInput(
            workflow_id=workflow.info().workflow_id,
            subject="account deletion: data remains",
            reason=f"bots or sites of account {request.account_id} remained after "
            f"{policies.FINISH_ROUNDS} rounds of deleting; `retry` goes around again, `skip` ends it incomplete",
        )
        return await self._ask("remaining bots or sites", alert)

    async def _list_bots(self, request: AccountDeletionInput) -> list[str]:
        return await workflow.execute_activity_method(
            DeletionRecords.list_account_bots,
            request.account_id,
            **presets.STEP,
            summary=f"list the bots of account {request.account_id}",
        )

    async def _delete_bots(self, request: AccountDeletionInput, pending: list[str]) -> None:
        self._bots_total = len(set(self._finished) | set(pending))
        self._publish_details()
        for start in range(0, len(pending), request.max_concurrent_bots):
            await self._wait_while_held(request)
            wave = pending[start : start + request.max_concurrent_bots]
            for result in await asyncio.gather(*(self._delete_bot(request, bot_id) for bot_id in wave)):
                if result.bot_id in self._counted:
                    _add(self._totals, self._counted[result.bot_id], sign=-1)
                _add(self._totals, result.services)
                self._counted[result.bot_id] = result.services
                if result.bot_id not in self._finished:
                    self._finished.append(result.bot_id)
            self._publish_details()
            more = start + request.max_concurrent_bots < len(pending)
            # After a wave, never before one, and once every message handler has finished, so no message
            # waiting its turn is lost with this run.
            if more and self._time_to_continue_as_new():
                await self._continue_as_new(request)

    async def _delete_bot(self, request: AccountDeletionInput, bot_id: str) -> BotDeletionResult:
        """The bot's deletion to its end: one that closes without completing is started again after a backoff."""
        workflow_id = bot_deletion_id(bot_id)
        self._bot_runs.add(workflow_id)
        attempt = 0
        try:
            while True:
                try:
                    return await self._run_bot_deletion(request, bot_id)
                except (ChildWorkflowError, ActivityError) as err:
                    if workflow.cancellation_reason() is not None or not _closed_without_completing(err):
                        raise
                    attempt += 1
                    workflow.logger.warning("%s closed without completing (%s); starting it again", workflow_id, err)
                    await workflow.sleep(_redrive_backoff(attempt), summary=f"before deleting bot {bot_id} again")
        finally:
            self._bot_runs.discard(workflow_id)

    async def _run_bot_deletion(self, request: AccountDeletionInput, bot_id: str) -> BotDeletionResult:
        workflow_id = bot_deletion_id(bot_id)
        try:
            return await workflow.execute_child_workflow(
                BotDeletionWorkflow.run,
                BotDeletionInput(
                    bot_id=bot_id,
                    account_id=request.account_id,
                    paused=self._paused,
                    legal_hold_recheck_seconds=request.legal_hold_recheck_seconds,
                    registry_recheck_seconds=request.registry_recheck_seconds,
                    registry_settle_seconds=request.registry_settle_seconds,
                    # The account deletion runs its own bots a few at a time (max_concurrent_bots); they take no lane.
                    takes_account_lane=False,
                    operator_actions=[self._nothing_to_reach] if self._nothing_to_reach else [],
                ),
                # Cancelling the account deletion cancels its bots; the deleters are safe to stop anywhere.
                **bot_deletion_options(bot_id, request.account_id, within_account=True).child(
                    parent_close_policy=ParentClosePolicy.REQUEST_CANCEL
                ),
            )
        except WorkflowAlreadyStartedError:
            # A DELETE /bots (or an earlier run of ours) already started it: wait for that one instead.
            # It follows the account's pause state from here on, as the account's own children do: a reset
            # leaves the old run's children running, paused if the account was, and a `resume` sent to the
            # reset run before it took them over would otherwise never reach them.
            await self._forward(only=workflow_id)
            return await workflow.execute_activity_method(
                DeletionRecords.await_bot_deletion,
                AwaitBotDeletionInput(workflow_id=workflow_id),
                **presets.AWAIT_RUN,
                summary=f"wait for the running deletion of bot {bot_id}",
            )

    async def _delete_sites(self, request: AccountDeletionInput) -> None:
        """Creations in flight are cancelled (they roll back); every remaining site is torn down."""
        await self._wait_while_held(request)
        await workflow.execute_activity_method(
            AccountSites.stop_account_site_creations,
            request.account_id,
            **presets.AWAIT_RUN,
            summary=f"cancel the site creations of account {request.account_id}",
        )
        site_ids = await workflow.execute_activity_method(
            AccountSites.list_account_sites,
            request.account_id,
            **presets.STEP,
            summary=f"list the sites of account {request.account_id}",
        )
        for start in range(0, len(site_ids), request.max_concurrent_bots):
            wave = site_ids[start : start + request.max_concurrent_bots]
            await asyncio.gather(*(self._delete_site(request, site_id) for site_id in wave))
        sites = self._totals.get("sites", ServiceProgress(done=True))
        self._totals["sites"] = ServiceProgress(
            deleted=sites.deleted + len(site_ids), total=sites.total + len(site_ids), done=True
        )
        self._publish_details()

    async def _delete_site(self, request: AccountDeletionInput, site_id: str) -> None:
        workflow_id = site_deletion_id(site_id)
        try:
            await workflow.execute_child_workflow(
                SiteDeletionWorkflow.run,
                SiteDeletionInput(site_id=site_id),
                **site_deletion_options(site_id, request.account_id, within_account=True).child(
                    parent_close_policy=ParentClosePolicy.ABANDON,
                    # Customer-facing queue (with its own slots); none given: the account deletion's own queue.
                    task_queue=request.site_task_queue or None,
                ),
            )
        except WorkflowAlreadyStartedError:
            await workflow.execute_activity_method(
                AccountSites.await_site_deletion,
                workflow_id,
                **presets.AWAIT_RUN,
                summary=f"wait for the running deletion of site {site_id}",
            )

    async def _continue_as_new(self, request: AccountDeletionInput) -> NoReturn:
        # Once every message handler has finished, so no message waiting its turn is lost with this run, and its
        # last status change is recorded (the next run records its own, never before this one's).
        await workflow.wait_condition(lambda: workflow.all_handlers_finished() and self._recorder.is_recorded())
        # Past its grace (if it had one): the next run deletes on at once, even if the grace was expedited.
        self._continue_on_current_version(
            replace(
                request,
                finished_bot_ids=self._finished,
                totals=self._totals,
                deletes_at=None,
                paused=self._paused,
                registry=self._registry,
                no_service_alerted=self._registry_wait.alerted,
                nothing_to_reach=self._nothing_to_reach,
            )
        )

    async def _wait_while_held(self, request: AccountDeletionInput) -> None:
        """At once without a legal hold; else once it is released. A hold that outlasts this run's history
        continues as new: the next run asks again first."""
        if not await self._hold.wait_until_released(give_up=self._time_to_continue_as_new):
            await self._continue_as_new(request)

    def _show_status(self) -> None:
        # In the grace it stays `scheduled`: nothing runs to pause or hold yet (the hold is waited for once the grace
        # is over, and deleting then starts paused if it was paused).
        if not self._in_grace:
            super()._show_status()

    def _details(self) -> str:
        if self._in_grace:
            return f"scheduled: deletes at {self._deletes_at}; an admin may restore the account until then"
        deleted = sum(p.deleted for p in self._totals.values())
        return f"bots: {len(self._finished)} of {self._bots_total} deleted ({deleted:,} rows); {self._status}"

    def _services(self) -> dict[str, ServiceProgress]:
        return self._totals

    async def _forward(self, decision: Decision | None = None, *, only: str | None = None) -> int:
        """Send `decision`, or else the account's pause state, to every bot deletion in flight (or to `only`);
        one that closed meanwhile is skipped."""
        async with self._forwarding:
            return await self._send(decision, only)

    async def _send(self, decision: Decision | None, only: str | None) -> int:
        message = decision or ("pause" if self._paused else "resume")
        runs = [only] if only is not None else sorted(self._bot_runs)
        for workflow_id in runs:
            await self._signal_bot(workflow_id, message)
        return len(runs)

    @staticmethod
    async def _signal_bot(workflow_id: str, message: str) -> None:
        try:
            await workflow.get_external_workflow_handle(workflow_id).signal(message)
        except Exception as err:  # a bot deletion that closed meanwhile needs no message
            workflow.logger.info("%s not forwarded to %s: %s", message, workflow_id, err)

    async def _set_paused(self, paused: bool) -> None:
        """The bot deletions in flight pause after their current slice (or resume), and new ones start so."""
        await super()._set_paused(paused)
        await self._forward()

    @workflow.signal(name=LEGAL_HOLD_CHANGED)
    async def legal_hold_changed(self) -> None:
        """The API placed or released a hold on the account: asked now, so the status shows it while the bot
        deletions (which the API signals too) stop or go on at their next batch boundary."""
        self._hold.changed()
        await self._hold.refresh()

    async def _unasked(self, decision: Decision) -> str:
        """With no question of the account's own, the bot deletions' (each takes or ignores it)."""
        forwarded = await self._forward(decision)
        if not forwarded:
            await super()._unasked(decision)  # nothing waits anywhere: logged and shown as ignored
        return f"{decision} sent to {forwarded} bot deletions"

    def _refusal(self, decision: Decision) -> str | None:
        if self._bot_runs:
            return None
        return super()._refusal(decision)

    def _took_nothing_to_reach(self, action: OperatorAction) -> None:
        self._nothing_to_reach = action

    @workflow.update
    def restore(self) -> str:
        """An admin's restore (POST /accounts/{id}/restore): the run ends `restored`, having deleted nothing."""
        self._restored = True
        return "restored: the deletion was cancelled during its grace period; nothing was deleted"

    @restore.validator
    def _validate_restore(self) -> None:
        if (refused := self._grace_refusal()) is not None:
            raise ValueError(refused)

    @workflow.update
    def expedite(self) -> str:
        """An operator's expedite: the grace period ends now and the deletion proceeds as it would after it."""
        self._expedited = True
        return "expedited: the grace period ended; deleting"

    @expedite.validator
    def _validate_expedite(self) -> None:
        if (refused := self._grace_refusal()) is not None:
            raise ValueError(refused)

    def _grace_refusal(self) -> str | None:
        if self._restored:
            return "the account was already restored; this deletion is ending"
        if self._expedited:
            return "the grace period was expedited: the deletion has begun"
        if not self._in_grace:
            return f"not in a grace period: the deletion is {self._status}"
        return None


def _grace_left(request: AccountDeletionInput) -> timedelta | None:
    """What remains of the grace period, if any: a run started after it ended deletes at once."""
    if request.deletes_at is None:
        return None
    left = datetime.fromisoformat(request.deletes_at) - workflow.now()
    return left if left > timedelta(0) else None


def _closed_without_completing(err: ChildWorkflowError | ActivityError) -> bool:
    """A bot deletion cancelled, terminated or failed (not this workflow's own activity failing)."""
    if isinstance(err, ChildWorkflowError):
        return True
    cause = err.cause
    return isinstance(cause, ApplicationError) and cause.type == BOT_DELETION_NOT_COMPLETED
