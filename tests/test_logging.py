"""Log lines for a person (console) and for a machine (JSON), both carrying the ids the Temporal SDK attaches,
and access log lines that never carry a credential from the query string."""

from __future__ import annotations

import dataclasses
import io
import json
import logging
import uuid
from collections.abc import Iterator

from temporalio import activity, workflow

# The sandbox re-imports this module to run LoggingWorkflow: everything else passes through untouched.
with workflow.unsafe.imports_passed_through():
    import pytest
    from temporalio.client import Client
    from temporalio.testing import ActivityEnvironment
    from temporalio.worker import Worker

    from lifecycle.logging_setup import CLIENT_LIBRARY_LOGGERS, configure_logging, redact_query


@pytest.fixture(autouse=True)
def restore_loggers() -> Iterator[None]:
    """The root logger and the client libraries' levels restored after each test; uvicorn's loggers as
    `python -m api` leaves them (log_config=None), which a uvicorn.Config run by an earlier test of this process
    changes."""
    uvicorn = [logging.getLogger(name) for name in ("uvicorn", "uvicorn.access")]
    loggers = [logging.getLogger(), *uvicorn, *map(logging.getLogger, CLIENT_LIBRARY_LOGGERS)]
    saved = [(logger.handlers[:], logger.level, logger.propagate) for logger in loggers]
    for logger in uvicorn:
        logger.handlers[:], logger.propagate = [], True
        logger.setLevel(logging.NOTSET)
    yield
    for logger, (handlers, level, propagate) in zip(loggers, saved, strict=True):
        logger.handlers[:], logger.propagate = handlers, propagate
        logger.setLevel(level)


@activity.defn
async def logging_activity(service: str) -> None:
    activity.logger.warning("deleting %s", service)


async def _logged_by_activity(form: str) -> str:
    out = io.StringIO()
    configure_logging("worker", form=form, stream=out)
    environment = ActivityEnvironment()
    environment.info = dataclasses.replace(
        environment.info,
        workflow_id="bot-deletion-1",
        workflow_run_id="run-1",
        activity_type="DeleteSubjectData",
        attempt=2,
    )
    await environment.run(logging_activity, "messages")
    return out.getvalue()


@workflow.defn(name="LoggingWorkflow")
class LoggingWorkflow:
    @workflow.run
    async def run(self) -> None:
        workflow.logger.warning("planning %d services", 5)


async def test_workflow_lines_carry_the_workflow_and_run_ids(temporal_client: Client) -> None:
    out = io.StringIO()
    configure_logging("worker", form="json", stream=out)
    queue = f"logging-{uuid.uuid4().hex[:8]}"
    async with Worker(temporal_client, task_queue=queue, workflows=[LoggingWorkflow]):
        handle = await temporal_client.start_workflow(LoggingWorkflow.run, id=queue, task_queue=queue)
        await handle.result()
    lines = [json.loads(text) for text in out.getvalue().splitlines()]
    (line,) = [line for line in lines if line["event"] == "planning 5 services"]
    assert (line["workflow_id"], line["run_id"], line["workflow_type"]) == (
        queue,
        handle.result_run_id,
        "LoggingWorkflow",
    )


async def test_json_lines_carry_workflow_run_and_activity_ids() -> None:
    (line,) = [json.loads(text) for text in (await _logged_by_activity("json")).splitlines()]
    assert line["event"] == "deleting messages"
    assert line["level"] == "warning"
    assert line["component"] == "worker"
    assert line["workflow_id"] == "bot-deletion-1"
    assert line["workflow_run_id"] == "run-1"
    assert line["activity_type"] == "DeleteSubjectData"
    assert line["attempt"] == 2
    assert "task_queue" not in line


async def test_console_lines_are_readable_and_carry_the_ids() -> None:
    (line,) = (await _logged_by_activity("console")).splitlines()
    assert not line.startswith("{")
    # The message first as written, without the SDK's dict appended, then the ids as key=value.
    assert "deleting messages " in line and "{" not in line
    assert "[worker/temporalio.activity]" in line
    for field in ("workflow_id=bot-deletion-1", "workflow_run_id=run-1", "activity_type=DeleteSubjectData"):
        assert field in line


def test_auto_writes_json_when_not_at_a_terminal() -> None:
    out = io.StringIO()
    configure_logging("api", stream=out)
    logging.getLogger("api").info("hello")
    assert json.loads(out.getvalue())["event"] == "hello"


def test_level_filters_lines() -> None:
    out = io.StringIO()
    configure_logging("api", level="warning", form="json", stream=out)
    logging.getLogger("api").info("quiet")
    logging.getLogger("api").warning("loud")
    assert [json.loads(text)["event"] for text in out.getvalue().splitlines()] == ["loud"]


@pytest.mark.parametrize(("level", "written"), [("INFO", ["refused"]), ("DEBUG", ["POST <url>", "refused"])])
def test_client_libraries_write_their_request_lines_at_debug_only(level: str, written: list[str]) -> None:
    out = io.StringIO()
    configure_logging("worker", level=level, form="json", stream=out)
    # httpx writes one INFO line per request, its URL in it: a webhook's secret, for one.
    logging.getLogger("httpx").info("POST <url>")
    logging.getLogger("httpx").warning("refused")
    assert [json.loads(text)["event"] for text in out.getvalue().splitlines()] == written


def _access_line(path: str) -> dict[str, object]:
    out = io.StringIO()
    configure_logging("api", form="json", stream=out)
    # The record exactly as uvicorn's access logger writes it: a format string over five arguments.
    logging.getLogger("uvicorn.access").info('%s - "%s %s HTTP/%s" %d', "127.0.0.1:50000", "GET", path, "1.1", 200)
    line: dict[str, object] = json.loads(out.getvalue())
    return line


def test_access_lines_have_fields_and_no_query_credentials() -> None:
    line = _access_line("/sites/7/events?access_token=s3cret&after=4&TOKEN=other")
    assert "s3cret" not in json.dumps(line) and "other" not in json.dumps(line)
    assert line["path"] == "/sites/7/events?access_token=[redacted]&after=4&TOKEN=[redacted]"
    assert (line["method"], line["status"], line["client"]) == ("GET", 200, "127.0.0.1:50000")


def test_paths_without_credentials_are_kept_as_sent() -> None:
    assert redact_query("/bots/1?tokens=a%20b&x=1") == "/bots/1?tokens=a%20b&x=1"
    assert redact_query("/bots/1") == "/bots/1"
