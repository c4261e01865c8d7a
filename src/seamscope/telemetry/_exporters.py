"""The exporters :func:`~seamscope.telemetry.configure` wires, and where they send.

* :func:`otlp_targets`: each signal's OTLP endpoint, protocol and headers,
  from ``configure()``'s arguments, then the standard ``OTEL_EXPORTER_OTLP_*``
  environment (the signal's variable replaces the general one), then
  defaults. Headers are percent-decoded as the OTLP exporter specification
  says; an error about them never shows a value.
* :class:`Exports`: builds the span exporters (OTLP over ``http/protobuf``
  with the bounded ``requests`` session of :mod:`._bounded`, or ``grpc``; the
  OTLP-JSON trace file) and the OTLP metric exporter, each wrapped in a
  guard of :mod:`._export` that counts what it exported and dropped and turns
  a failed batch into a rate-limited ``seamscope.telemetry.error`` event.
  The guards end up on the :class:`~seamscope.telemetry.TelemetryHandle`.
* :func:`prometheus_reader`: the pull reader and its ``/metrics`` server.
* The settings read as the SDK reads them, then passed to it explicitly:
  export timeouts, the span queue and batch sizes, the exemplar filter.

The SDK modules are imported when a builder runs, not with this module.
"""

from __future__ import annotations

import logging
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from seamscope.telemetry._arguments import check_endpoint
from seamscope.telemetry._export import (
    SDK_LOGS,
    CountingSpanProcessor,
    GuardedMetricExporter,
    GuardedSpanExporter,
    Tally,
    metric_preferences,
)
from seamscope.telemetry._logging import RateLimit

__all__ = [
    "Exports",
    "Guard",
    "OtlpTargets",
    "env_true",
    "exemplar_filter",
    "otlp_targets",
    "positive_millis",
    "prometheus_reader",
]

_log = logging.getLogger("seamscope.telemetry")

_SUPPORTED_PROTOCOLS = ("http/protobuf", "grpc")
_GRPC_EXTRA = "pip install 'seamscope[grpc]'"
# an HTTP header name (RFC 9110 token)
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

Guard = GuardedSpanExporter | GuardedMetricExporter
"""An exporter of either signal as :class:`Exports` wraps it."""


def env_true(environ: Mapping[str, str], name: str) -> bool:
    return environ.get(name, "").strip().lower() == "true"


def positive_millis(name: str, value: Any) -> float:
    """``value`` (a ``configure()`` argument called ``name``) as a float of
    milliseconds; TypeError or ValueError unless a finite number > 0."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"configure: {name} must be a number, got {type(value).__name__}")
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"configure: {name} must be a finite number > 0, got {value!r}")
    return float(value)


# -- where each signal goes ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OtlpTargets:
    """Each signal's OTLP endpoint (None: no OTLP exporter), protocol and headers."""

    traces_endpoint: str | None
    traces_protocol: str
    traces_headers: dict[str, str]
    metrics_endpoint: str | None
    metrics_protocol: str
    metrics_headers: dict[str, str]
    push_metrics: bool
    """Whether metrics are pushed over OTLP (asked for, and an endpoint known)."""


def otlp_targets(
    otlp_endpoint: str | None,
    otlp_protocol: str | None,
    otlp_headers: Mapping[str, str] | None,
    otlp_metrics: bool,
    env: Mapping[str, str],
) -> OtlpTargets:
    """Where traces (and, with ``otlp_metrics``, metrics) go over OTLP;
    ValueError saying why when a protocol, endpoint or header is unusable."""
    base = otlp_endpoint or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    explicit_traces = None if otlp_endpoint else env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    traces_protocol = _protocol(otlp_protocol, env, "traces", bool(base or explicit_traces))
    if otlp_endpoint:
        check_endpoint(otlp_endpoint, traces_protocol)
    traces_endpoint = _endpoint(base, "traces", explicit_traces, traces_protocol)
    explicit_metrics = None if otlp_endpoint else env.get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
    metrics_protocol = _protocol(
        otlp_protocol, env, "metrics", otlp_metrics and bool(base or explicit_metrics)
    )
    metrics_endpoint = _endpoint(base, "metrics", explicit_metrics, metrics_protocol)
    push_metrics = bool(otlp_metrics and metrics_endpoint)
    return OtlpTargets(
        traces_endpoint=traces_endpoint,
        traces_protocol=traces_protocol,
        traces_headers=_signal_headers(otlp_headers, env, "traces") if traces_endpoint else {},
        metrics_endpoint=metrics_endpoint,
        metrics_protocol=metrics_protocol,
        metrics_headers=_signal_headers(otlp_headers, env, "metrics") if push_metrics else {},
        push_metrics=push_metrics,
    )


def _parse_headers(raw: str | None, name: str) -> dict[str, str]:
    """``key=value,...`` from the variable ``name``: keys are HTTP header names,
    values are percent-decoded (the OTLP exporter specification). A
    malformed entry raises ValueError naming its position, never its text."""
    headers: dict[str, str] = {}
    if not raw:
        return headers
    entries = raw.split(",")
    for index, item in enumerate(entries, 1):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        key = key.strip()
        where = f"{name}: entry {index} of {len(entries)}"
        if not sep or not _TOKEN.fullmatch(key):
            raise ValueError(
                f"{where} is not key=value with a header name as key (its text is not shown)"
            )
        try:
            decoded = unquote(value.strip(), errors="strict")
        except UnicodeDecodeError:
            raise ValueError(
                f"{where}: the value of {key!r} is not percent-encoded UTF-8 "
                "(the value is not shown)"
            ) from None
        if _CONTROL.search(decoded):
            raise ValueError(
                f"{where}: the value of {key!r} contains a control character "
                "(the value is not shown)"
            )
        headers[key.lower()] = decoded
    return headers


def _signal_headers(
    given: Mapping[str, str] | None, env: Mapping[str, str], signal: str
) -> dict[str, str]:
    """Headers for one signal: the argument, else ``OTEL_EXPORTER_OTLP_{SIGNAL}_HEADERS``,
    else ``OTEL_EXPORTER_OTLP_HEADERS`` (the signal's variable replaces the general one)."""
    if given is not None:
        return {str(key).lower(): str(value) for key, value in given.items()}
    name = f"OTEL_EXPORTER_OTLP_{signal.upper()}_HEADERS"
    if env.get(name):
        return _parse_headers(env[name], name)
    return _parse_headers(env.get("OTEL_EXPORTER_OTLP_HEADERS"), "OTEL_EXPORTER_OTLP_HEADERS")


def _protocol(given: str | None, env: Mapping[str, str], signal: str, used: bool) -> str:
    """The OTLP protocol of ``signal``; ValueError saying why when it is ``used``
    and not one the SDK has an exporter for."""
    raw = (
        given
        or env.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_PROTOCOL")
        or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"
    )
    protocol = raw.strip().lower()
    if not used:
        return protocol
    if protocol == "http/json":
        raise ValueError(
            "configure: otlp_protocol 'http/json' is not supported: the OpenTelemetry "
            "Python SDK has no OTLP/HTTP JSON exporter; use 'http/protobuf' or 'grpc'"
        )
    if protocol not in _SUPPORTED_PROTOCOLS:
        raise ValueError(
            f"configure: otlp_protocol {raw!r} is not supported; use 'http/protobuf' or 'grpc'"
        )
    return protocol


def _endpoint(
    base: str | None, signal: str, explicit: str | None, protocol: str = "http/protobuf"
) -> str | None:
    if explicit:
        return explicit
    if base:
        return base if protocol == "grpc" else base.rstrip("/") + f"/v1/{signal}"
    return None


def _tls_by_default(
    protocol: str, endpoint: str, env: Mapping[str, str], signal: str = "traces"
) -> bool:
    """Whether the SDK's OTLP/gRPC exporter speaks TLS to ``endpoint`` because
    it has no scheme (``http://`` is plaintext, ``https://`` is TLS, a bare
    ``host:port`` is TLS unless ``OTEL_EXPORTER_OTLP_[{signal}_]INSECURE``
    is true)."""
    if protocol != "grpc" or "://" in endpoint:
        return False
    names = (f"OTEL_EXPORTER_OTLP_{signal.upper()}_INSECURE", "OTEL_EXPORTER_OTLP_INSECURE")
    return not any(env_true(os.environ, name) or env_true(env, name) for name in names)


# -- settings read as the SDK reads them -------------------------------------------


def _export_timeout_s(given: float | None, env: Mapping[str, str], signal: str) -> float | None:
    """Seconds one export (with the SDK's retries) may take: the argument (ms),
    else ``OTEL_EXPORTER_OTLP_{SIGNAL}_TIMEOUT``/``OTEL_EXPORTER_OTLP_TIMEOUT``
    in ``env``, read in seconds as the Python SDK reads them; None leaves it
    to the SDK (the process environment, else 10 s)."""
    if given is not None:
        return positive_millis("export_timeout_millis", given) / 1000
    for name in (f"OTEL_EXPORTER_OTLP_{signal.upper()}_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT"):
        raw = env.get(name)
        if not raw:
            continue
        try:
            value = float(raw.strip())
        except ValueError:
            value = 0.0
        if value > 0:
            return value
        _log.warning("ignoring %s=%r: expected a number of seconds > 0", name, raw)
        return None
    return None


def _bsp_sizes() -> tuple[int, int]:
    """The span queue and batch sizes, read as the SDK reads them (from the
    process environment ``OTEL_BSP_MAX_QUEUE_SIZE`` and
    ``OTEL_BSP_MAX_EXPORT_BATCH_SIZE``, else 2048 and 512), and passed to it
    explicitly so the pending count knows the queue's bound."""
    sizes = []
    for name, default in (
        ("OTEL_BSP_MAX_QUEUE_SIZE", 2048),
        ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512),
    ):
        raw = os.environ.get(name)
        try:
            sizes.append(default if raw is None else int(raw))
        except ValueError:
            _log.warning("ignoring %s=%r: expected an int", name, raw)
            sizes.append(default)
    return sizes[0], sizes[1]


def exemplar_filter(env: Mapping[str, str]) -> Any:
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


# -- the exporters -------------------------------------------------------------------


def _grpc_module(signal: str) -> Any:
    """The SDK's OTLP/gRPC exporter module for ``signal``; ImportError naming the extra."""
    import importlib

    name = "trace_exporter" if signal == "traces" else "metric_exporter"
    try:
        return importlib.import_module(f"opentelemetry.exporter.otlp.proto.grpc.{name}")
    except ImportError as exc:
        raise ImportError(
            f"configure: OTLP/gRPC needs opentelemetry-exporter-otlp-proto-grpc: {_GRPC_EXTRA}"
        ) from exc


class Exports:
    """The guarded exporters of one ``configure()``, in the order it adds them.

    Span exporters go on ``tracer_provider`` behind a batch processor sized
    as the SDK would size it; :meth:`otlp_metrics` returns the metric reader
    for the meter provider. :attr:`guards` is what the handle counts with;
    every guard's error events share ``limiter``.
    """

    def __init__(
        self,
        tracer_provider: Any,
        limiter: RateLimit,
        env: Mapping[str, str],
        export_timeout_millis: float | None,
    ) -> None:
        self.guards: list[Guard] = []
        self._tracer_provider = tracer_provider
        self._limiter = limiter
        self._env = env
        self._export_timeout_millis = export_timeout_millis
        self._queue_size, self._batch_size = _bsp_sizes()

    def _add_spans(self, exporter: Any, kind: str, target: str, hint: str | None = None) -> None:
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        tally = Tally(
            "traces",
            kind,
            target,
            self._limiter,
            capacity=self._queue_size + self._batch_size,
            hint=hint,
        )
        guard = GuardedSpanExporter(exporter, tally)
        self.guards.append(guard)
        processor = BatchSpanProcessor(
            guard, max_queue_size=self._queue_size, max_export_batch_size=self._batch_size
        )
        self._tracer_provider.add_span_processor(CountingSpanProcessor(processor, guard.tally))

    def otlp_spans(self, targets: OtlpTargets) -> None:
        """Spans to ``targets.traces_endpoint`` over its protocol."""
        from seamscope.telemetry._bounded import GRPC_TLS_HINT, session_for

        endpoint = str(targets.traces_endpoint)
        protocol = targets.traces_protocol
        timeout = _export_timeout_s(self._export_timeout_millis, self._env, "traces")
        # the SDK's header-parsing warnings would show values: held back
        with SDK_LOGS.capture():
            if protocol == "grpc":
                exporter: Any = _grpc_module("traces").OTLPSpanExporter(
                    endpoint=endpoint, headers=targets.traces_headers, timeout=timeout
                )
            else:
                from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
                    OTLPSpanExporter,
                )

                exporter = OTLPSpanExporter(
                    endpoint=endpoint,
                    headers=targets.traces_headers,
                    timeout=timeout,
                    session=session_for("traces"),
                )
        self._add_spans(
            exporter,
            f"otlp/{protocol.split('/')[0]}",
            endpoint,
            GRPC_TLS_HINT if _tls_by_default(protocol, endpoint, self._env) else None,
        )

    def file_spans(self, path: Path, mode: str) -> None:
        """Spans as OTLP-JSON lines to ``path``, emptied first when ``mode`` is ``"w"``."""
        from opentelemetry.exporter.otlp.json.file import FileSpanExporter

        if mode == "w":
            path.write_bytes(b"")
        self._add_spans(FileSpanExporter(str(path)), "file", str(path))

    def otlp_metrics(self, targets: OtlpTargets) -> Any:
        """The periodic reader pushing metrics to ``targets.metrics_endpoint``."""
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

        from seamscope.telemetry._bounded import GRPC_TLS_HINT, session_for

        env = self._env
        protocol = targets.metrics_protocol
        timeout = _export_timeout_s(self._export_timeout_millis, env, "metrics")
        temporality, aggregation = metric_preferences(env)
        options: dict[str, Any] = {
            "endpoint": targets.metrics_endpoint,
            "headers": targets.metrics_headers,
            "timeout": timeout,
            "preferred_temporality": temporality,
            "preferred_aggregation": aggregation,
        }
        with SDK_LOGS.capture():
            if protocol == "grpc":
                exporter: Any = _grpc_module("metrics").OTLPMetricExporter(**options)
            else:
                from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
                    OTLPMetricExporter,
                )

                exporter = OTLPMetricExporter(**options, session=session_for("metrics"))
        endpoint = str(targets.metrics_endpoint)
        tls = _tls_by_default(protocol, endpoint, env, "metrics")
        guard = GuardedMetricExporter(
            exporter,
            Tally(
                "metrics",
                f"otlp/{protocol.split('/')[0]}",
                endpoint,
                self._limiter,
                hint=GRPC_TLS_HINT if tls else None,
            ),
            temporality,
            aggregation,
        )
        self.guards.append(guard)
        return PeriodicExportingMetricReader(guard)


def prometheus_reader(
    port: int, host: str, registry: Any | None
) -> tuple[Any, tuple[str, int], tuple[Any, Any]]:
    """The Prometheus reader on ``registry`` (else the default one) and its
    ``/metrics`` server, started on ``host:port``: ``(reader, address, (server, thread))``."""
    from prometheus_client import REGISTRY, start_http_server

    registry = registry if registry is not None else REGISTRY
    from opentelemetry.exporter.prometheus import PrometheusMetricReader

    reader = PrometheusMetricReader(registry=registry)
    http_server, thread = start_http_server(port, host, registry=registry)
    address = (host, int(http_server.server_address[1]))
    return reader, address, (http_server, thread)
