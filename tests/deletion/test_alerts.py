"""An operator alert: one row per raising activity however often it retries, an ERROR line, a webhook POST."""

from __future__ import annotations

import json
import logging
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from sqlalchemy import text
from temporalio.client import Client
from temporalio.testing import ActivityEnvironment

from activities.alerts import Alerts
from activities.resources import ActivityResources
from lifecycle.contracts import AlertInput
from lifecycle.settings import Settings


class Webhook:
    """A real HTTP endpoint on loopback that refuses its first POST, as a flaky alerting service would."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                hook.received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(503 if len(hook.received) == 1 else 204)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/alerts"


@pytest.fixture
def webhook() -> Iterator[Webhook]:
    hook = Webhook()
    thread = threading.Thread(target=hook.server.serve_forever, daemon=True)
    thread.start()
    yield hook
    hook.server.shutdown()


async def test_a_retried_alert_is_recorded_once_and_posted_until_accepted(
    settings: Settings, temporal_client: Client, webhook: Webhook, caplog: pytest.LogCaptureFixture
) -> None:
    resources = ActivityResources.create(
        settings.model_copy(update={"alert_webhook_url": webhook.url}), temporal_client
    )
    workflow_id = f"bot-deletion-{uuid.uuid4()}"
    alert = AlertInput(workflow_id=workflow_id, subject="bot deletion stuck on messages", reason="boom")
    env = ActivityEnvironment()
    try:
        with caplog.at_level(logging.ERROR, logger="alerts"):
            with pytest.raises(Exception, match="503"):
                await env.run(Alerts(resources).raise_alert, alert)  # the webhook refuses: the attempt fails
            await env.run(Alerts(resources).raise_alert, alert)  # the retry, same activity
        async with resources.engine.connect() as conn:
            rows = (
                await conn.execute(
                    text("SELECT subject, reason FROM alerts WHERE workflow_id = :w"), {"w": workflow_id}
                )
            ).all()
    finally:
        await resources.engine.dispose()
    assert [tuple(row) for row in rows] == [("bot deletion stuck on messages", "boom")]
    assert [body["workflow_id"] for body in webhook.received] == [workflow_id, workflow_id]
    assert sum("ALERT" in record.getMessage() and workflow_id in record.getMessage() for record in caplog.records) == 2
