"""An export reaches every registered service: each writes its part of the account, told the account's bots
(ExportSubjectData, where the service answers), and the archive takes the objects they name."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import FailureError

with workflow.unsafe.imports_passed_through():
    import workflows.activity_presets as presets
    from activities.exports.steps import AccountExportActivities
    from lifecycle.deletion.contracts import RegisteredService
    from lifecycle.deletion.registry import EXPORT_SUBJECT_DATA
    from lifecycle.deletion.v1.service_pb2 import ExportRequest, ExportResponse, Subject
    from lifecycle.exports.contracts import ServicePart
    from lifecycle.object_keys import export_parts_prefix
    from workflows.deletion.service_transport import (
        EndpointMissing,
        ServiceCallError,
        call_service,
        cause_of,
        no_worker_took_it,
        side_by_side,
    )

# Between calls to a service that took none, or failed all of SERVICE_EXPORT's attempts: doubling up to the cap,
# so an export that waits days for a service keeps a short history.
FIRST_WAIT = timedelta(seconds=5)
LONGEST_WAIT = timedelta(minutes=10)

# Tells the run's details which service holds the export up, and why.
Waiting = Callable[[str], None]


async def export_service_parts(
    export_id: str, account_id: str, bot_ids: list[str], waiting: Waiting
) -> list[ServicePart]:
    """Every registered service's part of the account, side by side."""
    services = await workflow.execute_activity_method(
        AccountExportActivities.list_export_services, **presets.STEP, summary="read the registered services"
    )
    request = ExportRequest(
        export_id=export_id,
        subject=Subject(kind=Subject.KIND_ACCOUNT, id=account_id),
        object_key_prefix=export_parts_prefix(export_id),
        bot_ids=bot_ids,
    )
    return await side_by_side(_part(request, service, waiting) for service in services)


async def _part(request: ExportRequest, service: RegisteredService, waiting: Waiting) -> ServicePart:
    wait = FIRST_WAIT
    while True:
        try:
            answer = await call_service(
                service,
                EXPORT_SUBJECT_DATA,
                request,
                ExportResponse,
                on_queue=presets.SERVICE_EXPORT,
                through_nexus=presets.SERVICE_EXPORT_NEXUS,
                summary=f"export {service.name}'s part",
            )
        except (*ServiceCallError, EndpointMissing) as err:
            # Down (no worker took the call, no endpoint) or failing: the export waits for the service rather than
            # leave its data out. An operator sees why in the run's details, and may retire the service.
            reason = _why(err)
            workflow.logger.warning("export waits for %s: %s", service.name, reason)
            waiting(f"waiting for {service.name}: {reason}")
            await workflow.sleep(wait)
            wait = min(wait * 2, LONGEST_WAIT)
            continue
        return ServicePart(
            service=service.name,
            object_key=answer.object_key,
            rows=answer.rows,
            files=answer.files,
            sha256=answer.sha256,
            size_bytes=answer.size_bytes,
            content_type=answer.content_type,
            files_missing=answer.files_missing,
            files_refused=list(answer.files_refused),
        )


def _why(err: FailureError | EndpointMissing) -> str:
    if isinstance(err, EndpointMissing):
        return f"its Nexus endpoint {err} does not exist"
    if no_worker_took_it(err):
        return "no worker takes its calls"
    return f"it fails: {cause_of(err) or err}"
