"""Logs through structlog: coloured lines for a person at a terminal, JSON lines for everything else.

Every record goes through the standard library's logging (ours, uvicorn's access log, the Temporal SDK's), and
one structlog `ProcessorFormatter` renders it, so all three keep the same fields in both forms: the time, the
level, the process's component, the logger, and the workflow, run and activity ids the SDK attaches.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from enum import StrEnum
from typing import Any, TextIO
from urllib.parse import parse_qsl, urlencode

import orjson
import structlog
from structlog.stdlib import ProcessorFormatter
from structlog.typing import EventDict, Processor, WrappedLogger
from temporalio import activity, workflow


class LogFormat(StrEnum):
    AUTO = "auto"  # console at a terminal, JSON otherwise
    CONSOLE = "console"
    JSON = "json"


# The SDK's logger adapters attach these dicts to each record they emit; what we keep of them.
_TEMPORAL_CONTEXT_FIELDS = ("temporal_workflow", "temporal_activity")
_KEPT_CONTEXT_KEYS = (
    "workflow_id",
    "workflow_type",
    "run_id",
    "workflow_run_id",
    "activity_id",
    "activity_type",
    "attempt",
)


def _temporal_ids(_: WrappedLogger, __: str, event: EventDict) -> EventDict:
    record: logging.LogRecord = event["_record"]
    for field in _TEMPORAL_CONTEXT_FIELDS:
        context = getattr(record, field, None)
        if isinstance(context, dict):
            event.update({key: context[key] for key in _KEPT_CONTEXT_KEYS if key in context})
    return event


def _own_fields(_: WrappedLogger, __: str, event: EventDict) -> EventDict:
    """A record's own fields, `extra={"fields": {...}}`: a step's outcome and counts (activities/step_log.py)."""
    fields = getattr(event["_record"], "fields", None)
    if isinstance(fields, dict):
        event.update(fields)
    return event


# Query-string parameters whose values are credentials: never written to a log. A stream token travels as
# `access_token` (a browser's EventSource cannot send a header), an export link's signature as `signature`; the
# other two are what a client might put in a URL by mistake. Keys and the admin token belong in `Authorization`,
# which no log prints.
SECRET_QUERY_PARAMETERS = frozenset({"access_token", "token", "signature", "api_key"})
REDACTED = "[redacted]"


def redact_query(path: str) -> str:
    """`path` with the values of credential-bearing query parameters replaced."""
    base, separator, query = path.partition("?")
    if not separator:
        return path
    pairs = parse_qsl(query, keep_blank_values=True)
    if not any(name.lower() in SECRET_QUERY_PARAMETERS for name, _ in pairs):
        return path
    kept = [(name, REDACTED if name.lower() in SECRET_QUERY_PARAMETERS else value) for name, value in pairs]
    return f"{base}?{urlencode(kept, safe='[]/')}"


# Client libraries that log each request's URL or headers: httpx at INFO ("HTTP Request: POST <url>"), httpcore,
# urllib3 (under the OTLP exporter's requests) and asyncpg at DEBUG. A URL can be the credential itself: a Slack or
# Teams webhook's secret is its path (ALERT_WEBHOOK_URL). They write WARNING and up only, unless LOG_LEVEL is
# DEBUG, which is for a developer's machine.
CLIENT_LIBRARY_LOGGERS = ("httpx", "httpcore", "urllib3", "requests", "asyncpg")


def _client_library_level(level: int) -> int:
    return level if level <= logging.DEBUG else max(level, logging.WARNING)


def _access_fields(_: WrappedLogger, __: str, event: EventDict) -> EventDict:
    """uvicorn's access record, whose message is a format string over five args, as named fields: the one
    place where a request line becomes a log line."""
    args = event.pop("positional_args", ())
    if event["_record"].name != "uvicorn.access" or not isinstance(args, tuple) or len(args) != 5:
        return event
    client, method, path, http_version, status = args
    path = redact_query(str(path))
    event.update(
        event=f"{method} {path} {status}", client=client, method=method, path=path, status=status, http=http_version
    )
    return event


def _component(name: str) -> Processor:
    def add(_: WrappedLogger, __: str, event: EventDict) -> EventDict:
        event["component"] = name
        return event

    return add


def _component_in_logger_name(_: WrappedLogger, __: str, event: EventDict) -> EventDict:
    """`[worker/temporalio.activity]`: which of `make run`'s interleaved processes wrote the line, up front."""
    event["logger"] = f"{event.pop('component')}/{event['logger']}"
    return event


def _json(event: EventDict, **_: Any) -> str:
    # orjson: the access log writes a line per request, and the standard encoder cost several times as much.
    return orjson.dumps(event, default=str).decode()


def _renderer(form: LogFormat, stream: TextIO) -> list[Processor]:
    if form is LogFormat.CONSOLE or (form is LogFormat.AUTO and stream.isatty()):
        # Plain tracebacks: the default one prints every frame's local variables, secrets included.
        console = structlog.dev.ConsoleRenderer(
            colors=stream.isatty(),
            pad_event_to=40,
            timestamp_key="ts",
            exception_formatter=structlog.dev.plain_traceback,
        )
        return [_component_in_logger_name, console]
    return [structlog.processors.format_exc_info, structlog.processors.JSONRenderer(serializer=_json)]


def configure_logging(
    component: str,
    *,
    level: str = "INFO",
    form: LogFormat | str = LogFormat.AUTO,
    stream: TextIO | None = None,
) -> None:
    """Route every record of this process to `stream` (stdout), at `level` (LOG_LEVEL) and up."""
    stream = stream or sys.stdout
    # Every record (the API's access log line per request among them) would otherwise look up its thread and
    # process names, which no line carries: a third of the access log's cost per request (bench.api).
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    timestamper: Callable[..., EventDict] = structlog.processors.TimeStamper(fmt="iso", utc=True, key="ts")
    handler = logging.StreamHandler(stream)
    handler.setFormatter(
        ProcessorFormatter(
            foreign_pre_chain=[
                timestamper,
                structlog.stdlib.add_log_level,
                _component(component),
                structlog.stdlib.add_logger_name,
                _temporal_ids,
                _own_fields,
                _access_fields,
            ],
            processors=[ProcessorFormatter.remove_processors_meta, *_renderer(LogFormat(form), stream)],
            # The access record's arguments (client, method, path, version, status) become fields of their own.
            pass_foreign_args=True,
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in CLIENT_LIBRARY_LOGGERS:
        logging.getLogger(name).setLevel(_client_library_level(root.level))
    # The ids are fields of every line now; the SDK would also append them to each message as a dict's repr.
    activity.logger.activity_info_on_message = False
    workflow.logger.workflow_info_on_message = False
