"""Test-only activities registered under the real names, to drive the real workflow down every branch.

They replace the database work, not Temporal: the workflow runs on a real (time-skipping) test server.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.deletion.deleters import DELETE_SERVICE_ACTIVITY
from lifecycle.contracts import AlertInput, DeletionStatusChange
from lifecycle.deletion.contracts import (
    DeleteServiceInput,
    DeletionBudget,
    FinishBotDeletionInput,
    FinishBotDeletionResult,
    ReceiptInput,
    RegisteredService,
    ServiceProgress,
    ServiceProgressRecord,
    ServiceRegistry,
)
from lifecycle.deletion.v1.service_pb2 import DeleteRequest, DeleteResponse, VerifyRequest, VerifyResponse
from lifecycle.statuses import DeletionState

ROWS_PER_SERVICE = 1_000


@dataclass
class FakeBotServices:
    """Each service holds ROWS_PER_SERVICE rows; a call deletes `rows_per_call` of them."""

    rows_per_call: int = 250
    # service -> how many calls fail before it works; -1 fails forever.
    failures: dict[str, int] = field(default_factory=dict)
    non_retryable: bool = True
    # When set, the first deleter call waits for it (heartbeating), so tests can act mid-call.
    gate: asyncio.Event | None = None
    calls: list[DeleteServiceInput] = field(default_factory=list)
    alerts: list[AlertInput] = field(default_factory=list)
    finished: list[FinishBotDeletionInput] = field(default_factory=list)
    receipts: list[ReceiptInput] = field(default_factory=list)
    # Every status the run recorded, in order.
    statuses: list[DeletionState] = field(default_factory=list)
    cancelled: int = 0
    # How many finishing checks find rows of `messages` again (a writer racing the deleters).
    reappearing: int = 0
    # Raising an alert fails for good: the run must reach its operator all the same.
    alerts_fail: bool = False
    # Registered services the registry read finds; their DeleteSubjectData and VerifySubjectErased are below.
    registered: list[RegisteredService] = field(default_factory=list)
    registry_reads: int = 0
    service_calls: list[DeleteRequest] = field(default_factory=list)
    service_records: list[ServiceProgressRecord] = field(default_factory=list)

    def activities(self) -> list[Callable[..., Any]]:
        return [
            self.delete_bot_service,
            self.raise_alert,
            self.finish_bot_deletion,
            self.issue_deletion_receipt,
            self.record_deletion_status,
            self.list_deletion_services,
            self.record_service_progress,
            self.delete_subject_data,
            self.verify_subject_erased,
        ]

    @activity.defn(name=DELETE_SERVICE_ACTIVITY)
    async def delete_bot_service(self, request: DeleteServiceInput) -> ServiceProgress:
        self.calls.append(request)
        if self.gate is not None and len(self.calls) == 1:
            try:
                while not self.gate.is_set():
                    activity.heartbeat()
                    await asyncio.sleep(0.05)  # held while the gate is shut, heartbeating as a real deleter does
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
        left = self.failures.get(request.service, 0)
        if left != 0:
            self.failures[request.service] = left - 1
            raise ApplicationError(f"{request.service} is broken", non_retryable=self.non_retryable)
        deleted = min(ROWS_PER_SERVICE, request.progress.deleted + self.rows_per_call)
        return replace(
            request.progress,
            deleted=deleted,
            total=ROWS_PER_SERVICE,
            cursor=deleted,
            done=deleted == ROWS_PER_SERVICE,
        )

    @activity.defn(name="list_deletion_services")
    async def list_deletion_services(self, workflow_id: str) -> ServiceRegistry:
        self.registry_reads += 1
        return ServiceRegistry(services=list(self.registered))

    @activity.defn(name="record_service_progress")
    async def record_service_progress(self, record: ServiceProgressRecord) -> DeletionBudget:
        self.service_records.append(record)
        return DeletionBudget()

    @activity.defn(name="DeleteSubjectData")
    async def delete_subject_data(self, request: DeleteRequest) -> DeleteResponse:
        """A registered service holding ROWS_PER_SERVICE rows; its cursor is the count deleted so far."""
        self.service_calls.append(request)
        before = int(request.cursor or 0)
        after = min(ROWS_PER_SERVICE, before + self.rows_per_call)
        return DeleteResponse(
            rows_deleted=after - before,
            cursor=str(after),
            done=after == ROWS_PER_SERVICE,
            remaining_rows_estimate=ROWS_PER_SERVICE - after,
        )

    @activity.defn(name="VerifySubjectErased")
    async def verify_subject_erased(self, request: VerifyRequest) -> VerifyResponse:
        return VerifyResponse()

    @activity.defn(name="raise_alert")
    async def raise_alert(self, alert: AlertInput) -> None:
        self.alerts.append(alert)
        if self.alerts_fail:
            raise ApplicationError("the alerts table is unreachable", non_retryable=True)

    @activity.defn(name="finish_bot_deletion")
    async def finish_bot_deletion(self, request: FinishBotDeletionInput) -> FinishBotDeletionResult:
        self.finished.append(request)
        if self.reappearing and request.delete_bot_row:
            # A writer raced the deleters: this service has rows again.
            self.reappearing -= 1
            return FinishBotDeletionResult(remaining_services=["messages"])
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
