"""Alerts for operators: a row in `alerts`, an ERROR log line and, if configured, a webhook POST.

The row and the log line are the alert. The webhook is best-effort with bounded retries, and its outcome is
recorded on the row: a webhook that refuses or is down never holds up the run that is waiting for an operator.
"""

from __future__ import annotations

import asyncio
import logging

import httpx
from sqlalchemy import text
from temporalio import activity

from activities.heartbeat import heartbeats
from activities.resources import ActivityResources
from activities.step_log import step_skipped
from lifecycle.outbound import OutboundRefused
from lifecycle.shared_contracts import AlertInput
from lifecycle.statuses import AlertDelivery

logger = logging.getLogger("alerts")

# A webhook that fails this often in one activity call (server errors, no connection) is given up on.
WEBHOOK_ATTEMPTS = 3
# Pause between attempts, doubled each time: the whole delivery stays within a few seconds.
WEBHOOK_BACKOFF_SECONDS = 0.5
WEBHOOK_TIMEOUT_SECONDS = 5

# Written once per raising activity, whatever its retries; answers whether the webhook already took it.
_RECORD = text(
    "INSERT INTO alerts (workflow_id, subject, reason, raised_by, delivery)"
    " VALUES (:workflow_id, :subject, :reason, :raised_by, :delivery)"
    " ON CONFLICT (raised_by) DO UPDATE SET raised_by = EXCLUDED.raised_by RETURNING delivery"
)
_DELIVERY = text(
    "UPDATE alerts SET delivery = :delivery, delivery_attempts = delivery_attempts + :attempts,"
    " delivery_error = :error WHERE raised_by = :raised_by"
)


async def _post(http: httpx.AsyncClient, url: str, body: dict[str, str]) -> tuple[AlertDelivery, int, str | None]:
    """(outcome, attempts made, last error). A 4xx is the webhook refusing this alert: not retried."""
    error: str | None = None
    for attempt in range(1, WEBHOOK_ATTEMPTS + 1):
        try:
            response = await http.post(url, json=body, timeout=WEBHOOK_TIMEOUT_SECONDS)
        except httpx.HTTPError as exc:
            error = f"{type(exc).__name__}: {exc}"
        else:
            if response.is_success:
                return AlertDelivery.DELIVERED, attempt, None
            error = f"HTTP {response.status_code}: {response.text[:200]}"
            if response.is_client_error:
                return AlertDelivery.FAILED, attempt, error
        if attempt < WEBHOOK_ATTEMPTS:
            await asyncio.sleep(WEBHOOK_BACKOFF_SECONDS * 2 ** (attempt - 1))
    return AlertDelivery.FAILED, WEBHOOK_ATTEMPTS, error


async def record_alert(resources: ActivityResources, alert: AlertInput, raised_by: str | None = None) -> bool:
    """Record the alert once per raising activity, or once per `raised_by` given, log it, then try the webhook;
    only the database can fail it. False when an earlier attempt had it delivered already.

    Called by raise_alert, and by an activity that alerts about what it found itself (activities/exports/steps.py,
    activities/watch.py, which names each alert after what it found).
    """
    body = {"workflow_id": alert.workflow_id, "subject": alert.subject, "reason": alert.reason}
    if raised_by is None:
        info = activity.info()
        raised_by = f"{info.workflow_run_id}/{info.activity_id}"
    url = resources.settings.alert_webhook_url
    async with resources.engine.begin() as conn:
        recorded = await conn.execute(
            _RECORD,
            {
                **body,
                "raised_by": raised_by,
                "delivery": AlertDelivery.PENDING if url else AlertDelivery.NOT_CONFIGURED,
            },
        )
        delivered = recorded.scalar_one() == AlertDelivery.DELIVERED
    logger.error("ALERT %s [%s]: %s", alert.workflow_id, alert.subject, alert.reason)
    if not url or delivered:
        return not delivered
    error: str | None
    try:
        # Checked at each alert: what the webhook's name resolves to may have changed since the worker started.
        await resources.settings.outbound.check_url(url)
    except OutboundRefused as refused:
        delivery, attempts, error = AlertDelivery.FAILED, 0, str(refused)
    else:
        delivery, attempts, error = await _post(resources.http, url, body)
    if error is not None:
        logger.warning("alert webhook for %s: %s (%s)", alert.workflow_id, error, delivery)
    async with resources.engine.begin() as conn:
        await conn.execute(
            _DELIVERY, {"delivery": delivery, "attempts": attempts, "error": error, "raised_by": raised_by}
        )
    return True


class Alerts:
    def __init__(self, resources: ActivityResources) -> None:
        self._resources = resources

    @activity.defn(name="raise_alert")
    @heartbeats
    async def raise_alert(self, alert: AlertInput) -> None:
        if not await record_alert(self._resources, alert):
            step_skipped("the webhook already took it")
