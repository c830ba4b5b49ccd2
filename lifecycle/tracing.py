"""OpenTelemetry traces: one trace per request, from the API through Temporal to the worker's SQL and SMTP.

Off unless the standard variables ask for it: OTEL_TRACES_EXPORTER=console and/or otlp (comma-separated; OTLP
over HTTP, to OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT). The SDK itself reads the
rest: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER, OTEL_BSP_* and OTEL_SDK_DISABLED.
While off, nothing is installed at all (no middleware, no SQL event listeners, no Temporal interceptor), so
tracing costs a request nothing; nor is the SDK imported, so it costs no process its start-up time either.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from opentelemetry import trace

if TYPE_CHECKING:
    from fastapi import FastAPI
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import Span
    from sqlalchemy.ext.asyncio import AsyncEngine
    from starlette.types import ASGIApp, Message, Receive, Scope, Send
    from temporalio.contrib.opentelemetry import TracingInterceptor

from lifecycle.logging_setup import redact_query

TRACER_NAME = "lifecycle"

_provider: TracerProvider | None = None


class UnknownExporter(ValueError):
    pass


def _exporter(name: str) -> SpanExporter:
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    if name == "otlp":
        # Imported only when asked for: it pulls in protobuf and requests.
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter()
    raise UnknownExporter(f"OTEL_TRACES_EXPORTER: {name!r} is not console, otlp or none")


def exporters_from_environment() -> list[SpanExporter]:
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return []
    names = [name.strip() for name in os.environ.get("OTEL_TRACES_EXPORTER", "").split(",") if name.strip()]
    return [_exporter(name) for name in names if name != "none"]


def configure_tracing(service_name: str) -> TracerProvider | None:
    """Install the process's tracer provider from OTEL_* variables; None (and nothing installed) when off."""
    exporters = exporters_from_environment()
    if not exporters:
        return None
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    # OTEL_SERVICE_NAME, when set, wins over the default name given here.
    provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    use_tracer_provider(provider)
    return provider


def use_tracer_provider(provider: TracerProvider) -> None:
    """Make `provider` the one every part of this process traces into (also how tests collect spans)."""
    global _provider
    trace.set_tracer_provider(provider)
    _provider = provider


def stop_tracing() -> None:
    """Export what is buffered and stop; the parts built from now on are untraced again."""
    global _provider
    provider, _provider = _provider, None
    if provider is not None:
        provider.shutdown()


def flush_tracing() -> None:
    """Export what is buffered, keeping the provider: the API calls it as it shuts down, since uvicorn then
    raises the stop signal again and the process dies of it, before the provider's own flush at exit."""
    if _provider is not None:
        _provider.force_flush()


def tracing_enabled() -> bool:
    return _provider is not None


def tracer() -> trace.Tracer:
    return trace.get_tracer(TRACER_NAME)


def temporal_interceptors() -> Sequence[TracingInterceptor]:
    """For Client.connect: spans for each start, and, in a worker built on that client, for each workflow run
    and activity, parented by the caller's span through the workflow's headers."""
    if not tracing_enabled():
        return []
    from temporalio.contrib.opentelemetry import TracingInterceptor

    return [TracingInterceptor()]


def trace_engine(engine: AsyncEngine) -> None:
    """A span per SQL statement on `engine`, a child of whatever span is current when it runs."""
    if tracing_enabled():
        from opentelemetry.instrumentation.sqlalchemy.engine import EngineTracer
        from opentelemetry.metrics import NoOpMeter

        connections = NoOpMeter(TRACER_NAME).create_up_down_counter("db.client.connections.usage")
        EngineTracer(trace.get_tracer("opentelemetry.instrumentation.sqlalchemy"), engine.sync_engine, connections)


# URL attributes the ASGI instrumentation records, which would otherwise keep a credential sent in the query.
_URL_ATTRIBUTES = ("http.url", "http.target", "url.full", "url.query")


def _redact_url_attributes(span: Span, scope: dict[str, Any]) -> None:
    attributes = getattr(span, "attributes", None) or {}
    for name in _URL_ATTRIBUTES:
        value = attributes.get(name)
        if isinstance(value, str):
            redacted = redact_query(value if name != "url.query" else f"?{value}")
            span.set_attribute(name, redacted if name != "url.query" else redacted.removeprefix("?"))


class _RouteName:
    """Names the request's span after its route template (`GET /sites/{site_id}/events`) as the answer starts,
    once routing has run, and before the span ends with the answer's last byte: the raw path would make one
    span name per site."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def naming_send(message: Message) -> None:
            route = getattr(scope.get("route"), "path", None)
            if message["type"] == "http.response.start" and route is not None:
                span = trace.get_current_span()
                span.update_name(f"{scope['method']} {route}")
                span.set_attribute("http.route", route)
            await send(message)

        await self.app(scope, receive, naming_send)


def instrument_app(app: FastAPI) -> None:
    """A server span per request, outermost, when tracing is on; nothing at all otherwise.

    Only the request's own span: the instrumentation's default of a span per ASGI message would make an
    event stream of minutes thousands of spans, one per event and keepalive.
    """
    if not tracing_enabled():
        return
    from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware

    app.add_middleware(_RouteName)
    app.add_middleware(
        OpenTelemetryMiddleware, exclude_spans=["receive", "send"], server_request_hook=_redact_url_attributes
    )
