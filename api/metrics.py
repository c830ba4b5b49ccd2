"""Request counts and latencies for Prometheus, labelled by route template rather than raw path."""

from __future__ import annotations

import time

from fastapi import FastAPI, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.types import ASGIApp


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


class _MetricsMiddleware(BaseHTTPMiddleware):
    def __init__(self, app: ASGIApp, metrics: ApiMetrics) -> None:
        super().__init__(app)
        self.metrics = metrics

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        started = time.perf_counter()
        status = 500
        try:
            response = await call_next(request)
            status = response.status_code
            return response
        finally:
            route = request.scope.get("route")
            template = getattr(route, "path", "unmatched")
            self.metrics.requests.labels(request.method, template, str(status)).inc()
            self.metrics.latency.labels(request.method, template).observe(time.perf_counter() - started)


def install_metrics(app: FastAPI) -> None:
    metrics = ApiMetrics()
    app.add_middleware(_MetricsMiddleware, metrics=metrics)

    @app.get("/metrics", include_in_schema=False)
    async def _metrics() -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)
