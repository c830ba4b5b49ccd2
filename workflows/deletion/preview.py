"""Previewing a deletion: ask every registered service what it holds of the bots a deletion would delete, and
change nothing. The counts are the services' own (VerifySubjectErased, the call a deletion ends with, here allowed
to estimate a large count), asked where each service answers: the gateway never reads a service's database. A
service that does not answer within the preset's bounds, or whose Nexus endpoint does not exist, is reported as
unknown (None), so a service that is down
delays a preview by seconds and never holds it open."""

from __future__ import annotations

import asyncio

from temporalio import workflow
from temporalio.common import VersioningBehavior

with workflow.unsafe.imports_passed_through():
    import workflows.activity_presets as presets
    from lifecycle.deletion.contracts import (
        DeletionPreviewInput,
        DeletionPreviewResult,
        RegisteredService,
        ServiceHoldings,
    )
    from lifecycle.deletion.registry import VERIFY_SUBJECT_ERASED
    from lifecycle.deletion.v1.service_pb2 import Subject, VerifyRequest, VerifyResponse
    from lifecycle.deletion.workflow_types import DELETION_PREVIEW_WORKFLOW
    from workflows.deletion.service_transport import EndpointMissing, ServiceCallError, call_service

# Bots counted at once per service: an account's preview asks each service about its bots this many at a time, so
# a large account does not put thousands of calls on a service's queue at once.
BOTS_AT_ONCE = 20


# Pinned: a preview lasts seconds, so the version that started it finishes it.
@workflow.defn(name=DELETION_PREVIEW_WORKFLOW, versioning_behavior=VersioningBehavior.PINNED)
class DeletionPreviewWorkflow:
    @workflow.run
    async def run(self, preview: DeletionPreviewInput) -> DeletionPreviewResult:
        counted = await asyncio.gather(*(self._holdings(service, preview.bot_ids) for service in preview.services))
        return DeletionPreviewResult(
            services={service.name: held for service, held in zip(preview.services, counted, strict=True)}
        )

    async def _holdings(self, service: RegisteredService, bot_ids: list[str]) -> ServiceHoldings | None:
        """What the service holds of the bots, summed; None as soon as one of its counts gets no answer."""
        holdings = ServiceHoldings(rows=0, files=0)
        for start in range(0, len(bot_ids), BOTS_AT_ONCE):
            answers = await asyncio.gather(
                *(self._count(service, bot_id) for bot_id in bot_ids[start : start + BOTS_AT_ONCE]),
                return_exceptions=True,
            )
            for answer in answers:
                if isinstance(answer, (*ServiceCallError, EndpointMissing)):
                    return None
                if isinstance(answer, BaseException):
                    raise answer
                holdings.rows += answer.remaining_rows
                holdings.files += answer.remaining_files
                holdings.estimated = holdings.estimated or answer.estimated
        return holdings

    async def _count(self, service: RegisteredService, bot_id: str) -> VerifyResponse:
        return await call_service(
            service,
            VERIFY_SUBJECT_ERASED,
            # The preview's own id stands where a deletion sends its id: no deletion exists. A service may answer a
            # large count from an estimate, and says so.
            VerifyRequest(
                deletion_id=workflow.info().workflow_id,
                subject=Subject(kind=Subject.KIND_BOT, id=bot_id),
                estimate_allowed=True,
            ),
            VerifyResponse,
            on_queue=presets.SERVICE_PREVIEW,
            through_nexus=presets.SERVICE_PREVIEW_NEXUS,
            summary=f"count what {service.name} holds of bot {bot_id}",
        )
