"""The registered deletion services, as a deletion sees them: read once when it starts, and each one's progress
recorded where the status API and the receipt read it (deletion_progress)."""

from __future__ import annotations

from sqlalchemy import text
from temporalio import activity
from temporalio.api.operatorservice.v1 import ListNexusEndpointsRequest
from temporalio.service import RPCError, RPCStatusCode

from activities.heartbeat import heartbeats
from activities.resources import ActivityResources
from activities.step_log import step_counts
from lifecycle.deletion.budget import read_deletion_budget
from lifecycle.deletion.contracts import (
    DeletionBudget,
    ServiceProgress,
    ServiceProgressRecord,
    ServiceRegistry,
)
from lifecycle.deletion.registry import active_services

_RECORDED = text(
    "SELECT service, deleted, total, files_deleted, done, resume_cursor FROM deletion_progress"
    " WHERE workflow_id = :workflow_id AND service = ANY(:services)"
)
# The run's own counts, set rather than added: a retried record writes the same row again.
_RECORD = text(
    "INSERT INTO deletion_progress (workflow_id, service, deleted, total, done, files_deleted, rows_per_second,"
    " throttled, resume_cursor, waiting_since)"
    " VALUES (:workflow_id, :service, :deleted, :total, :done, :files_deleted, :rows_per_second, :throttled,"
    " :resume_from, CAST(CAST(:waiting_since AS text) AS timestamptz))"
    " ON CONFLICT (workflow_id, service) DO UPDATE SET deleted = EXCLUDED.deleted, total = EXCLUDED.total,"
    " done = EXCLUDED.done, files_deleted = EXCLUDED.files_deleted, rows_per_second = EXCLUDED.rows_per_second,"
    " throttled = EXCLUDED.throttled, resume_cursor = EXCLUDED.resume_cursor, waiting_since = EXCLUDED.waiting_since,"
    # Held back only while it waits: once it answers, nothing is.
    " blocked_reason = CASE WHEN EXCLUDED.waiting_since IS NULL THEN NULL ELSE deletion_progress.blocked_reason END,"
    " updated_at = now(), progressed_at = CASE WHEN (deletion_progress.deleted, deletion_progress.files_deleted,"
    " deletion_progress.done) IS DISTINCT FROM (EXCLUDED.deleted, EXCLUDED.files_deleted, EXCLUDED.done)"
    " THEN now() ELSE deletion_progress.progressed_at END"
)
_ANSWERED = text("UPDATE deletion_services SET last_answered_at = now() WHERE name = :service")
_RETIRED = text("SELECT retired_at IS NOT NULL FROM deletion_services WHERE name = :service")


class RegisteredServices:
    def __init__(self, resources: ActivityResources) -> None:
        self._resources = resources

    @activity.defn(name="list_deletion_services")
    @heartbeats
    async def list_deletion_services(self, workflow_id: str) -> ServiceRegistry:
        """The active services of a contract this code calls, with what earlier runs of the deletion recorded."""
        async with self._resources.engine.connect() as conn:
            services = await active_services(conn)
            recorded = {
                row.service: ServiceProgress(
                    deleted=row.deleted,
                    total=row.total,
                    files_deleted=row.files_deleted,
                    done=row.done,
                    resume_from=row.resume_cursor or "",
                )
                for row in await conn.execute(
                    _RECORDED, {"workflow_id": workflow_id, "services": [service.name for service in services]}
                )
            }
            budget = await read_deletion_budget(conn)
        return ServiceRegistry(services, budget, recorded)

    @activity.defn(name="deletion_service_retired")
    @heartbeats
    async def deletion_service_retired(self, service: str) -> bool:
        """Whether an operator retired the service (DELETE /deletion-services/{name}) since the deletion read the
        registry: a deletion waiting for it then leaves it, rather than wait without end."""
        async with self._resources.engine.connect() as conn:
            return bool((await conn.execute(_RETIRED, {"service": service})).scalar_one_or_none())

    @activity.defn(name="nexus_endpoint_exists")
    async def nexus_endpoint_exists(self, endpoint: str) -> bool:
        """Whether a Temporal operator created the Nexus endpoint a service registered with. The server refuses a
        workflow's call through an endpoint it does not know by failing the workflow task, again and again, where
        no status shows it; so the workflows ask this first, and show the service waiting until the endpoint is
        there. A gateway whose credential may not list endpoints (Temporal Cloud's are kept in its own registry)
        cannot tell, and calls."""
        try:
            found = await self._resources.client.operator_service.list_nexus_endpoints(
                ListNexusEndpointsRequest(name=endpoint, page_size=1)
            )
        except RPCError as err:
            if err.status in (RPCStatusCode.PERMISSION_DENIED, RPCStatusCode.UNIMPLEMENTED):
                return True
            raise
        return any(entry.spec.name == endpoint for entry in found.endpoints)

    @activity.defn(name="record_service_progress")
    @heartbeats
    async def record_service_progress(self, record: ServiceProgressRecord) -> DeletionBudget:
        """Record the service's progress (idempotent); returns the deletion budget as it stands now, overrides
        included, for the run to take the service's rows/s from it (budget_share) in its next call."""
        progress = record.progress
        step_counts(rows_deleted=progress.deleted, files_deleted=progress.files_deleted, done=progress.done)
        async with self._resources.engine.begin() as conn:
            await conn.execute(
                _RECORD,
                {
                    "workflow_id": record.workflow_id,
                    "service": record.service,
                    "deleted": progress.deleted,
                    "total": progress.total,
                    "done": progress.done,
                    "files_deleted": progress.files_deleted,
                    "rows_per_second": progress.rows_per_second,
                    "throttled": progress.throttled,
                    "resume_from": progress.resume_from,
                    "waiting_since": progress.waiting_since,
                },
            )
            if record.answered:
                await conn.execute(_ANSWERED, {"service": record.service})
            return await read_deletion_budget(conn)
