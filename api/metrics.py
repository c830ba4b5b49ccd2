"""Request counts and latencies for Prometheus, labelled by route template rather than raw path, and the work's own
gauges (api/lifecycle_metrics.py), read from the database at each scrape.

Event streams (text/event-stream) last minutes, ordinary answers milliseconds: each has a histogram of its own
with buckets that resolve it, so a stream never lands in, or skews the quantiles of, the latency histogram.
"""

from __future__ import annotations

import time

from fastapi import FastAPI, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.dependencies import EngineDep, MetricsReaderDep, SettingsDep
from api.lifecycle_metrics import LifecycleGauges

# Answers take milliseconds; a deletion answered inline waits up to DELETION_INLINE_WAIT (5 s), `Prefer: wait`
# up to 30 s.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
# A stream lasts until its subject settles (a site's creation: seconds to minutes) or its client leaves.
STREAM_BUCKETS = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)
_EVENT_STREAM = b"text/event-stream"


class ApiMetrics:
    def __init__(self) -> None:
        # One registry per app, so several apps in one test process do not collide.
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "api_requests_total",
            "HTTP requests handled",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "api_request_duration_seconds",
            "HTTP request latency, event streams excluded",
            ["method", "route"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.streams = Histogram(
            "api_stream_duration_seconds",
            "How long event streams (text/event-stream) stayed open",
            ["route"],
            buckets=STREAM_BUCKETS,
            registry=self.registry,
        )
        self.lifecycle = LifecycleGauges(self.registry)


class _MetricsMiddleware:
    """Plain ASGI, so it never changes how errors or streaming responses travel."""

    def __init__(self, app: ASGIApp, metrics: ApiMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500
        stream = False

        async def recording_send(message: Message) -> None:
            nonlocal status, stream
            if message["type"] == "http.response.start":
                status = message["status"]
                stream = any(
                    name == b"content-type" and value.startswith(_EVENT_STREAM) for name, value in message["headers"]
                )
            await send(message)

        try:
            await self.app(scope, receive, recording_send)
        finally:
            template = getattr(scope.get("route"), "path", "unmatched")
            self.metrics.requests.labels(scope["method"], template, str(status)).inc()
            spent = time.perf_counter() - started
            if stream:
                self.metrics.streams.labels(template).observe(spent)
            else:
                self.metrics.latency.labels(scope["method"], template).observe(spent)


def install_metrics(app: FastAPI) -> None:
    metrics = ApiMetrics()
    app.add_middleware(_MetricsMiddleware, metrics=metrics)

    # For Prometheus with a metrics credential (deploy/prometheus.yml), or an admin: the routes, their traffic and
    # their errors are the operator's business. Left out of the schema, not out of the authorization matrix.
    @app.get("/metrics", include_in_schema=False)
    async def _metrics(_reader: MetricsReaderDep, engine: EngineDep, settings: SettingsDep) -> Response:
        await metrics.lifecycle.refresh(engine, settings)
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)
