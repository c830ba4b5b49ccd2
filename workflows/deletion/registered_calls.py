"""The calls a bot deletion makes to a registered service (lifecycle/deletion/registry.py), wherever the registry
says it answers (service_transport.py), and the bookkeeping around them: reading the registry, and recording each
service's progress where the status API and the receipt read it. The workflow decides when to call and what a
failure means."""

from __future__ import annotations

from dataclasses import replace

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    import workflows.activity_presets as presets
    from activities.deletion.services import RegisteredServices
    from lifecycle.deletion.budget import budget_share
    from lifecycle.deletion.contracts import (
        DELETER_SLICE,
        RegisteredService,
        ServiceProgress,
        ServiceProgressRecord,
        ServiceRegistry,
        ServiceVerification,
    )
    from lifecycle.deletion.registry import DELETE_SUBJECT_DATA, THROTTLES, VERIFY_SUBJECT_ERASED
    from lifecycle.deletion.v1.service_pb2 import DeleteRequest, DeleteResponse, Subject, VerifyRequest, VerifyResponse
    from workflows.deletion.service_transport import call_service


def bot_subject(bot_id: str) -> Subject:
    return Subject(kind=Subject.KIND_BOT, id=bot_id)


async def read_registry() -> ServiceRegistry:
    """The active registered services, with what earlier runs of this deletion recorded for them."""
    return await workflow.execute_activity_method(
        RegisteredServices.list_deletion_services,
        workflow.info().workflow_id,
        **presets.STEP,
        summary="read the registered deletion services",
    )


async def delete_slice(
    service: RegisteredService, subject: Subject, known: ServiceProgress, batch_rows: int, rows_per_second: int
) -> ServiceProgress:
    """One slice of the service's deletion, from its own cursor, for up to DELETER_SLICE in batches of at most
    `batch_rows`; the progress with the slice's answer added."""
    response = await call_service(
        service,
        DELETE_SUBJECT_DATA,
        DeleteRequest(
            deletion_id=workflow.info().workflow_id,
            subject=subject,
            cursor=known.resume_from,
            # No bound on the rows of a slice but its duration: as many batches as 5 s allow.
            max_rows=0,
            rows_per_second=rows_per_second,
            max_duration_ms=int(DELETER_SLICE.total_seconds() * 1000),
            batch_rows=batch_rows,
        ),
        DeleteResponse,
        on_queue=presets.SERVICE_CALL,
        through_nexus=presets.SERVICE_CALL_NEXUS,
        summary=f"delete {service.name} of bot {subject.id}",
    )
    deleted = known.deleted + response.rows_deleted
    return replace(
        known,
        deleted=deleted,
        total=deleted + response.remaining_rows_estimate,
        files_deleted=known.files_deleted + response.files_deleted,
        resume_from=response.cursor,
        done=response.done,
        waiting_since=None,
        rows_per_second=0 if response.done else round(response.measured_rows_per_second),
        throttled=None if response.done else THROTTLES.get(response.throttled),
    )


async def retired(service: str) -> bool:
    """Whether an operator retired the service since this deletion read the registry."""
    return await workflow.execute_activity_method(
        RegisteredServices.deletion_service_retired,
        service,
        **presets.STEP,
        summary=f"is {service} still registered",
    )


async def verify(service: RegisteredService, subject: Subject) -> ServiceVerification:
    """What the service still holds of the subject, by its own exact count."""
    response = await call_service(
        service,
        VERIFY_SUBJECT_ERASED,
        VerifyRequest(deletion_id=workflow.info().workflow_id, subject=subject),
        VerifyResponse,
        on_queue=presets.SERVICE_CALL,
        through_nexus=presets.SERVICE_CALL_NEXUS,
        summary=f"count what {service.name} holds of bot {subject.id}",
    )
    return ServiceVerification(service.name, response.remaining_rows, response.remaining_files)


def rows_per_second(registry: ServiceRegistry, service: str, deleting: list[str]) -> int:
    """The service's rows/s for its next call (0: unlimited), from the budget the last activity read, shared by
    the `deleting` services still at work."""
    return budget_share(registry.budget, deleting, service)


async def record(registry: ServiceRegistry, service: str, progress: ServiceProgress, *, answered: bool) -> None:
    """Record the service's progress (idempotent), and take the budget as it stands now for the next calls."""
    registry.budget = await workflow.execute_activity_method(
        RegisteredServices.record_service_progress,
        ServiceProgressRecord(workflow.info().workflow_id, service, progress, answered),
        **presets.STEP,
        summary=f"record the progress of {service}",
    )
