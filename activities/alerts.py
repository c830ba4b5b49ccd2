"""Alerts for operators: a row in `alerts`, an ERROR log line and, if configured, a webhook POST."""

from __future__ import annotations

import logging

import httpx
from sqlalchemy import text
from temporalio import activity

from activities.resources import ActivityResources
from lifecycle.contracts import AlertInput

logger = logging.getLogger("alerts")


class Alerts:
    def __init__(self, resources: ActivityResources) -> None:
        self._resources = resources

    @activity.defn(name="raise_alert")
    async def raise_alert(self, alert: AlertInput) -> None:
        body = {"workflow_id": alert.workflow_id, "subject": alert.subject, "reason": alert.reason}
        info = activity.info()
        async with self._resources.engine.begin() as conn:
            await conn.execute(
                text(
                    "INSERT INTO alerts (workflow_id, subject, reason, raised_by)"
                    " VALUES (:workflow_id, :subject, :reason, :raised_by) ON CONFLICT (raised_by) DO NOTHING"
                ),
                {**body, "raised_by": f"{info.workflow_run_id}/{info.activity_id}"},
            )
        # Logged and posted on every attempt: a retry after a failed POST must still reach the webhook.
        logger.error("ALERT %s [%s]: %s", alert.workflow_id, alert.subject, alert.reason)
        url = self._resources.settings.alert_webhook_url
        if url:
            async with httpx.AsyncClient(timeout=10) as client:
                response = await client.post(url, json=body)
                response.raise_for_status()
