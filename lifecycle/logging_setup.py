"""Structured (JSON-lines) logging that carries Temporal's workflow and activity ids when present."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

# Temporal's SDK loggers attach these dicts to each record they emit.
_TEMPORAL_CONTEXT_FIELDS = ("temporal_workflow", "temporal_activity")


class JsonFormatter(logging.Formatter):
    def __init__(self, component: str) -> None:
        super().__init__()
        self.component = component

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "component": self.component,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for field in _TEMPORAL_CONTEXT_FIELDS:
            context = getattr(record, field, None)
            if isinstance(context, dict):
                line.update({key: value for key, value in context.items() if key in _KEPT_CONTEXT_KEYS})
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return _ENCODER.encode(line)


# json.dumps(line, default=str) builds a new encoder per line; this one is the same encoder, built once.
_ENCODER = json.JSONEncoder(default=str)

_KEPT_CONTEXT_KEYS = {
    "workflow_id",
    "workflow_type",
    "run_id",
    "workflow_run_id",
    "activity_id",
    "activity_type",
    "attempt",
}


def configure_logging(component: str, level: int = logging.INFO) -> None:
    # Every record (the API's access log line per request among them) would otherwise look up its thread and
    # process names, which no line carries: a third of the access log's cost per request (bench.api).
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(JsonFormatter(component))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # The SDK puts the ids in the record's extras; the message text need not repeat them.
    logging.getLogger("temporalio").setLevel(logging.INFO)
