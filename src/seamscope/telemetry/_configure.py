"""configure(): SDK providers for an application that wants seamscope's telemetry.

This is the one place (with the CLI) that builds SDK providers; library code
only takes providers passed in or the global API. An application calls it
on purpose, once:

    handle = seamscope.telemetry.configure(service_name="checkout-agent")
    observer = handle.observer            # give it to the loop
    ...
    handle.shutdown()                     # also runs at interpreter exit

Sources, in precedence order: arguments, then the standard ``OTEL_*``
environment (``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``,
``OTEL_EXPORTER_OTLP_ENDPOINT``/``_TRACES_ENDPOINT``/``_METRICS_ENDPOINT``,
``OTEL_EXPORTER_OTLP_PROTOCOL``, ``OTEL_EXPORTER_OTLP_HEADERS``,
``OTEL_TRACES_SAMPLER``/``_ARG``, ``OTEL_METRICS_EXEMPLAR_FILTER``), then
defaults. ``OTEL_SDK_DISABLED=true`` yields a disabled handle whose observer
records nothing.

Exemplars follow the SDK's default (``trace_based``: a point recorded inside
a sampled span carries its trace and span ids); ``OTEL_METRICS_EXEMPLAR_FILTER``
(``always_on``, ``always_off``, ``trace_based``) overrides it. The meter
provider is the SDK's own with plain readers: seamscope keeps no aggregation
of its own.
"""

from __future__ import annotations

import atexit
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opentelemetry import metrics, trace

from seamscope.telemetry._config import TelemetryConfig
from seamscope.telemetry._observer import OTelObserver

__all__ = ["TelemetryHandle", "configure"]

_SUPPORTED_PROTOCOLS = ("http/protobuf",)


@dataclass
class TelemetryHandle:
    """What :func:`configure` built; flush and shut it down when done."""

    tracer_provider: Any
    meter_provider: Any
    observer: OTelObserver
    enabled: bool = True
    prometheus_address: tuple[str, int] | None = None
    trace_file: Path | None = None
    push_metrics: bool = False
    _server: Any = field(default=None, repr=False)
    _closed: bool = field(default=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def flush(self, timeout_millis: int = 10_000) -> bool:
        """Export everything buffered; False when an exporter did not finish.

        Metrics are flushed only when a push exporter (OTLP) is configured: a
        flush makes the pull-based Prometheus reader queue an extra snapshot,
        which the next scrape would expose as duplicate series.
        """
        if not self.enabled:
            return True
        providers = [self.tracer_provider]
        if self.push_metrics:
            providers.append(self.meter_provider)
        ok = True
        for provider in providers:
            try:
                ok = bool(provider.force_flush(timeout_millis)) and ok
            except Exception:
                ok = False
        return ok

    def shutdown(self) -> None:
        """Flush and shut down providers and the scrape endpoint; idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if not self.enabled:
            return
        for provider in (self.tracer_provider, self.meter_provider):
            try:
                provider.shutdown()
            except Exception:
                pass
        if self._server is not None:
            try:
                server, thread = self._server
                server.shutdown()
                server.server_close()
                thread.join(timeout=5)
            except Exception:
                pass


def _env_true(environ: Mapping[str, str], name: str) -> bool:
    return environ.get(name, "").strip().lower() == "true"


def _parse_headers(raw: str | None) -> dict[str, str]:
    headers: dict[str, str] = {}
    if not raw:
        return headers
    for item in raw.split(","):
        if "=" not in item:
            raise ValueError(f"OTEL_EXPORTER_OTLP_HEADERS: malformed entry {item!r}")
        key, value = item.split("=", 1)
        headers[key.strip()] = value.strip()
    return headers


def _endpoint(base: str | None, signal: str, explicit: str | None) -> str | None:
    if explicit:
        return explicit
    if base:
        return base.rstrip("/") + f"/v1/{signal}"
    return None


def _exemplar_filter(env: Mapping[str, str]) -> Any:
    """The exemplar filter ``OTEL_METRICS_EXEMPLAR_FILTER`` names in ``env``;
    None leaves the SDK's default (it reports an unknown name itself)."""
    from opentelemetry.sdk.metrics import (
        AlwaysOffExemplarFilter,
        AlwaysOnExemplarFilter,
        TraceBasedExemplarFilter,
    )

    name = env.get("OTEL_METRICS_EXEMPLAR_FILTER", "").strip().lower()
    if name == "always_on":
        return AlwaysOnExemplarFilter()
    if name == "always_off":
        return AlwaysOffExemplarFilter()
    if name == "trace_based":
        return TraceBasedExemplarFilter()
    return None


def configure(
    *,
    service_name: str | None = None,
    otlp_endpoint: str | None = None,
    otlp_protocol: str | None = None,
    otlp_headers: Mapping[str, str] | None = None,
    otlp_metrics: bool = False,
    trace_file: str | os.PathLike[str] | None = None,
    prometheus_port: int | None = None,
    prometheus_host: str = "127.0.0.1",
    prometheus_registry: Any | None = None,
    resource_attributes: Mapping[str, str] | None = None,
    sampler: Any | None = None,
    id_generator: Any | None = None,
    extra_span_processors: tuple[Any, ...] = (),
    config: TelemetryConfig | None = None,
    set_global: bool = True,
    register_atexit: bool = True,
    environ: Mapping[str, str] | None = None,
) -> TelemetryHandle:
    """Build SDK tracer and meter providers and an :class:`OTelObserver`.

    * ``otlp_endpoint``: base URL of an OTLP/HTTP receiver (``/v1/traces`` is
      appended); else ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (used as is) or
      ``OTEL_EXPORTER_OTLP_ENDPOINT``. Only ``http/protobuf`` is supported.
    * ``otlp_metrics``: also push metrics over OTLP/HTTP.
    * ``trace_file``: also write spans as OTLP-JSON lines to this file.
    * ``prometheus_port``: serve ``/metrics`` on ``prometheus_host:port``
      (``0`` picks a free port; the address is on the handle).
    * ``set_global``: install the providers as the global ones (an
      application's choice; tests pass False).
    """
    env = os.environ if environ is None else environ
    if _env_true(env, "OTEL_SDK_DISABLED"):
        observer = OTelObserver(
            tracer_provider=trace.NoOpTracerProvider(),
            meter_provider=metrics.NoOpMeterProvider(),
            config=config,
        )
        return TelemetryHandle(None, None, observer, enabled=False)

    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    if prometheus_port is not None and (
        isinstance(prometheus_port, bool)
        or not isinstance(prometheus_port, int)
        or not 0 <= prometheus_port <= 65535
    ):
        raise ValueError(f"configure: prometheus_port must be 0..65535, got {prometheus_port!r}")
    protocol = (
        otlp_protocol
        or env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or env.get("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    )
    traces_endpoint = _endpoint(
        otlp_endpoint or env.get("OTEL_EXPORTER_OTLP_ENDPOINT"),
        "traces",
        None if otlp_endpoint else env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
    )
    if traces_endpoint and protocol not in _SUPPORTED_PROTOCOLS:
        raise ValueError(
            f"configure: otlp_protocol {protocol!r} is not supported; use 'http/protobuf'"
        )
    headers = (
        dict(otlp_headers)
        if otlp_headers is not None
        else _parse_headers(env.get("OTEL_EXPORTER_OTLP_HEADERS"))
    )

    # precedence: arguments, then the given environment, then defaults. The
    # SDK's own detector reads os.environ; values taken from ``environ`` are
    # passed explicitly so a custom mapping is honoured too.
    attrs: dict[str, str] = {}
    for item in (env.get("OTEL_RESOURCE_ATTRIBUTES") or "").split(","):
        key, sep, value = item.partition("=")
        if sep and key.strip():
            attrs[key.strip()] = value.strip()
    attrs.update(resource_attributes or {})
    if service_name:
        attrs["service.name"] = service_name
    elif env.get("OTEL_SERVICE_NAME"):
        attrs["service.name"] = env["OTEL_SERVICE_NAME"]
    else:
        attrs.setdefault("service.name", "seamscope")
    resource = Resource.create(attrs)

    tracer_provider = TracerProvider(resource=resource, sampler=sampler, id_generator=id_generator)
    for processor in extra_span_processors:
        tracer_provider.add_span_processor(processor)
    if traces_endpoint:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        tracer_provider.add_span_processor(
            BatchSpanProcessor(OTLPSpanExporter(endpoint=traces_endpoint, headers=headers))
        )
    trace_path: Path | None = None
    if trace_file is not None:
        from opentelemetry.exporter.otlp.json.file import FileSpanExporter

        trace_path = Path(trace_file)
        tracer_provider.add_span_processor(BatchSpanProcessor(FileSpanExporter(str(trace_path))))

    metrics_endpoint = _endpoint(
        otlp_endpoint or env.get("OTEL_EXPORTER_OTLP_ENDPOINT"),
        "metrics",
        None if otlp_endpoint else env.get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"),
    )
    push_metrics = bool(otlp_metrics and metrics_endpoint)
    exemplar_filter = _exemplar_filter(env)
    readers: list[Any] = []
    server: tuple[Any, Any] | None = None
    address = None
    if prometheus_port is not None:
        from prometheus_client import REGISTRY, start_http_server

        registry = prometheus_registry if prometheus_registry is not None else REGISTRY
        from opentelemetry.exporter.prometheus import PrometheusMetricReader

        readers.append(PrometheusMetricReader(registry=registry))
        http_server, thread = start_http_server(prometheus_port, prometheus_host, registry=registry)
        address = (prometheus_host, int(http_server.server_address[1]))
        server = (http_server, thread)
    if push_metrics:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

        readers.append(
            PeriodicExportingMetricReader(
                OTLPMetricExporter(endpoint=metrics_endpoint, headers=headers)
            )
        )
    meter_provider = MeterProvider(
        resource=resource, metric_readers=readers, exemplar_filter=exemplar_filter
    )

    if set_global:
        trace.set_tracer_provider(tracer_provider)
        metrics.set_meter_provider(meter_provider)
    observer = OTelObserver(
        tracer_provider=tracer_provider, meter_provider=meter_provider, config=config
    )
    handle = TelemetryHandle(
        tracer_provider,
        meter_provider,
        observer,
        prometheus_address=address,
        trace_file=trace_path,
        push_metrics=push_metrics,
        _server=server,
    )
    if register_atexit:
        atexit.register(handle.shutdown)
    return handle
