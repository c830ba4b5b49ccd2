"""Test-only activities registered under the real names, to drive the real workflow down every branch.

They replace the database work and the services, not Temporal: the workflow runs on a real (time-skipping) test
server, and each fake service answers the contract's calls on a task queue of its own, as a registered one does.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker

from lifecycle.deletion.contracts import (
    AccountLaneAnswer,
    AccountLaneRequest,
    DeletionBudget,
    FinishBotDeletionInput,
    FinishBotDeletionResult,
    ReceiptInput,
    RegisteredService,
    ServiceProgressRecord,
    ServiceRegistry,
)
from lifecycle.deletion.v1.service_pb2 import DeleteRequest, DeleteResponse, VerifyRequest, VerifyResponse
from lifecycle.shared_contracts import AlertInput, DeletionStatusChange
from lifecycle.statuses import DeletionState

ROWS_PER_SERVICE = 1_000
# The fake services every run finds registered, each on a queue of its own.
SERVICES = ("notes", "events", "files")


@dataclass
class ServiceCall:
    service: str
    request: DeleteRequest


@dataclass
class FakeBotServices:
    """Each service holds ROWS_PER_SERVICE rows; a call deletes `rows_per_call` of them."""

    rows_per_call: int = 250
    # service -> how many calls fail before it works; -1 fails forever.
    failures: dict[str, int] = field(default_factory=dict)
    non_retryable: bool = True
    # When set, the first DeleteSubjectData call waits for it (heartbeating), so tests can act mid-call.
    gate: asyncio.Event | None = None
    calls: list[ServiceCall] = field(default_factory=list)
    alerts: list[AlertInput] = field(default_factory=list)
    finished: list[FinishBotDeletionInput] = field(default_factory=list)
    receipts: list[ReceiptInput] = field(default_factory=list)
    # Every status the run recorded, in order.
    statuses: list[DeletionState] = field(default_factory=list)
    cancelled: int = 0
    # How many of `notes`' own counts find a row again after it said done (a writer racing the deletion).
    reappearing: int = 0
    # Raising an alert fails for good: the run must reach its operator all the same.
    alerts_fail: bool = False
    # The registry read's answer: set by the harness to every fake service on its own queue.
    registered: list[RegisteredService] = field(default_factory=list)
    registry_reads: int = 0
    service_records: list[ServiceProgressRecord] = field(default_factory=list)

    def activities(self) -> list[Callable[..., Any]]:
        """The gateway's own activities, on the workflow's queue."""
        return [
            self.raise_alert,
            self.finish_bot_deletion,
            self.issue_deletion_receipt,
            self.record_deletion_status,
            self.list_deletion_services,
            self.record_service_progress,
            self.legal_hold_in_force,
            self.take_account_lane,
            self.open_account_lanes,
        ]

    @contextlib.asynccontextmanager
    async def serving(self, client: Client, queue_prefix: str) -> AsyncIterator[None]:
        """A worker per fake service, each on its own queue, registered for the runs to find."""
        self.registered = [RegisteredService(name, f"{queue_prefix}-{name}") for name in SERVICES]
        async with contextlib.AsyncExitStack() as stack:
            for service in self.registered:
                await stack.enter_async_context(
                    Worker(
                        client,
                        task_queue=service.task_queue,
                        activities=self._contract(service.name),
                        # Heartbeats reach the server at once, so a cancellation reaches a held call in moments
                        # (a service call has no heartbeat timeout, and the SDK would otherwise wait 30 s).
                        default_heartbeat_throttle_interval=timedelta(milliseconds=100),
                    )
                )
            yield

    def _contract(self, service: str) -> list[Callable[..., Any]]:
        @activity.defn(name="DeleteSubjectData")
        async def delete_subject_data(request: DeleteRequest) -> DeleteResponse:
            """The service's cursor is the count deleted so far; after done, a call starts from the bottom."""
            self.calls.append(ServiceCall(service, request))
            if self.gate is not None and len(self.calls) == 1:
                try:
                    while not self.gate.is_set():
                        activity.heartbeat()
                        await asyncio.sleep(0.05)  # held while the gate is shut
                except asyncio.CancelledError:
                    self.cancelled += 1
                    raise
            left = self.failures.get(service, 0)
            if left != 0:
                self.failures[service] = left - 1
                raise ApplicationError(f"{service} is broken", non_retryable=self.non_retryable)
            before = int(request.cursor or 0)
            if before == ROWS_PER_SERVICE:
                # Asked again after done: what reappeared (one row), then done again.
                return DeleteResponse(rows_deleted=1, cursor=str(ROWS_PER_SERVICE), done=True)
            after = min(ROWS_PER_SERVICE, before + self.rows_per_call)
            return DeleteResponse(
                rows_deleted=after - before,
                cursor=str(after),
                done=after == ROWS_PER_SERVICE,
                remaining_rows_estimate=ROWS_PER_SERVICE - after,
            )

        @activity.defn(name="VerifySubjectErased")
        async def verify_subject_erased(request: VerifyRequest) -> VerifyResponse:
            if service == "notes" and self.reappearing:
                self.reappearing -= 1
                return VerifyResponse(remaining_rows=1)
            return VerifyResponse()

        return [delete_subject_data, verify_subject_erased]

    def calls_of(self, service: str) -> list[DeleteRequest]:
        return [call.request for call in self.calls if call.service == service]

    @activity.defn(name="list_deletion_services")
    async def list_deletion_services(self, workflow_id: str) -> ServiceRegistry:
        self.registry_reads += 1
        return ServiceRegistry(services=list(self.registered))

    @activity.defn(name="record_service_progress")
    async def record_service_progress(self, record: ServiceProgressRecord) -> DeletionBudget:
        self.service_records.append(record)
        return DeletionBudget()

    @activity.defn(name="legal_hold_in_force")
    async def legal_hold_in_force(self, account_id: str) -> bool:
        # These runs' accounts are never held (tests/deletion/test_legal_hold.py holds real ones).
        return False

    @activity.defn(name="take_account_lane")
    async def take_account_lane(self, request: AccountLaneRequest) -> AccountLaneAnswer:
        # These runs' accounts have no other deletion (tests/deletion/test_account_lanes.py queues real ones).
        return AccountLaneAnswer(taken=True)

    @activity.defn(name="open_account_lanes")
    async def open_account_lanes(self, account_id: str) -> list[str]:
        return []

    @activity.defn(name="raise_alert")
    async def raise_alert(self, alert: AlertInput) -> None:
        self.alerts.append(alert)
        if self.alerts_fail:
            raise ApplicationError("the alerts table is unreachable", non_retryable=True)

    @activity.defn(name="finish_bot_deletion")
    async def finish_bot_deletion(self, request: FinishBotDeletionInput) -> FinishBotDeletionResult:
        self.finished.append(request)
        return FinishBotDeletionResult(bot_row_deleted=request.delete_bot_row)

    @activity.defn(name="record_deletion_status")
    async def record_deletion_status(self, change: DeletionStatusChange) -> None:
        # As the real record: the same status again (a workflow task retried after its local activity ran, say)
        # changes nothing.
        if not self.statuses or self.statuses[-1] != change.status:
            self.statuses.append(change.status)

    @activity.defn(name="issue_deletion_receipt")
    async def issue_deletion_receipt(self, request: ReceiptInput) -> str:
        self.receipts.append(request)
        return f"receipt-{len(self.receipts)}"
