"""Real Jaeger v2 and OpenTelemetry Collector processes for the end-to-end tests.

The binaries come from ``bash deploy/build-backends.sh``: their paths are read
from ``SEAMSCOPE_JAEGER_BIN`` / ``SEAMSCOPE_OTELCOL_BIN`` (what the script
prints, and what .ci/run exports), or else from the script's cache folder. A
missing binary skips the test locally and fails it under ``CI``.

Every process binds loopback on free high ports chosen here and passed through
the environment variables the shipped configurations read, so the
configuration files run as shipped. Traces are read back from Jaeger's query
API: ``/api/v3/traces/{id}`` answers OTLP-JSON, decoded by the same reader as
the demo's OTLP-JSON file, and ``/api/traces`` is the search Grafana's Jaeger
data source uses.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import tempfile
import threading
import urllib.error
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import Status, StatusCode

from seamscope.telemetry import conventions as c

from ._support import (
    ROOT,
    Process,
    ProcessGroup,
    Span,
    child_env,
    free_port,
    get_json,
    http_ok,
    read_otlp_spans,
    require_executable,
    wait_for,
)

BUILD_SCRIPT = ROOT / "deploy" / "build-backends.sh"
BUILD_HINT = "bash deploy/build-backends.sh"
MANIFEST = ROOT / "deploy" / "collector" / "builder-manifest.yaml"
JAEGER_CONFIG = ROOT / "deploy" / "jaeger" / "jaeger-config.yaml"
SINGLE_CONFIG = ROOT / "collector-config.yaml"
AGENT_CONFIG = ROOT / "deploy" / "collector" / "agent.yaml"
GATEWAY_CONFIG = ROOT / "deploy" / "collector" / "gateway.yaml"
COLLECTOR_CONFIGS = {"single": SINGLE_CONFIG, "agent": AGENT_CONFIG, "gateway": GATEWAY_CONFIG}

LOOPBACK = "127.0.0.1"

# Read once, at collection: tests/conftest.py removes every SEAMSCOPE_ variable
# from the environment of each test (seamscope's own settings must not leak in).
_LOCATIONS = {
    name: os.environ.get(name)
    for name in ("SEAMSCOPE_BACKENDS_CACHE", "SEAMSCOPE_JAEGER_BIN", "SEAMSCOPE_OTELCOL_BIN")
}


# --------------------------------------------------------------------------
# The binaries.
# --------------------------------------------------------------------------


def _cache_dir() -> Path:
    configured = _LOCATIONS["SEAMSCOPE_BACKENDS_CACHE"]
    return Path(configured) if configured else Path.home() / ".cache" / "seamscope-backends"


def _script_value(name: str) -> str:
    match = re.search(rf"^{name}=(\S+)$", BUILD_SCRIPT.read_text(encoding="utf-8"), re.M)
    assert match, f"{BUILD_SCRIPT} sets no {name}"
    return match.group(1)


def _default_jaeger() -> Path:
    version = _script_value("JAEGER_VERSION")
    return _cache_dir() / f"jaeger-{version}" / "jaeger"


def _default_otelcol() -> Path:
    """Where the build script caches the collector of the manifest as it is now."""
    text = MANIFEST.read_text(encoding="utf-8")
    version = re.search(r"^  version: *(\S+)", text, re.M)
    assert version, f"{MANIFEST} has no dist.version"
    # as the script hashes it: every line but comment lines
    built = "".join(
        line for line in text.splitlines(keepends=True) if not line.lstrip().startswith("#")
    )
    digest = hashlib.sha256(built.encode("utf-8")).hexdigest()[:12]
    return _cache_dir() / f"otelcol-seamscope-{version.group(1)}-{digest}" / "otelcol-seamscope"


def jaeger_binary() -> str:
    return require_executable(_LOCATIONS["SEAMSCOPE_JAEGER_BIN"] or _default_jaeger(), BUILD_HINT)


def otelcol_binary() -> str:
    return require_executable(_LOCATIONS["SEAMSCOPE_OTELCOL_BIN"] or _default_otelcol(), BUILD_HINT)


def run_binary(argv: Sequence[str], env: Mapping[str, str] | None = None) -> str:
    """Run a short command (validate, components); its output, or fail with it."""
    completed = subprocess.run(
        list(argv),
        env=dict(env) if env is not None else child_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    output = f"{completed.stdout}\n{completed.stderr}"
    assert 0 == completed.returncode, f"{' '.join(argv)} exited {completed.returncode}:\n{output}"
    return completed.stdout


# --------------------------------------------------------------------------
# Jaeger.
# --------------------------------------------------------------------------


@dataclass
class Jaeger:
    """One Jaeger v2 process (deploy/jaeger/jaeger-config.yaml), in-memory storage."""

    process: Process
    query_port: int
    otlp_grpc_port: int
    health_port: int

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.query_port}"

    @property
    def otlp_grpc_endpoint(self) -> str:
        return f"{LOOPBACK}:{self.otlp_grpc_port}"

    def trace(self, trace_id: str) -> list[Span]:
        """Every span Jaeger holds for ``trace_id`` (OTLP-JSON from the v3 API); [] if none."""
        try:
            answer = get_json(f"{self.url}/api/v3/traces/{trace_id}")
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return []
            raise
        if not answer:
            return []
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl", encoding="utf-8") as handle:
            handle.write(json.dumps({"resourceSpans": answer["result"]["resourceSpans"]}) + "\n")
            handle.flush()
            return read_otlp_spans(Path(handle.name))

    def search(
        self,
        service: str,
        *,
        operation: str | None = None,
        tags: Mapping[str, str] | None = None,
        limit: int = 1000,
        lookback: str = "1h",
    ) -> list[dict[str, Any]]:
        """``/api/traces``: the traces of ``service`` with a span matching operation and tags."""
        params: dict[str, Any] = {"service": service, "limit": limit, "lookback": lookback}
        if operation:
            params["operation"] = operation
        if tags:
            params["tags"] = json.dumps(dict(tags))
        answer = get_json(f"{self.url}/api/traces", params, timeout=30)
        assert answer is not None, f"Jaeger at {self.url} did not answer"
        assert not answer.get("errors"), answer["errors"]
        data: list[dict[str, Any]] = answer.get("data") or []
        return data

    def services(self) -> list[str]:
        answer = get_json(f"{self.url}/api/services")
        return list((answer or {}).get("data") or [])


def start_jaeger(processes: ProcessGroup, tmp: Path, name: str = "jaeger") -> Jaeger:
    executable = jaeger_binary()
    ports = {
        "JAEGER_QUERY_HTTP_PORT": free_port(),
        "JAEGER_QUERY_GRPC_PORT": free_port(),
        "JAEGER_OTLP_GRPC_PORT": free_port(),
        "JAEGER_OTLP_HTTP_PORT": free_port(),
        "JAEGER_HEALTH_PORT": free_port(),
        "JAEGER_METRICS_PORT": free_port(),
    }
    process = processes.start(
        name,
        [executable, "--config", str(JAEGER_CONFIG)],
        tmp,
        env=child_env(**{key: str(port) for key, port in ports.items()}),
        cwd=tmp,
    )
    jaeger = Jaeger(
        process,
        ports["JAEGER_QUERY_HTTP_PORT"],
        ports["JAEGER_OTLP_GRPC_PORT"],
        ports["JAEGER_HEALTH_PORT"],
    )
    wait_for(
        lambda: (
            http_ok(f"http://{LOOPBACK}:{jaeger.health_port}/status")
            and get_json(f"{jaeger.url}/api/services") is not None
        ),
        timeout=60,
        what=f"{name} to be healthy",
        diagnostics=processes.diagnostics,
        alive=processes,
    )
    return jaeger


# --------------------------------------------------------------------------
# The collector.
# --------------------------------------------------------------------------


@dataclass
class Collector:
    """One otelcol-seamscope process running a shipped configuration."""

    name: str
    argv: list[str]
    env: dict[str, str]
    tmp: Path
    health_port: int
    prometheus_port: int
    otlp_grpc_endpoint: str
    otlp_http_endpoint: str
    process: Process | None = None

    @property
    def otlp_http_url(self) -> str:
        return f"http://{self.otlp_http_endpoint}"

    @property
    def prometheus_target(self) -> str:
        return f"{LOOPBACK}:{self.prometheus_port}"

    def start(self, processes: ProcessGroup) -> Collector:
        """Start (or start again, on the same ports) and wait until it is healthy."""
        if self.process is not None:
            # a restart appends to the same log: keep the first run's lines
            previous = self.process.log_path.read_bytes()
            processes.processes.remove(self.process)
        else:
            previous = b""
        self.process = processes.start(self.name, self.argv, self.tmp, env=self.env, cwd=self.tmp)
        if previous:
            (self.tmp / f"{self.name}.previous.log").write_bytes(previous)
        wait_for(
            lambda: http_ok(f"http://{LOOPBACK}:{self.health_port}/"),
            timeout=60,
            what=f"collector {self.name} to be healthy",
            diagnostics=processes.diagnostics,
            alive=processes,
        )
        return self

    def stop(self) -> int | None:
        assert self.process is not None
        return self.process.stop(timeout=30)


def collector(
    name: str,
    config: Path,
    tmp: Path,
    *,
    otlp_grpc_endpoint: str | None = None,
    prefix: Sequence[str] = (),
    **env: str,
) -> Collector:
    """A collector running ``config`` as shipped; every listener on a free loopback port.

    ``env`` adds the configuration's other variables (exporter endpoints).
    ``prefix`` is put before the collector's own argv (e.g. a mount namespace).
    """
    health, prometheus_port, telemetry = free_port(), free_port(), free_port()
    grpc = otlp_grpc_endpoint or f"{LOOPBACK}:{free_port()}"
    http = f"{LOOPBACK}:{free_port()}"
    variables = {
        "OTLP_GRPC_ENDPOINT": grpc,
        "OTLP_HTTP_ENDPOINT": http,
        "PROMETHEUS_EXPORTER_ENDPOINT": f"{LOOPBACK}:{prometheus_port}",
        "HEALTH_CHECK_ENDPOINT": f"{LOOPBACK}:{health}",
        "COLLECTOR_TELEMETRY_PORT": str(telemetry),
        **env,
    }
    argv = [*prefix, otelcol_binary(), "--config", str(config)]
    return Collector(name, argv, child_env(**variables), tmp, health, prometheus_port, grpc, http)


def closed_port_endpoint() -> str:
    """A loopback endpoint nothing listens on (Tempo is not installable here)."""
    return f"{LOOPBACK}:{free_port()}"


# --------------------------------------------------------------------------
# Prometheus.
# --------------------------------------------------------------------------

PROMETHEUS_HINT = "apt-get install -y --no-install-recommends prometheus"


@dataclass
class Prometheus:
    url: str

    def query(self, expr: str) -> list[dict[str, Any]]:
        try:
            answer = get_json(f"{self.url}/api/v1/query", {"query": expr})
        except urllib.error.HTTPError as exc:
            pytest.fail(f"Prometheus rejected the query:\n{expr}\n{exc.reason}")
        assert answer is not None and "success" == answer["status"], answer
        result: list[dict[str, Any]] = answer["data"]["result"]
        return result


def start_prometheus(processes: ProcessGroup, tmp: Path, targets: Sequence[str]) -> Prometheus:
    """Prometheus scraping ``targets`` every second."""
    executable = require_executable("prometheus", PROMETHEUS_HINT)
    port = free_port()
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "scrape_configs": [{"job_name": "otelcol", "static_configs": [{"targets": list(targets)}]}],
    }
    (tmp / "prometheus.yml").write_text(json.dumps(config), encoding="utf-8")
    processes.start(
        "prometheus",
        [
            executable,
            f"--web.listen-address={LOOPBACK}:{port}",
            f"--storage.tsdb.path={tmp / 'prometheus-data'}",
            f"--config.file={tmp / 'prometheus.yml'}",
        ],
        tmp,
        cwd=tmp,
    )
    url = f"http://{LOOPBACK}:{port}"
    wait_for(
        lambda: http_ok(f"{url}/-/ready"),
        timeout=60,
        what="Prometheus to be ready",
        diagnostics=processes.diagnostics,
        alive=processes,
    )
    return Prometheus(url)


# --------------------------------------------------------------------------
# Traces with known properties, made with the OpenTelemetry SDK.
# --------------------------------------------------------------------------

# What makes a trace one the tail sampler must keep, and where it is said.
KEPT_KINDS = (
    "dropped_redirect",
    "degraded_stage",
    "error_status",
    "fired_offload",
    "offload_loss",
    "adopter_error",
    "policy_error",
    "middleware_block",
)
PLAIN = "plain"


class CountingExporter(SpanExporter):
    """Wraps an exporter and counts the spans it delivered, per trace id."""

    def __init__(self, inner: SpanExporter) -> None:
        self._inner = inner
        self._lock = threading.Lock()
        self.delivered: dict[str, int] = {}
        self.failed = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = self._inner.export(spans)
        with self._lock:
            if result is SpanExportResult.SUCCESS:
                for span in spans:
                    assert span.context is not None
                    key = format(span.context.trace_id, "032x")
                    self.delivered[key] = self.delivered.get(key, 0) + 1
            else:
                self.failed += len(spans)
        return result

    def shutdown(self) -> None:
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._inner.force_flush(timeout_millis)


@dataclass
class SentTrace:
    trace_id: str
    kind: str
    spans: int


@dataclass
class TraceSender:
    """Decision-shaped traces over OTLP/HTTP: an iteration with a stage, a dispatch
    and an offload-gate span; ``kind`` puts one reason to keep it on one span."""

    endpoint: str
    service: str
    batch_size: int = 512
    sent: list[SentTrace] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.exporter = CountingExporter(OTLPSpanExporter(endpoint=f"{self.endpoint}/v1/traces"))
        self.provider = TracerProvider(resource=Resource.create({"service.name": self.service}))
        self.provider.add_span_processor(
            BatchSpanProcessor(
                self.exporter,
                max_queue_size=200_000,
                max_export_batch_size=self.batch_size,
                schedule_delay_millis=100,
            )
        )
        self.tracer = self.provider.get_tracer("seamscope.e2e")

    def trace(self, kind: str) -> SentTrace:
        assert kind in (*KEPT_KINDS, PLAIN), kind
        tracer = self.tracer
        with tracer.start_as_current_span(c.SPAN_ITERATION) as root:
            trace_id = format(root.get_span_context().trace_id, "032x")
            with tracer.start_as_current_span(c.SPAN_SELECT_TOOLS):
                with tracer.start_as_current_span(
                    c.SPAN_STAGE,
                    attributes={
                        c.ATTR_STAGE_NAME: "forced_choice",
                        c.ATTR_STAGE_OUTCOME: c.StageOutcomeKind.ABSTAIN.value,
                        c.ATTR_STAGE_DEGRADED: kind == "degraded_stage",
                    },
                ):
                    pass
            with tracer.start_as_current_span(c.SPAN_SEAM_PRE_MODEL) as seam:
                seam.add_event(
                    c.EVENT_POLICY_EVALUATED,
                    {
                        c.ATTR_POLICY_NAME: "sales_data_read",
                        c.ATTR_POLICY_RESULT: (
                            c.PolicyResult.ERROR.value
                            if kind == "policy_error"
                            else c.PolicyResult.MATCHED.value
                        ),
                    },
                )
                if kind == "adopter_error":
                    seam.add_event(c.EVENT_ADOPTER_ERROR, {c.ATTR_ADOPTER_SOURCE: "e2e"})
            with tracer.start_as_current_span(
                c.SPAN_DISPATCH,
                attributes={
                    c.ATTR_POLICY_WINNER: "escalate_incidents",
                    c.ATTR_DISPATCH_PALETTE_GATE: (
                        c.PaletteVerdict.DROPPED.value
                        if kind == "dropped_redirect"
                        else c.PaletteVerdict.KEPT.value
                    ),
                },
            ) as dispatch:
                if kind == "error_status":
                    dispatch.set_status(Status(StatusCode.ERROR, "tool raised"))
                if kind == "middleware_block":  # a framework middleware blocked the call
                    dispatch.set_attributes(
                        {
                            c.ATTR_MIDDLEWARE_NAME: "ToolCallLimitMiddleware",
                            c.ATTR_MIDDLEWARE_DECISION: (
                                c.MiddlewareDecisionKind.TOOL_CALL_BLOCKED.value
                            ),
                            c.ATTR_DISPATCH_BLOCKED: True,
                        }
                    )
            with tracer.start_as_current_span(
                c.SPAN_OFFLOAD_GATE,
                attributes={
                    c.ATTR_OFFLOAD_FIRE: kind == "fired_offload",
                    c.ATTR_OFFLOAD_REASON_CODE: (
                        c.OffloadReasonCode.NET_POSITIVE.value
                        if kind == "fired_offload"
                        else c.OffloadReasonCode.BELOW_THRESHOLD.value
                    ),
                },
            ):
                pass
            if kind == "offload_loss":
                with tracer.start_as_current_span(
                    c.SPAN_OFFLOAD_SETTLE,
                    attributes={c.ATTR_OFFLOAD_OUTCOME: c.OffloadOutcome.LOSS.value},
                ):
                    pass
        spans = 7 if kind == "offload_loss" else 6
        sent = SentTrace(trace_id, kind, spans)
        self.sent.append(sent)
        return sent

    def flush(self) -> None:
        assert self.provider.force_flush(60_000), "the SDK did not flush its spans in 60 s"

    def close(self) -> None:
        self.provider.shutdown()
