"""The reconciler's one step: drive on every deletion the database asks for that no run is working on, then
record the statuses only Temporal knows.

The rule (also in the runbook, docs/operations.md):
- never started (the API died between its commit and the start): started;
- FAILED or TIMED_OUT (crash-like: nobody chose it): started again, counting on from deletion_progress;
- CANCELED or TERMINATED: a deliberate operator stop, never overridden here. A repeated `DELETE /bots/{id}`
  or the admin's `POST /accounts/{id}/deletion` drives it on;
- COMPLETED while the row remains (an operator skipped a service): the operator's decision, likewise left;
- RUNNING (or continued as new): nothing to do.

Then every deletion recorded as open (deletion_requests.status, which the API reads) whose latest run closed
without recording it gets the closing recorded: `terminated`, `cancelled`, `failed` (or, from a run of code
older than the recording, the status it published as it completed). So does one whose open run has recorded
nothing yet, after a reset: the status the run publishes. Each write is a compare-and-set on what the pass read,
so a run that records meanwhile wins. A record that stands, its run still open, is confirmed: its
`status_confirmed_at` (the API's `as_of`) moves to now, so a run stopped without a word shows how old its status is.
An open run's calls that Temporal holds back (a Nexus endpoint's circuit breaker open) are recorded per service
(activities/deletion/blocked_calls.py).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import text
from temporalio import activity
from temporalio.client import Client, WorkflowExecutionDescription, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from activities.deletion.account_lanes import open_lanes_after
from activities.deletion.blocked_calls import record_blocked_calls
from activities.resources import ActivityResources
from lifecycle.deletion.contracts import ACCOUNT_LANE_OPENED
from lifecycle.deletion.starts import row_check, start_account_deletion, start_bot_deletion
from lifecycle.deletion.workflow_types import account_deletion_id, bot_deletion_id
from lifecycle.search_attributes import LIFECYCLE_STATUS
from lifecycle.shared_contracts import ReconcileResult
from lifecycle.statuses import OPEN_DELETION_STATES, OPEN_DELETIONS_SQL, DeletionState

# Rows read per page; the run goes through every page, in id order.
PAGE_SIZE = 500
_RESTARTED = (WorkflowExecutionStatus.FAILED, WorkflowExecutionStatus.TIMED_OUT)
# The lowest uuid: the key-set paging starts below every id.
_FIRST = uuid.UUID(int=0)

_CLOSINGS = {
    WorkflowExecutionStatus.CANCELED: DeletionState.CANCELLED,
    WorkflowExecutionStatus.TERMINATED: DeletionState.TERMINATED,
    WorkflowExecutionStatus.FAILED: DeletionState.FAILED,
    WorkflowExecutionStatus.TIMED_OUT: DeletionState.FAILED,
}
# How a completed run ends, as it publishes it: completed, incomplete (a skip) or restored (in its grace period).
_COMPLETIONS = frozenset({DeletionState.COMPLETED, DeletionState.INCOMPLETE, DeletionState.RESTORED})
_OPEN_RECORDS = text(
    f"SELECT workflow_id, status, status_run_id FROM deletion_requests WHERE {OPEN_DELETIONS_SQL}"
    " AND workflow_id > :after ORDER BY workflow_id LIMIT :n"
)
_AS_SEEN = "workflow_id = :workflow_id AND status = :seen AND status_run_id IS NOT DISTINCT FROM :seen_run_id"
_RECORD_OBSERVED = text(
    "UPDATE deletion_requests SET status = :status, status_reason = NULL, status_run_id = :run_id,"
    f" status_confirmed_at = now() WHERE {_AS_SEEN}"
)
# The record stands and its run is still open: the status is true as of now (the API shows it as `as_of`).
_CONFIRM = text(f"UPDATE deletion_requests SET status_confirmed_at = now() WHERE {_AS_SEEN}")


async def latest_run_status(client: Client, workflow_id: str) -> WorkflowExecutionStatus | None:
    """The latest run's status; None when no run ever had this id."""
    try:
        description = await client.get_workflow_handle(workflow_id).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return None
        raise
    return description.status


def _observed_status(description: WorkflowExecutionDescription, recorded_by: str | None) -> DeletionState | None:
    """What the latest run says that its deletion's record (open, written by run `recorded_by`) does not; None
    when the record stands: the run is open and recorded it itself, or nothing better is known."""
    published = description.typed_search_attributes.get(LIFECYCLE_STATUS)
    if description.status == WorkflowExecutionStatus.RUNNING:
        if description.run_id == recorded_by or published not in OPEN_DELETION_STATES:
            return None
        return DeletionState(published)
    if description.status == WorkflowExecutionStatus.COMPLETED:
        return DeletionState(published) if published in _COMPLETIONS else DeletionState.COMPLETED
    return _CLOSINGS.get(description.status) if description.status is not None else None


async def needs_start(client: Client, workflow_id: str) -> bool:
    """True when no run ever had this id, or the last one failed or timed out (see the module's rule)."""
    status = await latest_run_status(client, workflow_id)
    return status is None or status in _RESTARTED


class Reconciler:
    def __init__(self, resources: ActivityResources) -> None:
        self._resources = resources

    async def _page(self, sql: str, after: uuid.UUID) -> list[tuple[uuid.UUID, Any]]:
        async with self._resources.engine.connect() as conn:
            rows = await conn.execute(text(sql), {"after": after, "n": PAGE_SIZE})
            return [(row[0], row[1]) for row in rows]

    # A run that completed between this page's read and the start is not followed by a second one
    # (lifecycle/deletion/starts.py). False: the deletion is done (its row went meanwhile), and nothing was started.

    async def _start_bot_deletion(self, bot_id: uuid.UUID, account_id: uuid.UUID) -> bool:
        return await start_bot_deletion(
            self._resources.client,
            self._resources.settings.task_queue,
            bot_id=str(bot_id),
            account_id=str(account_id),
            row_exists=row_check(self._resources.engine, "bots", bot_id),
            registry_settle_seconds=self._resources.settings.deletion_registry_settle_seconds,
        )

    async def _start_account_deletion(self, account_id: uuid.UUID, deletes_at: datetime | None) -> bool:
        settings = self._resources.settings
        return await start_account_deletion(
            self._resources.client,
            settings.task_queue,
            account_id=str(account_id),
            site_task_queue=settings.site_task_queue,
            row_exists=row_check(self._resources.engine, "accounts", account_id),
            deletes_at=deletes_at,
            registry_settle_seconds=settings.deletion_registry_settle_seconds,
        )

    @activity.defn(name="reconcile_deletions")
    async def reconcile_deletions(self) -> ReconcileResult:
        client = self._resources.client
        result = ReconcileResult()
        after = _FIRST
        # Marked bots whose row remains: settled ones are gone (the row goes when the data is gone).
        while page := await self._page(
            "SELECT id, account_id FROM bots WHERE deletion_requested_at IS NOT NULL AND id > :after"
            " ORDER BY id LIMIT :n",
            after,
        ):
            for bot_id, account_id in page:
                if await needs_start(client, bot_deletion_id(bot_id)) and await self._start_bot_deletion(
                    bot_id, account_id
                ):
                    result.bot_deletions_started += 1
                activity.heartbeat()
            after = page[-1][0]
        after = _FIRST
        while page := await self._page(
            # With the end of its grace period: a run the reconciler starts deletes nothing before it either.
            "SELECT a.id, r.deletes_at FROM accounts a LEFT JOIN deletion_requests r"
            " ON r.account_id = a.id AND r.kind = 'account'"
            " WHERE a.deletion_requested_at IS NOT NULL AND a.id > :after ORDER BY a.id LIMIT :n",
            after,
        ):
            for account_id, deletes_at in page:
                if await needs_start(client, account_deletion_id(account_id)) and await self._start_account_deletion(
                    account_id, deletes_at
                ):
                    result.account_deletions_started += 1
                activity.heartbeat()
            after = page[-1][0]
        if result.bot_deletions_started or result.account_deletions_started:
            activity.logger.warning("reconciler started deletions: %s", result)
        result.deletion_statuses_recorded = await self._record_observed_statuses()
        return result

    async def _record_observed_statuses(self) -> int:
        """The module's last rule: the deletions recorded as open, against how their latest runs stand."""
        recorded = 0
        after = ""
        while True:
            async with self._resources.engine.connect() as conn:
                page = list(await conn.execute(_OPEN_RECORDS, {"after": after, "n": PAGE_SIZE}))
            if not page:
                return recorded
            for workflow_id, seen, seen_run_id in page:
                recorded += await self._record_observed(workflow_id, seen, seen_run_id)
                activity.heartbeat()
            after = page[-1][0]

    async def _record_observed(self, workflow_id: str, seen: str, seen_run_id: str | None) -> int:
        try:
            description = await self._resources.client.get_workflow_handle(workflow_id).describe()
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                return 0  # recorded, not started yet: the passes above start it, and it records itself
            raise
        observed = _observed_status(description, seen_run_id)
        if description.status == WorkflowExecutionStatus.RUNNING:
            await record_blocked_calls(self._resources.engine, workflow_id, description)
        if observed is None or observed == seen:
            if description.status == WorkflowExecutionStatus.RUNNING:
                async with self._resources.engine.begin() as conn:
                    await conn.execute(_CONFIRM, {"workflow_id": workflow_id, "seen": seen, "seen_run_id": seen_run_id})
            return 0
        async with self._resources.engine.begin() as conn:
            written = await conn.execute(
                _RECORD_OBSERVED,
                {
                    "workflow_id": workflow_id,
                    "status": observed.value,
                    "run_id": description.run_id,
                    "seen": seen,
                    "seen_run_id": seen_run_id,
                },
            )
        if written.rowcount:
            activity.logger.warning("%s: recorded %s (was %s), from Temporal", workflow_id, observed, seen)
            if observed not in OPEN_DELETION_STATES:
                await self._hand_on_lane(workflow_id)
        return int(written.rowcount or 0)

    async def _hand_on_lane(self, workflow_id: str) -> None:
        """A run closed without a word (terminated) freed its account lane: the next in line is told now, as the
        run itself would have told it, rather than at its own recheck."""
        opened = await open_lanes_after(
            self._resources.engine, workflow_id, self._resources.settings.account_deletions_at_once
        )
        for other in opened:
            try:
                await self._resources.client.get_workflow_handle(other).signal(ACCOUNT_LANE_OPENED)
            except RPCError as err:
                if err.status != RPCStatusCode.NOT_FOUND:
                    raise
