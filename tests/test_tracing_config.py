"""Tracing is configured by the standard OTEL_* variables and, while off, installs nothing on any path."""

from __future__ import annotations

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware
from opentelemetry.sdk.trace.export import ConsoleSpanExporter

from api.app import create_app
from lifecycle.settings import Settings
from lifecycle.tracing import UnknownExporter, exporters_from_environment, temporal_interceptors, tracing_enabled


def test_exporters_come_from_otel_traces_exporter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console, otlp")
    assert [type(exporter) for exporter in exporters_from_environment()] == [ConsoleSpanExporter, OTLPSpanExporter]
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert exporters_from_environment() == []


@pytest.mark.parametrize("value", ["", "none"])
def test_tracing_is_off_unless_asked_for(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", value)
    assert exporters_from_environment() == []


def test_an_unknown_exporter_is_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "jaeger")
    with pytest.raises(UnknownExporter, match="'jaeger'"):
        exporters_from_environment()


def test_while_off_no_middleware_and_no_interceptor_is_installed() -> None:
    assert not tracing_enabled()
    app = create_app(Settings())
    assert OpenTelemetryMiddleware not in [middleware.cls for middleware in app.user_middleware]
    assert list(temporal_interceptors()) == []
