"""What the benchmarks share: a loopback OTLP sink, the providers every
configuration gets, capturing what one invoke records, timed blocks and
callgrind windows.

Every configuration that records telemetry gets providers of its own, built
alike: a ``TracerProvider`` with a ``BatchSpanProcessor`` and the real
``OTLPSpanExporter`` (protobuf over HTTP), a ``MeterProvider`` with a
``PeriodicExportingMetricReader`` and the real ``OTLPMetricExporter``, both
posting to a loopback HTTP server in a thread of this process that reads each
request and discards it. The metric reader has no timer thread
(``export_interval_millis=math.inf``): the benchmark collects it on a
schedule counted in invokes (every ``COLLECT_EVERY``), so a count of
instructions does not depend on how long an invoke takes, as a timer would.
"""

from __future__ import annotations

import gc
import math
import os
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricExportResult, PeriodicExportingMetricReader
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExportResult

__all__ = [
    "COLLECT_EVERY",
    "Case",
    "Providers",
    "Sink",
    "capture",
    "mark",
    "metric_counts",
    "measure",
    "overhead",
    "overhead_ratio",
    "ratio",
    "read_window",
    "span_bytes",
]

COLLECT_EVERY = 10  # invokes between two metric collections (collect, encode, post)


class _Discard(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the exporters' sessions reuse a connection

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        self.server.received += len(body)  # type: ignore[attr-defined]
        self.server.requests += 1  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        return None


class Sink:
    """A loopback HTTP server (127.0.0.1, a free port) that reads every request and
    discards it, answering 200: where every exporter of the benchmarks posts."""

    def __init__(self) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _Discard)
        self.server.daemon_threads = True
        self.server.received = 0  # type: ignore[attr-defined]
        self.server.requests = 0  # type: ignore[attr-defined]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def received(self) -> int:
        return int(self.server.received)  # type: ignore[attr-defined]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class CapturingSpanExporter(OTLPSpanExporter):
    """The real OTLP/HTTP span exporter; it also keeps the spans while ``capturing``."""

    def __init__(self, endpoint: str) -> None:
        super().__init__(endpoint=endpoint)
        self.capturing = False
        self.kept: list[ReadableSpan] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self.capturing:
            self.kept.extend(spans)
        return super().export(spans)


class CapturingMetricExporter(OTLPMetricExporter):
    """The real OTLP/HTTP metric exporter; it also keeps the last batch while ``capturing``."""

    def __init__(self, endpoint: str) -> None:
        super().__init__(endpoint=endpoint)
        self.capturing = False
        self.kept: Any = None

    def export(self, metrics_data: Any, timeout_millis: float = 10_000, **kwargs: Any) -> Any:
        if self.capturing:
            self.kept = metrics_data
        result = super().export(metrics_data, timeout_millis, **kwargs)
        return result if result is not None else MetricExportResult.SUCCESS


@dataclass
class Providers:
    """One configuration's tracer and meter providers, exporting to the sink."""

    tracer_provider: Any
    meter_provider: Any
    spans: CapturingSpanExporter
    metrics: CapturingMetricExporter | None
    reader: Any = None

    @classmethod
    def otlp(cls, sink: Sink, first: Sequence[SpanProcessor] = ()) -> Providers:
        """``first``: span processors added before the batch processor."""
        spans = CapturingSpanExporter(f"{sink.url}/v1/traces")
        tracer_provider = TracerProvider()
        for processor in first:
            tracer_provider.add_span_processor(processor)
        tracer_provider.add_span_processor(BatchSpanProcessor(spans))
        metrics = CapturingMetricExporter(f"{sink.url}/v1/metrics")
        reader = PeriodicExportingMetricReader(metrics, export_interval_millis=math.inf)
        meter_provider = MeterProvider(metric_readers=[reader])
        return cls(tracer_provider, meter_provider, spans, metrics, reader)

    @classmethod
    def spans_only(cls, tracer_provider: Any, spans: CapturingSpanExporter) -> Providers:
        """A tracer provider a framework built itself (symfonic's own layer)."""
        return cls(tracer_provider, None, spans, None)

    def flush(self) -> None:
        self.tracer_provider.force_flush()

    def collect(self) -> None:
        if self.reader is not None:
            self.reader.collect()

    def shutdown(self) -> None:
        self.tracer_provider.shutdown()
        if self.meter_provider is not None:
            self.meter_provider.shutdown()


def capture(providers: Sequence[Providers], run: Callable[[], Any]) -> tuple[list[Any], list[Any]]:
    """The spans ``run()`` produced and one metric collection after it, from ``providers``."""
    for p in providers:
        p.flush()
        p.spans.kept.clear()
        p.spans.capturing = True
    try:
        run()
        for p in providers:
            p.flush()
    finally:
        for p in providers:
            p.spans.capturing = False
    spans = [span for p in providers for span in p.spans.kept]
    batches = []
    for p in providers:
        p.spans.kept.clear()
        if p.metrics is not None:
            p.metrics.capturing = True
            try:
                p.collect()
            finally:
                p.metrics.capturing = False
            if p.metrics.kept is not None:
                batches.append(p.metrics.kept)
                p.metrics.kept = None
    return spans, batches


def span_bytes(spans: Sequence[Any]) -> int:
    return len(encode_spans(spans).SerializeToString()) if spans else 0


def metric_counts(batches: Sequence[Any]) -> tuple[int, int]:
    """(data points, OTLP protobuf bytes) of metric collections."""
    points = size = 0
    for data in batches:
        size += len(encode_metrics(data).SerializeToString())
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    points += len(metric.data.data_points)
    return points, size


@dataclass
class Case:
    """One configuration: ``run(i)`` is one invoke; ``providers`` are collected on
    schedule and flushed after a block; ``listen`` are read to record an invoke."""

    key: str
    label: str
    kind: str  # "otlp", "own" (a framework's own tracing), or "" (uninstrumented)
    run: Callable[[int], Any]
    providers: tuple[Providers, ...] = ()
    listen: tuple[Providers, ...] | None = None
    enter: Callable[[], Any] = lambda: None
    exit: Callable[[], Any] = lambda: None
    extra_flush: Callable[[], Any] = lambda: None
    samples: list[float] = field(default_factory=list)  # wall seconds per invoke, per block
    cpu: list[float] = field(default_factory=list)  # process CPU seconds per invoke, per block
    collect_every: int = COLLECT_EVERY
    expected: Any = None  # the decision facts this configuration should record
    recorded: Any = None
    count: int = 0

    def invoke(self, i: int) -> Any:
        """One invoke, and a metric collection every ``COLLECT_EVERY`` invokes."""
        result = self.run(i)
        self.count += 1
        if self.count % self.collect_every == 0:
            for p in self.providers:
                p.collect()
        return result

    def flush(self) -> None:
        for p in self.providers:
            p.flush()
        self.extra_flush()

    @property
    def median(self) -> float:
        return statistics.median(self.samples)


def time_block(
    run: Callable[[int], Any], count: int, finish: Callable[[], Any] = lambda: None
) -> tuple[float, float]:
    """Wall and process-CPU seconds per call over one block and its ``finish`` (the
    flush that exports the block's last spans), with the garbage collector off."""
    gc.collect()
    gc.disable()
    try:
        cpu = time.process_time()
        start = time.perf_counter()
        for i in range(count):
            run(i)
        finish()
        elapsed = time.perf_counter() - start
        cpu = time.process_time() - cpu
    finally:
        gc.enable()
    return elapsed / count, cpu / count


def measure(
    cases: Sequence[Case],
    repeats: int,
    count: int,
    warmup: int,
    record: Callable[[Case, list[Any], list[Any]], Any],
) -> None:
    """Warm up and record one invoke of each case, then ``repeats`` interleaved timed blocks."""
    for case in cases:
        case.enter()
        try:
            for i in range(warmup):
                case.invoke(i)
            case.flush()
            listen = case.providers if case.listen is None else case.listen
            spans, batches = capture(listen, lambda case=case: case.run(0))
            case.recorded = record(case, spans, batches)
        finally:
            case.exit()
    for _ in range(repeats):
        for case in cases:  # interleaved: a drift of the machine hits every case alike
            case.enter()
            try:
                # the flush is timed: a block pays the encoding and export of its spans
                wall, cpu = time_block(case.invoke, count, case.flush)
                case.samples.append(wall)
                case.cpu.append(cpu)
            finally:
                case.exit()


def overhead(case: Case, base: Case, *, cpu: bool = False) -> float:
    """Median of the per-repeat differences, seconds (of wall time, or of CPU time)."""
    num, den = (case.cpu, base.cpu) if cpu else (case.samples, base.samples)
    return statistics.median(x - b for x, b in zip(num, den, strict=True))


def ratio(case: Case, base: Case) -> tuple[float, float, float]:
    ratios = [x / b for x, b in zip(case.samples, base.samples, strict=True)]
    return statistics.median(ratios), min(ratios), max(ratios)


def overhead_ratio(
    num: Case, den: Case, base: Case, *, cpu: bool = False
) -> tuple[float, float, float]:
    """(num - base) / (den - base): of the median overheads, and the per-repeat range."""
    series = (num.cpu, den.cpu, base.cpu) if cpu else (num.samples, den.samples, base.samples)
    per = [(n - b) / (d - b) for n, d, b in zip(*series, strict=True) if d != b]
    median = overhead(num, base, cpu=cpu) / overhead(den, base, cpu=cpu)
    return median, min(per, default=median), max(per, default=median)


# -- callgrind windows --------------------------------------------------------------------
# ``valgrind --tool=callgrind --dump-before=getsid`` writes the counts gathered so far each
# time the process calls getsid(2): ``mark()`` calls it, so the second dump file holds the
# instructions between two marks alone, start-up excluded, from one run.


def mark() -> None:
    os.getsid(0)


def read_window(out_file: str, dump: int = 2) -> int:
    """The instructions of one dump: ``.2`` holds those between the first and the second
    ``mark()``, ``.4`` those between the third and the fourth, and so on."""
    with open(f"{out_file}.{dump}", encoding="utf-8") as handle:
        for line in handle:
            if line.startswith("summary:"):
                return int(line.split()[1])
    raise RuntimeError(f"no summary in {out_file}.{dump}")
