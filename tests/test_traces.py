"""One trace per request, from the HTTP request through Temporal to the worker's SQL and SMTP, collected by the
OpenTelemetry SDK's in-memory exporter from a real API (uvicorn), a real worker, dev server and PostgreSQL.

Tracing is global to a process (one tracer provider), so this module installs it once and removes it at the end;
parts built meanwhile (this module's API, client and worker) are traced, parts built before or after are not.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

import httpx
import pytest_asyncio
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from temporalio.client import Client

from api.app import create_app
from lifecycle.settings import Settings
from lifecycle.sites.contracts import SITE_STEPS
from lifecycle.temporal_client import connect
from lifecycle.tracing import stop_tracing, use_tracer_provider
from tests.conftest import ADMIN_HEADERS
from tests.in_process_api import served_in_process
from tests.workers import own_queue, own_worker
from worker import LifecycleWorkers
from workflows.sites.creation import SiteActivities

STREAM_SPAN = "GET /sites/{site_id}/events"
# The activities of one site creation that ends active: its four steps, then the site-ready email.
STEP_ACTIVITIES = {
    "metadata": SiteActivities.save_site_metadata,
    "filesystem": SiteActivities.create_site_filesystem,
    "database": SiteActivities.create_site_database,
    "bootstrap": SiteActivities.bootstrap_site,
}


@dataclass(frozen=True)
class Traced:
    exporter: InMemorySpanExporter
    client: Client
    settings: Settings
    base_url: str

    def spans(self) -> tuple[ReadableSpan, ...]:
        return self.exporter.get_finished_spans()

    def http(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.base_url, timeout=httpx.Timeout(30.0))


@pytest_asyncio.fixture(scope="module")
async def traced(settings: Settings) -> AsyncIterator[Traced]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    use_tracer_provider(provider)
    try:
        own = own_queue(settings)
        # As the API and the worker connect: with the tracing interceptor, since tracing is on.
        client = await connect(own)
        app = create_app(own, temporal_client=client)
        async with served_in_process(app) as port:
            yield Traced(exporter, client, own, f"http://127.0.0.1:{port}")
    finally:
        stop_tracing()


@pytest_asyncio.fixture
async def traced_worker(traced: Traced) -> AsyncIterator[LifecycleWorkers]:
    async with own_worker(traced.settings, traced.client) as running:
        yield running


async def _account_headers(http: httpx.AsyncClient) -> dict[str, str]:
    suffix = uuid.uuid4().hex[:8]
    created = await http.post(
        "/accounts", json={"name": f"Traced {suffix}", "email": f"traced-{suffix}@example.com"}, headers=ADMIN_HEADERS
    )
    assert created.status_code == 201, created.text
    return {"Authorization": f"Bearer {created.json()['api_key']}"}


async def _create_site(http: httpx.AsyncClient, headers: dict[str, str]) -> str:
    domain = f"traced-{uuid.uuid4().hex[:10]}.example.com"
    created = await http.post("/sites", json={"name": "Traced", "domain": domain}, headers=headers)
    assert created.status_code == 202, created.text
    return str(created.json()["id"])


async def _until_closed(client: Client, site_id: str) -> None:
    """The creation's run has closed, so every span of its workflow and activities has ended."""
    await client.get_workflow_handle(f"site-creation-{site_id}").result()


def _children(spans: Sequence[ReadableSpan], parent: ReadableSpan) -> list[ReadableSpan]:
    parent_id = parent.context.span_id
    return [span for span in spans if span.parent is not None and span.parent.span_id == parent_id]


def _is_sql(span: ReadableSpan) -> bool:
    return span.kind is SpanKind.CLIENT and (span.attributes or {}).get("db.system") == "postgresql"


def _one(spans: Sequence[ReadableSpan], name: str) -> ReadableSpan:
    found = [span for span in spans if span.name == name]
    assert len(found) == 1, (name, sorted(span.name for span in spans))
    return found[0]


async def test_one_post_sites_is_one_trace_from_request_to_sql_and_smtp(
    traced: Traced, traced_worker: LifecycleWorkers
) -> None:
    async with traced.http() as http:
        headers = await _account_headers(http)
        site_id = await _create_site(http, headers)
    await _until_closed(traced.client, site_id)

    request = _one([span for span in traced.spans() if span.kind is SpanKind.SERVER], "POST /sites")
    trace = [span for span in traced.spans() if span.context.trace_id == request.context.trace_id]
    # The request's own statements (the caller's key, the site's row) are children of its span.
    assert any(_is_sql(span) for span in _children(trace, request))
    start = _one(trace, "StartWorkflow:SiteCreationWorkflow")
    run = _one(trace, "RunWorkflow:SiteCreationWorkflow")
    # The start is the request's child, and the run continues from the start through the workflow's headers.
    assert start.parent is not None and start.parent.span_id == request.context.span_id
    assert run.parent is not None and run.parent.span_id == start.context.span_id
    for step, method in STEP_ACTIVITIES.items():
        name = method.__temporal_activity_definition.name  # type: ignore[attr-defined]
        activity = _one(trace, f"RunActivity:{name}")
        assert _one(trace, f"StartActivity:{name}").context.span_id == activity.parent.span_id  # type: ignore[union-attr]
        # Every step writes its status (and the database step creates a database): its SQL is its children.
        assert any(_is_sql(span) for span in _children(trace, activity)), step
    mail = _one(trace, "RunActivity:send_site_ready_email")
    smtp = _one(_children(trace, mail), "smtp send")
    assert smtp.kind is SpanKind.CLIENT and smtp.attributes is not None
    assert smtp.attributes["server.port"] == traced.settings.smtp_port
    assert set(SITE_STEPS) == set(STEP_ACTIVITIES)


async def _read_until_first_event(lines: AsyncIterator[str]) -> dict[str, object]:
    async for line in lines:
        if line.startswith("data: "):
            event: dict[str, object] = json.loads(line.removeprefix("data: "))
            return event
    raise AssertionError("the stream ended before its first event")


async def test_each_stream_has_a_span_of_its_own_that_lasts_as_long_as_the_stream(traced: Traced) -> None:
    async with traced.http() as http:
        headers = await _account_headers(http)
        sites = [await _create_site(http, headers) for _ in range(2)]
        async with (
            http.stream("GET", f"/sites/{sites[0]}/events?access_token=s3cret", headers=headers) as first,
            http.stream("GET", f"/sites/{sites[1]}/events", headers=headers) as second,
        ):
            streams = [first.aiter_lines(), second.aiter_lines()]
            for lines in streams:
                assert (await _read_until_first_event(lines))["status"] == "provisioning"
            # Both streams are open: neither span has ended early.
            assert [span for span in traced.spans() if span.name == STREAM_SPAN] == []
            both_open_at = time.time_ns()
            # No worker polls the queue until now; with one, both sites become active and both streams end.
            async with own_worker(traced.settings, traced.client):
                for lines in streams:
                    async for _ in lines:
                        pass
                for site_id in sites:
                    await _until_closed(traced.client, site_id)

    spans = traced.spans()
    stream_spans = [span for span in spans if span.name == STREAM_SPAN]
    assert len(stream_spans) == 2
    assert len({span.context.trace_id for span in stream_spans}) == 2
    posts = {span.context.trace_id for span in spans if span.name == "POST /sites"}
    for stream in stream_spans:
        # It lasted as long as its stream: past the moment both were open, until the stream's end.
        assert stream.end_time is not None and stream.end_time > both_open_at
        assert stream.context.trace_id not in posts
        # Its reads while it ran (the first, then one per change the hub woke it for) are in its own trace.
        reads = [span for span in spans if _is_sql(span) and span.context.trace_id == stream.context.trace_id]
        assert len(reads) >= 3
        assert all(span.start_time >= stream.start_time for span in reads)  # type: ignore[operator]
    # The credential a client may put in the query string is kept out of the span's attributes.
    recorded = json.dumps([dict(span.attributes or {}) for span in stream_spans])
    assert "s3cret" not in recorded and "[redacted]" in recorded
