"""Calls Temporal holds back: a deletion's pending Nexus operation is BLOCKED while the server's circuit breaker for
its endpoint is open (after consecutive retryable failures of the service's handler, or of the requests to it).
Only Temporal knows it, on the run's description, so the reconciler records it per service where the status API
reads a service's state (deletion_progress.blocked_reason) each time it describes an open run: a breaker that opens
shows on the status as the reason the service is waiting, never as a silent retry."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from temporalio.api.enums.v1 import PendingNexusOperationState
from temporalio.client import WorkflowExecutionDescription

# The services behind each blocked endpoint get its reason; every other service of the run, none.
_RECORD_BLOCKED = text(
    "UPDATE deletion_progress p SET blocked_reason = r.reason FROM deletion_services s"
    " JOIN unnest(CAST(:endpoints AS text[]), CAST(:reasons AS text[])) AS r(endpoint, reason)"
    " ON s.nexus_endpoint = r.endpoint"
    " WHERE p.workflow_id = :workflow_id AND p.service = s.name AND p.blocked_reason IS DISTINCT FROM r.reason"
)
_CLEAR_UNBLOCKED = text(
    "UPDATE deletion_progress p SET blocked_reason = NULL"
    " WHERE p.workflow_id = :workflow_id AND p.blocked_reason IS NOT NULL"
    " AND p.service NOT IN (SELECT s.name FROM deletion_services s WHERE s.nexus_endpoint = ANY(:endpoints))"
)


def blocked_endpoints(description: WorkflowExecutionDescription) -> dict[str, str]:
    """The run's blocked Nexus operations: why each endpoint's calls are held back, by endpoint."""
    return {
        operation.endpoint: operation.blocked_reason or "Temporal holds the call back"
        for operation in description.raw_description.pending_nexus_operations
        if operation.state == PendingNexusOperationState.PENDING_NEXUS_OPERATION_STATE_BLOCKED
    }


async def record_blocked_calls(
    engine: AsyncEngine, workflow_id: str, description: WorkflowExecutionDescription
) -> None:
    blocked = blocked_endpoints(description)
    endpoints, reasons = list(blocked), list(blocked.values())
    async with engine.begin() as conn:
        await conn.execute(_CLEAR_UNBLOCKED, {"workflow_id": workflow_id, "endpoints": endpoints})
        if blocked:
            await conn.execute(
                _RECORD_BLOCKED, {"workflow_id": workflow_id, "endpoints": endpoints, "reasons": reasons}
            )
