"""Shared fixtures: fresh, never-global OpenTelemetry providers and captured logs.

Every test gets its own tracer and meter provider backed by in-memory
exporters; nothing here touches the global OpenTelemetry providers or
structlog's global configuration beyond :func:`structlog.testing.capture_logs`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
import structlog
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

_TELEMETRY_ENV = ("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",)
_TELEMETRY_ENV_PREFIX = "SEAMSCOPE_"


@pytest.fixture(autouse=True)
def _reset_telemetry_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests start from defaults: no content capture, no seamscope overrides."""
    for name in _TELEMETRY_ENV:
        monkeypatch.delenv(name, raising=False)
    for name in list(os.environ):
        if name.startswith(_TELEMETRY_ENV_PREFIX):
            monkeypatch.delenv(name, raising=False)


@pytest.fixture
def global_providers_kept(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """For a test that runs an application's code in this process (a page's
    snippet calling ``configure()``): the global providers it sets are
    recorded here, never installed, so no later test inherits a provider the
    snippet shut down."""
    calls: list[str] = []
    monkeypatch.setattr(
        trace, "set_tracer_provider", lambda provider: calls.append("set_tracer_provider")
    )
    monkeypatch.setattr(
        metrics, "set_meter_provider", lambda provider: calls.append("set_meter_provider")
    )
    return calls


@pytest.fixture
def span_exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def tracer_provider(span_exporter: InMemorySpanExporter) -> Iterator[TracerProvider]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(span_exporter))
    yield provider
    provider.shutdown()


@pytest.fixture
def metric_reader() -> InMemoryMetricReader:
    return InMemoryMetricReader()


@pytest.fixture
def meter_provider(metric_reader: InMemoryMetricReader) -> Iterator[MeterProvider]:
    provider = MeterProvider(metric_readers=[metric_reader])
    yield provider
    provider.shutdown()


@pytest.fixture
def captured_logs() -> Iterator[list[dict[str, Any]]]:
    """structlog events emitted during the test, as dicts (``event``, ``log_level``, ...)."""
    with structlog.testing.capture_logs() as logs:
        yield logs
