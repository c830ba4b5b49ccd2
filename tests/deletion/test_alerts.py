"""An operator alert: one row per raising activity however often it retries, an ERROR line, and a best-effort
webhook POST whose outcome is recorded on the row and never fails the activity."""

from __future__ import annotations

import dataclasses
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

from activities.alerts import WEBHOOK_ATTEMPTS, Alerts
from activities.resources import ActivityResources
from devstack.ports import free_port
from lifecycle.settings import Settings
from lifecycle.shared_contracts import AlertInput


class Webhook:
    """A real HTTP endpoint on loopback answering POSTs with the given statuses in turn (the last one repeats)."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        self.statuses = [503, 204]
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                hook.received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(hook.statuses[min(len(hook.received), len(hook.statuses)) - 1])
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


async def _raise(settings: Settings, client: Client, url: str, *, attempts: int = 1) -> list[tuple[Any, ...]]:
    """Run raise_alert `attempts` times as retries of one activity; return the alert rows it left."""
    resources = ActivityResources.create(settings.model_copy(update={"alert_webhook_url": url}), client)
    workflow_id = f"bot-deletion-{uuid.uuid4()}"
    alert = AlertInput(workflow_id=workflow_id, subject="bot deletion stuck on messages", reason="boom")
    env = ActivityEnvironment()
    # A run and activity of its own: the alert row is keyed by them.
    env.info = dataclasses.replace(env.info, workflow_run_id=str(uuid.uuid4()))
    try:
        for _ in range(attempts):
            await env.run(Alerts(resources).raise_alert, alert)
        async with resources.engine.connect() as conn:
            rows = await conn.execute(
                text(
                    "SELECT subject, reason, delivery, delivery_attempts, delivery_error"
                    " FROM alerts WHERE workflow_id = :w"
                ),
                {"w": workflow_id},
            )
            return [tuple(row) for row in rows]
    finally:
        await resources.close()


async def test_a_refused_post_is_retried_within_the_call_and_the_alert_recorded_once(
    settings: Settings, temporal_client: Client, webhook: Webhook, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="alerts"):
        rows = await _raise(settings, temporal_client, webhook.url, attempts=2)
    # The first POST got 503 and was retried at once; the activity's own retry (a second call) neither
    # records a second alert nor posts a delivered one again.
    assert [row[:4] for row in rows] == [("bot deletion stuck on messages", "boom", "delivered", 2)]
    assert len(webhook.received) == 2
    assert sum("ALERT" in record.getMessage() for record in caplog.records) == 2


async def test_a_webhook_that_rejects_the_alert_is_recorded_and_not_retried(
    settings: Settings, temporal_client: Client, webhook: Webhook
) -> None:
    webhook.statuses = [400]
    rows = await _raise(settings, temporal_client, webhook.url)
    assert len(webhook.received) == 1
    [(_, _, delivery, attempts, error)] = rows
    assert (delivery, attempts) == ("failed", 1)
    assert error.startswith("HTTP 400")


async def test_a_webhook_that_is_down_costs_bounded_attempts_and_never_fails_the_activity(
    settings: Settings, temporal_client: Client
) -> None:
    rows = await _raise(settings, temporal_client, f"http://127.0.0.1:{free_port()}/nobody-listens")
    [(_, _, delivery, attempts, error)] = rows
    assert (delivery, attempts) == ("failed", WEBHOOK_ATTEMPTS)
    assert "ConnectError" in error
