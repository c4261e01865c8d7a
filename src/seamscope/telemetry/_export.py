"""Exporters that tell the truth: what was exported, what was dropped, and why.

:func:`seamscope.telemetry.configure` wraps every exporter it builds:

* :class:`GuardedSpanExporter` and :class:`GuardedMetricExporter` delegate to
  the SDK's exporter and count the spans (data points) of each batch as
  exported or dropped. A failed batch is one ``seamscope.telemetry.error``
  event (``hook="export"``), at most one per exporter per
  :data:`EXPORT_ERROR_INTERVAL_S`; the event says how many were held back.
  The SDK's own log records of that call (retry warnings, "Failed to
  export ...") stay off the log: their text becomes the event's ``reason``.
* :class:`CountingSpanProcessor` wraps the BatchSpanProcessor and counts the
  sampled spans handed to it, so a span the full queue evicted, or one still
  queued when the shutdown timeout passed, is counted as dropped too.
* A deadline: once the shutdown deadline has passed, a batch is dropped
  without being sent, and :meth:`GuardedSpanExporter.abandon` shuts the SDK
  exporter down, which ends its retry waits.
* A bound on ``pending``: the BatchSpanProcessor holds at most its queue and
  one batch taken from it, so spans beyond that (the queue evicted them) are
  counted as dropped at once, not only at the next complete flush.
* Spans that end after shutdown (the processor no longer takes them) are
  counted as dropped, and the first one is a ``seamscope.telemetry.error``
  event (``hook="span_after_shutdown"``).
* :class:`FlushResult` and :class:`ExporterStatus`: what ``flush()`` and
  ``shutdown()`` of a :class:`~seamscope.telemetry.TelemetryHandle` return.

Only public SDK API: ``SpanExporter``, ``MetricExporter`` and
``SpanProcessor`` subclasses delegating to the SDK's own objects.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult
from opentelemetry.sdk.trace import SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from seamscope.telemetry._logging import RateLimit, telemetry_error

__all__ = [
    "EXPORT_ERROR_INTERVAL_S",
    "CountingSpanProcessor",
    "ExporterStatus",
    "FlushResult",
    "GuardedMetricExporter",
    "GuardedSpanExporter",
    "Tally",
    "install_sdk_log_filter",
    "metric_preferences",
    "public_target",
]

EXPORT_ERROR_INTERVAL_S = 60.0
"""At most one ``seamscope.telemetry.error`` export event per exporter per this many seconds."""

# The loggers the SDK's OTLP and file exporters write their export errors,
# retry warnings and header-parsing warnings to (module names, stable across
# 1.4x). A record is held back only on a thread inside a guarded call.
_SDK_LOGGERS = (
    "opentelemetry.exporter.otlp.common.http",
    "opentelemetry.exporter.otlp.proto.http._common",
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    "opentelemetry.exporter.otlp.proto.http.metric_exporter",
    "opentelemetry.exporter.otlp.proto.grpc.exporter",
    "opentelemetry.exporter.otlp.proto.grpc.trace_exporter",
    "opentelemetry.exporter.otlp.proto.grpc.metric_exporter",
    "opentelemetry.exporter.otlp.proto.common._internal",
    "opentelemetry.exporter.otlp.json.file._internal",
    "opentelemetry.exporter.otlp.json.file.trace_exporter",
    "opentelemetry.util.re",
)
_KEEP_MESSAGES = 8


class _SdkLogs(logging.Filter):
    """Holds back SDK exporter log records emitted inside :meth:`capture` on
    the same thread, keeping their messages; elsewhere lets everything through."""

    def __init__(self) -> None:
        super().__init__("")
        self._local = threading.local()

    def filter(self, record: logging.LogRecord) -> bool:
        messages: list[str] | None = getattr(self._local, "messages", None)
        if messages is None:
            return True
        try:
            messages.append(record.getMessage())
        except Exception:
            messages.append(str(record.msg))
        del messages[:-_KEEP_MESSAGES]
        return False

    @contextmanager
    def capture(self) -> Iterator[list[str]]:
        previous = getattr(self._local, "messages", None)
        messages: list[str] = []
        self._local.messages = messages
        try:
            yield messages
        finally:
            self._local.messages = previous


SDK_LOGS = _SdkLogs()


def install_sdk_log_filter() -> None:
    """Attach the capturing filter to the SDK exporter loggers (idempotent)."""
    for name in _SDK_LOGGERS:
        logger = logging.getLogger(name)
        if SDK_LOGS not in logger.filters:
            logger.addFilter(SDK_LOGS)


_ERRNO = re.compile(r"\[Errno -?\d+\] ([^'\")\]]+)")
_HTTP_STATUS = re.compile(r"code: (\d{3}), reason: ([^,\n]*)")
_NO_STATUS = re.compile(r"code: None, reason: ([^\n]+)")
_GRPC_CODE = re.compile(r"StatusCode\.([A-Z_]+)")
_TRANSIENT = re.compile(r"Transient error (.+?) encountered")
_MAX_REASON = 160


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MAX_REASON else text[: _MAX_REASON - 1] + "…"


def reason_of(messages: Sequence[str], exc: BaseException | None = None) -> str:
    """A short reason for a failed export from the SDK's messages (or an exception)."""
    if exc is not None:
        return _clip(f"{type(exc).__qualname__}: {exc}")
    text = "\n".join(messages)
    if found := _HTTP_STATUS.search(text):
        return _clip(f"HTTP {found.group(1)} {found.group(2).strip()}")
    if "the collector's answer" in text and (found := _NO_STATUS.search(text)):
        return _clip(found.group(1))
    if found := _ERRNO.search(text):
        return _clip(found.group(1).strip().lower())
    if found := _GRPC_CODE.search(text):
        return f"gRPC {found.group(1)}"
    if "timed out" in text.lower():
        return "timed out"
    if found := _TRANSIENT.search(text):
        return _clip(found.group(1))
    if "due to timeout, max retries or shutdown" in text:
        return "no success within the export timeout"
    return _clip(messages[-1]) if messages else "export failed"


def public_target(target: str) -> str:
    """An endpoint URL without user info, query or fragment (file paths unchanged)."""
    if "://" not in target:
        return target
    try:
        parts = urlsplit(target)
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        netloc = host if parts.port is None else f"{host}:{parts.port}"
        return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
    except ValueError:
        return "<unparsable endpoint>"


@dataclass(frozen=True, slots=True)
class ExporterStatus:
    """One exporter's account, in spans (``signal="traces"``) or data points (``"metrics"``).

    * ``kind``: ``otlp/http``, ``otlp/grpc`` or ``file``; ``target``: the
      endpoint URL (no credentials) or the file path.
    * ``exported``: items the exporter confirmed.
    * ``dropped``: items lost: in failed batches, evicted from the full
      queue, or still queued or in flight when shutdown's timeout passed.
    * ``pending``: items queued or in flight when the call returned (0 after
      shutdown: what was pending then is dropped).
    * ``failures``: failed export calls; ``last_error``: the last one's reason.
    """

    signal: str
    kind: str
    target: str
    exported: int = 0
    dropped: int = 0
    pending: int = 0
    failures: int = 0
    last_error: str | None = None


@dataclass(frozen=True, slots=True)
class FlushResult:
    """What :meth:`TelemetryHandle.flush` and :meth:`TelemetryHandle.shutdown` return.

    Truthy exactly when ``ok``, so ``if handle.flush():`` works as before.

    * ``ok``: the call finished within ``timeout_s`` and nothing was dropped
      (for ``flush()``: since the previous flush, or since configure(); for
      ``shutdown()``: over the handle's whole life).
    * ``timed_out``: the call gave up at ``timeout_s``; ``elapsed_s``: how
      long it took.
    * ``spans_*`` and ``points_*``: totals since configure(), summed over
      the exporters (a span written to the file and sent over OTLP counts
      once for each); ``exporters`` has them one by one.
    * ``error``: the last export failure's reason (None when there was none).
    """

    ok: bool
    timed_out: bool = False
    elapsed_s: float = 0.0
    timeout_s: float = 0.0
    spans_exported: int = 0
    spans_dropped: int = 0
    spans_pending: int = 0
    points_exported: int = 0
    points_dropped: int = 0
    error: str | None = None
    exporters: tuple[ExporterStatus, ...] = ()

    def __bool__(self) -> bool:
        return self.ok

    @property
    def failed(self) -> tuple[ExporterStatus, ...]:
        """The exporters that dropped something or failed a call."""
        return tuple(e for e in self.exporters if e.dropped or e.failures)

    def describe(self) -> str:
        """One line for a person: ``export ok: ...`` or ``export failed: ...``."""
        parts = []
        for status in self.exporters:
            unit = "spans" if status.signal == "traces" else "points"
            text = f"{status.kind} {status.signal} {status.target}: "
            text += f"{status.exported} {unit} exported"
            if status.dropped:
                text += f", {status.dropped} dropped"
            if status.pending:
                text += f", {status.pending} pending"
            if status.last_error:
                text += f" ({status.last_error})"
            parts.append(text)
        head = "export ok" if self.ok else "export failed"
        if self.timed_out:
            head += f" (gave up after {self.timeout_s:g} s)"
        return head + (": " + "; ".join(parts) if parts else "")


def merge(
    statuses: Sequence[ExporterStatus],
    *,
    ok: bool,
    timed_out: bool,
    elapsed_s: float,
    timeout_s: float,
) -> FlushResult:
    """A FlushResult with the totals of ``statuses``."""
    spans = [s for s in statuses if s.signal == "traces"]
    points = [s for s in statuses if s.signal == "metrics"]
    errors = [s.last_error for s in statuses if s.last_error]
    return FlushResult(
        ok=ok,
        timed_out=timed_out,
        elapsed_s=elapsed_s,
        timeout_s=timeout_s,
        spans_exported=sum(s.exported for s in spans),
        spans_dropped=sum(s.dropped for s in spans),
        spans_pending=sum(s.pending for s in spans),
        points_exported=sum(s.exported for s in points),
        points_dropped=sum(s.dropped for s in points),
        error=errors[-1] if errors else None,
        exporters=tuple(statuses),
    )


class Tally:
    """The counts of one exporter; thread-safe.

    ``accepted`` is counted only for spans (by :class:`CountingSpanProcessor`);
    for metrics, ``pending`` is what is in flight.
    """

    def __init__(
        self,
        signal: str,
        kind: str,
        target: str,
        limiter: RateLimit,
        *,
        capacity: int | None = None,
        hint: str | None = None,
    ) -> None:
        """``capacity``: the most spans the processor can hold unexported (its
        queue plus one batch); ``hint``: added to the reason of a failure
        whose reason is ``gRPC UNAVAILABLE``."""
        self.signal = signal
        self.kind = kind
        self.target = public_target(target)
        self._limiter = limiter
        self._lock = threading.Lock()
        self._counts_accepted = signal == "traces"
        self._accepted = 0
        self._exported = 0
        self._dropped = 0
        self._in_flight = 0
        self._failures = 0
        self._last_error: str | None = None
        self._deadline: float | None = None
        self._abandoned = False
        self._capacity = capacity
        self._hint = hint
        self._closed = False
        self._late = 0
        # the SDK messages of the export in flight: its reason before it ends
        self._live: list[str] | None = None

    def accept(self) -> bool:
        """One more span handed to the processor; False (and counted as
        dropped, late) after :meth:`close`."""
        with self._lock:
            if self._closed:
                self._late += 1
                return False
            self._accepted += 1
            if self._capacity is not None:
                held = self._accepted - self._exported - self._dropped - self._in_flight
                if held > self._capacity:
                    # the queue is full: the processor evicted the oldest
                    self._dropped += held - self._capacity
            return True

    def close(self) -> None:
        """Shutdown's final count is being taken: later spans are late."""
        with self._lock:
            self._closed = True

    def late(self) -> int:
        """Spans that ended after :meth:`close` (lost: dropped)."""
        with self._lock:
            return self._late

    def accepted(self) -> int:
        with self._lock:
            return self._accepted

    def set_deadline(self, deadline: float) -> None:
        """Batches starting after ``deadline`` (time.monotonic) are dropped unsent."""
        with self._lock:
            self._deadline = deadline

    def abandon(self) -> None:
        with self._lock:
            self._abandoned = True

    def begin(self, count: int) -> bool:
        """A batch of ``count`` starts; False (and counted dropped) past the deadline."""
        with self._lock:
            if self._abandoned or (
                self._deadline is not None and time.monotonic() >= self._deadline
            ):
                self._dropped += count
                return False
            self._in_flight += count
            return True

    def watch(self, messages: list[str] | None) -> None:
        """The SDK messages of the export now in flight (None when it ended)."""
        self._live = messages

    def end(self, count: int, ok: bool, reason: str | None) -> None:
        with self._lock:
            self._live = None
            self._in_flight -= count
            if ok:
                self._exported += count
                return
            self._dropped += count
            self._failures += 1
            if self._hint and reason == "gRPC UNAVAILABLE":
                reason = f"{reason}: {self._hint}"
            self._last_error = reason
            dropped_total = self._dropped
            if self._abandoned:
                # the shutdown that abandoned this export has reported it
                return
        suppressed = self._limiter.admit(("export", self.signal, self.kind, self.target))
        if suppressed is not None:
            telemetry_error(
                "export",
                None,
                signal=self.signal,
                exporter=self.kind,
                endpoint=self.target,
                reason=reason,
                dropped=count,
                dropped_total=dropped_total,
                suppressed=suppressed,
            )

    def count_lost(self, before: int) -> None:
        """After a complete flush: spans accepted before it (``before``) that
        were neither exported nor dropped were evicted from the queue."""
        with self._lock:
            lost = before - self._exported - self._dropped
            if lost > 0:
                self._dropped += lost

    def dropped(self) -> int:
        with self._lock:
            return self._dropped

    def status(self, *, final: bool = False) -> ExporterStatus:
        with self._lock:
            if self._counts_accepted:
                pending = max(0, self._accepted - self._exported - self._dropped)
            else:
                pending = max(0, self._in_flight)
            dropped = self._dropped + (pending if final else 0)
            last_error = self._last_error
            live = list(self._live or ())
            if live and last_error is None:
                last_error = reason_of(live)
            if last_error is None and self._in_flight > 0:
                last_error = "no answer before the shutdown timeout" if final else "no answer yet"
            return ExporterStatus(
                signal=self.signal,
                kind=self.kind,
                target=self.target,
                exported=self._exported,
                dropped=dropped,
                pending=0 if final else pending,
                failures=self._failures,
                last_error=last_error,
            )


class _Inner:
    """Shuts the SDK exporter down once, whoever asks first (SDK logs held back)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self._lock = threading.Lock()
        self._shut = False

    def shutdown(self, **kwargs: Any) -> None:
        with self._lock:
            if self._shut:
                return
            self._shut = True
        try:
            with SDK_LOGS.capture():
                self.inner.shutdown(**kwargs)
        except Exception:
            pass


class GuardedSpanExporter(SpanExporter):
    """Delegates to ``inner``; counts, reports and bounds (see the module doc)."""

    def __init__(self, inner: SpanExporter, tally: Tally) -> None:
        self._inner = _Inner(inner)
        self.tally = tally

    def export(self, spans: Sequence[Any]) -> SpanExportResult:
        count = len(spans)
        if not self.tally.begin(count):
            return SpanExportResult.FAILURE
        ok, reason = False, None
        try:
            with SDK_LOGS.capture() as messages:
                self.tally.watch(messages)
                result = self._inner.inner.export(spans)
            ok = result is SpanExportResult.SUCCESS
            if not ok:
                reason = reason_of(messages)
        except Exception as exc:
            reason = reason_of((), exc)
        self.tally.end(count, ok, reason)
        return SpanExportResult.SUCCESS if ok else SpanExportResult.FAILURE

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        try:
            return bool(self._inner.inner.force_flush(timeout_millis))
        except Exception:
            return False

    def abandon(self) -> None:
        """Drop every later batch and shut the SDK exporter down (ends its retries)."""
        self.tally.abandon()
        self._inner.shutdown()


class CountingSpanProcessor(SpanProcessor):
    """Delegates to ``inner`` (a BatchSpanProcessor); counts the sampled spans it is given."""

    def __init__(self, inner: SpanProcessor, tally: Tally) -> None:
        self._inner = inner
        self.tally = tally

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        self._inner.on_start(span, parent_context=parent_context)

    def on_end(self, span: Any) -> None:
        self._inner.on_end(span)
        context = span.context
        # counted after the span is queued: a flush that starts later sees it
        sampled = context is not None and context.trace_flags.sampled
        if sampled and not self.tally.accept() and self.tally.late() == 1:
            telemetry_error(
                "span_after_shutdown",
                None,
                signal=self.tally.signal,
                exporter=self.tally.kind,
                endpoint=self.tally.target,
                dropped=1,
            )

    def shutdown(self) -> None:
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return bool(self._inner.force_flush(timeout_millis))


def _points(metrics_data: Any) -> int:
    try:
        return sum(
            len(metric.data.data_points)
            for resource in metrics_data.resource_metrics
            for scope in resource.scope_metrics
            for metric in scope.metrics
        )
    except Exception:
        return 0


class GuardedMetricExporter(MetricExporter):
    """Delegates to ``inner``; counts data points, reports and bounds like the span one."""

    def __init__(
        self,
        inner: MetricExporter,
        tally: Tally,
        preferred_temporality: dict[type, Any],
        preferred_aggregation: dict[type, Any],
    ) -> None:
        super().__init__(
            preferred_temporality=preferred_temporality,
            preferred_aggregation=preferred_aggregation,
        )
        self._inner = _Inner(inner)
        self.tally = tally

    def export(
        self, metrics_data: Any, timeout_millis: float = 10_000, **kwargs: Any
    ) -> MetricExportResult:
        count = _points(metrics_data)
        if not self.tally.begin(count):
            return MetricExportResult.FAILURE
        ok, reason = False, None
        try:
            with SDK_LOGS.capture() as messages:
                self.tally.watch(messages)
                result = self._inner.inner.export(
                    metrics_data, timeout_millis=timeout_millis, **kwargs
                )
            ok = result is MetricExportResult.SUCCESS
            if not ok:
                reason = reason_of(messages)
        except Exception as exc:
            reason = reason_of((), exc)
        self.tally.end(count, ok, reason)
        return MetricExportResult.SUCCESS if ok else MetricExportResult.FAILURE

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        try:
            return bool(self._inner.inner.force_flush(timeout_millis=timeout_millis))
        except Exception:
            return False

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        self._inner.shutdown()

    def abandon(self) -> None:
        self.tally.abandon()
        self._inner.shutdown()


def metric_preferences(env: Mapping[str, str]) -> tuple[dict[type, Any], dict[type, Any]]:
    """The temporality and histogram aggregation the OTLP metric exporter
    would choose from ``OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE`` and
    ``..._DEFAULT_HISTOGRAM_AGGREGATION`` in ``env`` (the same table as the
    SDK's), given to the exporter and to its wrapper alike."""
    from opentelemetry.sdk.metrics import (
        Counter,
        Histogram,
        ObservableCounter,
        ObservableGauge,
        ObservableUpDownCounter,
        UpDownCounter,
    )
    from opentelemetry.sdk.metrics.export import AggregationTemporality
    from opentelemetry.sdk.metrics.view import (
        ExplicitBucketHistogramAggregation,
        ExponentialBucketHistogramAggregation,
    )

    cumulative, delta = AggregationTemporality.CUMULATIVE, AggregationTemporality.DELTA
    preference = env.get("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "").strip().upper()
    delta_kinds: tuple[type, ...] = ()
    if preference == "DELTA":
        delta_kinds = (Counter, Histogram, ObservableCounter)
    elif preference == "LOWMEMORY":
        delta_kinds = (Counter, Histogram)
    temporality: dict[type, Any] = {
        kind: delta if kind in delta_kinds else cumulative
        for kind in (
            Counter,
            UpDownCounter,
            Histogram,
            ObservableCounter,
            ObservableUpDownCounter,
            ObservableGauge,
        )
    }
    histogram = env.get("OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION", "")
    aggregation: dict[type, Any] = {
        Histogram: ExponentialBucketHistogramAggregation()
        if histogram.strip().lower() == "base2_exponential_bucket_histogram"
        else ExplicitBucketHistogramAggregation()
    }
    return temporality, aggregation
