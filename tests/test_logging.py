"""The worker's log lines are JSON and carry the workflow and activity ids the SDK attaches."""

from __future__ import annotations

import json
import logging

from lifecycle.logging_setup import JsonFormatter


def test_activity_context_becomes_top_level_fields() -> None:
    record = logging.LogRecord("temporalio.activity", logging.WARNING, __file__, 1, "deleting %s", ("messages",), None)
    record.temporal_activity = {
        "activity_id": "4",
        "activity_type": "delete_bot_service",
        "attempt": 2,
        "workflow_id": "bot-deletion-1",
        "workflow_run_id": "run-1",
        "task_queue": "lifecycle",
    }
    line = json.loads(JsonFormatter("worker").format(record))
    assert line["msg"] == "deleting messages"
    assert line["component"] == "worker"
    assert line["workflow_id"] == "bot-deletion-1"
    assert line["workflow_run_id"] == "run-1"
    assert line["activity_type"] == "delete_bot_service"
    assert line["attempt"] == 2
    assert "task_queue" not in line


def test_plain_records_have_no_temporal_fields() -> None:
    record = logging.LogRecord("api", logging.INFO, __file__, 1, "hello", (), None)
    line = json.loads(JsonFormatter("api").format(record))
    assert line["level"] == "INFO"
    assert "workflow_id" not in line
