"""Telling the processors: record whom an account deletion tells, send each one the signed erasure request, and
record its answer or an operator's skip.

The request's URL and secret are read here from `processors`, at each attempt, the secret opened with the workers'
key (lifecycle/sealing.py), so neither is ever in workflow history; the run passes ids and names only. PostgreSQL
holds each processor's answer (`processor_erasures`): what the receipts, the status API and a retried or reset run
read.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import httpx
import orjson
from sqlalchemy import text
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.heartbeat import heartbeats
from activities.resources import ActivityResources
from activities.step_log import step_skipped
from lifecycle.deletion.contracts import BeginErasureInput, ErasureDelivery, ProcessorErasureInput
from lifecycle.deletion.processors import (
    REFERENCE_MAX_LENGTH,
    erasure_body,
    erasure_id,
    signed_headers,
    webhook_id,
)
from lifecycle.outbound import OutboundRefused
from lifecycle.statuses import ProcessorAnswer

PROCESSOR_NOT_ACKNOWLEDGED = "ProcessorNotAcknowledged"

_RECORDED = text("SELECT processor FROM processor_erasures WHERE erasure_id = :erasure ORDER BY processor")
_ACTIVE = text("SELECT name FROM processors WHERE retired_at IS NULL ORDER BY name")
_REQUESTED_AT = text("SELECT requested_at FROM deletion_requests WHERE workflow_id = :workflow_id")
_RECORD = text(
    "INSERT INTO processor_erasures (erasure_id, processor, deletion_workflow_id, account_id, webhook_id, requested_at)"
    " VALUES (:erasure, :processor, :workflow_id, :account, :webhook_id, :requested_at) ON CONFLICT DO NOTHING"
)
_REQUEST = text(
    "SELECT e.status, e.webhook_id, e.account_id, e.requested_at, p.url, p.secret, p.retired_at"
    " FROM processor_erasures e JOIN processors p ON p.name = e.processor"
    " WHERE e.erasure_id = :erasure AND e.processor = :processor"
)
_ACKNOWLEDGED = text(
    "UPDATE processor_erasures SET status = :acknowledged, acknowledged_at = now(), reference = :reference,"
    " attempts = attempts + 1, last_error = NULL WHERE erasure_id = :erasure AND processor = :processor"
    " AND status = :pending"
).bindparams(acknowledged=ProcessorAnswer.ACKNOWLEDGED.value, pending=ProcessorAnswer.PENDING.value)
_FAILED = text(
    "UPDATE processor_erasures SET attempts = attempts + 1, last_error = :error"
    " WHERE erasure_id = :erasure AND processor = :processor AND status = :pending"
).bindparams(pending=ProcessorAnswer.PENDING.value)
_SKIPPED = text(
    "UPDATE processor_erasures SET status = :skipped, skipped_at = now()"
    " WHERE erasure_id = :erasure AND processor = :processor AND status = :pending"
).bindparams(skipped=ProcessorAnswer.SKIPPED.value, pending=ProcessorAnswer.PENDING.value)
_ANSWER = text("SELECT status FROM processor_erasures WHERE erasure_id = :erasure AND processor = :processor")


def _reference(response: httpx.Response) -> str | None:
    """The processor's optional `{"reference": "..."}`; anything else in a 2xx answer is ignored."""
    try:
        answer = orjson.loads(response.content)
    except orjson.JSONDecodeError:
        return None
    reference = answer.get("reference") if isinstance(answer, dict) else None
    return reference[:REFERENCE_MAX_LENGTH] if isinstance(reference, str) else None


class ProcessorErasures:
    def __init__(self, resources: ActivityResources) -> None:
        self._resources = resources

    @activity.defn(name="begin_processor_erasure")
    @heartbeats
    async def begin_processor_erasure(self, request: BeginErasureInput) -> ProcessorErasureInput:
        """Record one pending request per active processor, once per deletion (a retry or a reset finds the
        same ones, even if processors were registered since); the run's input, with the workers' timings."""
        erasure = erasure_id(request.workflow_id, request.first_run_id)
        async with self._resources.engine.begin() as conn:
            names = list((await conn.execute(_RECORDED, {"erasure": erasure})).scalars())
            if not names:
                names = list((await conn.execute(_ACTIVE)).scalars())
                requested = (await conn.execute(_REQUESTED_AT, {"workflow_id": request.workflow_id})).scalar()
                for name in names:
                    await conn.execute(
                        _RECORD,
                        {
                            "erasure": erasure,
                            "processor": name,
                            "workflow_id": request.workflow_id,
                            "account": uuid.UUID(request.account_id),
                            "webhook_id": webhook_id(erasure, name),
                            "requested_at": requested or datetime.now(UTC),
                        },
                    )
        settings = self._resources.settings
        return ProcessorErasureInput(
            erasure_id=str(erasure),
            account_id=request.account_id,
            deletion_workflow_id=request.workflow_id,
            processors=names,
            retry_first_seconds=settings.processor_retry_initial.total_seconds(),
            retry_cap_seconds=settings.processor_retry_max.total_seconds(),
            request_timeout_seconds=settings.processor_request_timeout.total_seconds(),
            alert_after_seconds=settings.processor_alert_after.total_seconds(),
        )

    @activity.defn(name="deliver_erasure_request")
    @heartbeats
    async def deliver_erasure_request(self, delivery: ErasureDelivery) -> ProcessorAnswer:
        """One attempt: POST the signed request; acknowledged on a 2xx. Anything else fails the attempt, which
        the server retries with back-off. A request already answered is not sent again."""
        key = {"erasure": uuid.UUID(delivery.erasure_id), "processor": delivery.processor}
        async with self._resources.engine.connect() as conn:
            row = (await conn.execute(_REQUEST, key)).one()
        if row.status != ProcessorAnswer.PENDING:
            step_skipped(f"already {row.status}")
            return ProcessorAnswer(row.status)
        if row.retired_at is not None:
            # Retired while pending: nobody is left to tell; the receipt shows it skipped.
            return await self._skip(key)
        body = erasure_body(uuid.UUID(delivery.erasure_id), row.account_id, row.requested_at)
        headers = signed_headers(self._resources.keys.open(row.secret), row.webhook_id, datetime.now(UTC), body)
        settings = self._resources.settings
        try:
            # Again at each attempt: what the name resolves to may have changed since it was registered.
            await settings.outbound.check_url(row.url)
            response = await self._resources.http.post(
                row.url,
                content=body,
                headers=headers,
                timeout=settings.processor_request_timeout.total_seconds(),
                follow_redirects=False,
            )
        except OutboundRefused as refused:
            error = f"refused: {refused}"[:500]
        except httpx.HTTPError as err:
            error = f"{type(err).__name__}: {err}"[:500]
        else:
            if response.is_success:
                async with self._resources.engine.begin() as conn:
                    await conn.execute(_ACKNOWLEDGED, {**key, "reference": _reference(response)})
                return ProcessorAnswer.ACKNOWLEDGED
            error = f"HTTP {response.status_code}"
        async with self._resources.engine.begin() as conn:
            await conn.execute(_FAILED, {**key, "error": error})
        raise ApplicationError(f"{delivery.processor} did not acknowledge: {error}", type=PROCESSOR_NOT_ACKNOWLEDGED)

    @activity.defn(name="skip_processor_erasure")
    @heartbeats
    async def skip_processor_erasure(self, delivery: ErasureDelivery) -> ProcessorAnswer:
        """An operator's skip; the processor's answer as recorded (an acknowledgement that came first stands)."""
        return await self._skip({"erasure": uuid.UUID(delivery.erasure_id), "processor": delivery.processor})

    async def _skip(self, key: dict[str, object]) -> ProcessorAnswer:
        async with self._resources.engine.begin() as conn:
            await conn.execute(_SKIPPED, key)
            return ProcessorAnswer((await conn.execute(_ANSWER, key)).scalar_one())
