"""Request counts and latencies for Prometheus, labelled by route template rather than raw path."""

from __future__ import annotations

import time

from fastapi import FastAPI, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from starlette.types import ASGIApp, Message, Receive, Scope, Send


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
            "HTTP request latency",
            ["method", "route"],
            registry=self.registry,
        )


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

        async def recording_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, recording_send)
        finally:
            template = getattr(scope.get("route"), "path", "unmatched")
            self.metrics.requests.labels(scope["method"], template, str(status)).inc()
            self.metrics.latency.labels(scope["method"], template).observe(time.perf_counter() - started)


def install_metrics(app: FastAPI) -> None:
    metrics = ApiMetrics()
    app.add_middleware(_MetricsMiddleware, metrics=metrics)

    @app.get("/metrics", include_in_schema=False)
    async def _metrics() -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)
