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

Reliability (docs/reliability.md): ``flush()`` and ``shutdown()`` return
within a timeout (``shutdown_timeout_millis``, else ``SEAMSCOPE_SHUTDOWN_TIMEOUT``
in milliseconds, else 5000) whatever the collector does, and return a
:class:`FlushResult` that says what was exported and dropped; the exit hook
is the same bounded shutdown. Every exporter (built by
:mod:`seamscope.telemetry._exporters`) is wrapped (see
:mod:`seamscope.telemetry._export`): a failed batch is a rate-limited
``seamscope.telemetry.error`` event instead of the SDK's log lines.

OTLP over ``http/protobuf`` (default) and ``grpc`` (the ``grpc`` extra:
``pip install 'seamscope[grpc]'``), per signal as the SDK reads
``OTEL_EXPORTER_OTLP_[TRACES_|METRICS_]PROTOCOL``. Headers from
``OTEL_EXPORTER_OTLP_[TRACES_|METRICS_]HEADERS`` are percent-decoded as the
OTLP exporter specification says; an error about them never shows a value.
"""

from __future__ import annotations

import atexit
import math
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from opentelemetry import metrics, trace

from seamscope.decisions import _checks as _c
from seamscope.telemetry._arguments import check_configure, check_observer_options
from seamscope.telemetry._config import TelemetryConfig, _env_int
from seamscope.telemetry._export import (
    EXPORT_ERROR_INTERVAL_S,
    FlushResult,
    install_sdk_log_filter,
    merge,
)
from seamscope.telemetry._exporters import (
    Exports,
    Guard,
    env_true,
    exemplar_filter,
    otlp_targets,
    positive_millis,
    prometheus_reader,
)
from seamscope.telemetry._logging import RateLimit, telemetry_error
from seamscope.telemetry._observer import OTelObserver

__all__ = [
    "DEFAULT_SHUTDOWN_TIMEOUT_MILLIS",
    "ENV_SHUTDOWN_TIMEOUT",
    "FlushResult",
    "TelemetryHandle",
    "check_telemetry_options",
    "configure",
]

ENV_SHUTDOWN_TIMEOUT = "SEAMSCOPE_SHUTDOWN_TIMEOUT"
DEFAULT_SHUTDOWN_TIMEOUT_MILLIS = 5000
"""The bound of ``shutdown()``, of the exit hook and (by default) of ``flush()``."""

_TRACE_FILE_MODES = ("w", "a")


def _join(threads: Sequence[threading.Thread], deadline: float) -> bool:
    """Wait for ``threads`` until ``deadline`` (time.monotonic); True when all ended."""
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    return not any(thread.is_alive() for thread in threads)


def _start(
    tasks: Sequence[tuple[str, Callable[[], Any]]], results: dict[str, Any]
) -> list[threading.Thread]:
    """Run each task in a daemon thread; its return value or exception lands in ``results``."""

    def run(name: str, task: Callable[[], Any]) -> None:
        try:
            results[name] = task()
        except Exception as exc:
            results[name] = exc

    threads = []
    for name, task in tasks:
        thread = threading.Thread(
            target=run, args=(name, task), name=f"seamscope-{name}", daemon=True
        )
        try:
            thread.start()
        except RuntimeError:  # no new threads (interpreter finalizing): run it here
            run(name, task)
            continue
        threads.append(thread)
    return threads


@dataclass
class TelemetryHandle:
    """What :func:`configure` built; flush and shut it down when done.

    ``flush()`` and ``shutdown()`` are bounded by ``shutdown_timeout_millis``
    and return a :class:`FlushResult`, truthy when everything was exported:
    ``if not handle.flush(): ...`` keeps working, and ``result.spans_dropped``,
    ``result.points_dropped``, ``result.error`` and ``result.describe()`` say
    what was lost and why. :meth:`report` gives the same counts without
    flushing.
    """

    tracer_provider: Any
    meter_provider: Any
    observer: OTelObserver
    enabled: bool = True
    prometheus_address: tuple[str, int] | None = None
    trace_file: Path | None = None
    push_metrics: bool = False
    shutdown_timeout_millis: int = DEFAULT_SHUTDOWN_TIMEOUT_MILLIS
    _server: Any = field(default=None, repr=False)
    _closed: bool = field(default=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _guards: tuple[Guard, ...] = field(default=(), repr=False)
    _limiter: RateLimit = field(
        default_factory=lambda: RateLimit(EXPORT_ERROR_INTERVAL_S), repr=False
    )
    _shutdown_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _final: FlushResult | None = field(default=None, repr=False)
    _flushing: list[threading.Thread] = field(default_factory=list, repr=False)
    _marks: dict[str, int] = field(default_factory=dict, repr=False)

    def _timeout_s(self, timeout_millis: float | None) -> float:
        millis = self.shutdown_timeout_millis if timeout_millis is None else timeout_millis
        return max(0.0, float(millis)) / 1000

    def _statuses(self, *, final: bool = False) -> list[Any]:
        return [guard.tally.status(final=final) for guard in self._guards]

    def report(self) -> FlushResult:
        """The counts so far, without flushing; ``ok`` while nothing was dropped.

        After shutdown, the shutdown's result, with the spans that ended
        after it counted as dropped (the result is then falsy).
        """
        final = self._final
        if final is not None:
            late = [guard.tally.late() for guard in self._guards]
            if not any(late):
                return final
            statuses = [
                replace(status, dropped=status.dropped + count)
                for status, count in zip(final.exporters, late, strict=True)
            ]
            return merge(
                statuses,
                ok=False,
                timed_out=final.timed_out,
                elapsed_s=final.elapsed_s,
                timeout_s=final.timeout_s,
            )
        statuses = self._statuses()
        return merge(
            statuses,
            ok=not any(status.dropped for status in statuses),
            timed_out=False,
            elapsed_s=0.0,
            timeout_s=0.0,
        )

    def flush(self, timeout_millis: float | None = None) -> FlushResult:
        """Export everything buffered, waiting at most ``timeout_millis``
        (default: ``shutdown_timeout_millis``).

        The result is falsy when the flush did not finish in time, or when
        any span or point was dropped since the previous flush (or since
        configure()). A flush that timed out goes on in the background.
        Metrics are flushed only when a push exporter (OTLP) is configured: a
        flush makes the pull-based Prometheus reader queue an extra snapshot,
        which the next scrape would expose as duplicate series.
        ``handle.tracer_provider.force_flush()`` and
        ``handle.meter_provider.force_flush()`` are this flush for their signal.
        """
        signals = ("traces", "metrics") if self.push_metrics else ("traces",)
        return self._flush(timeout_millis, signals=signals)

    def _flush(self, timeout_millis: float | None, *, signals: tuple[str, ...]) -> FlushResult:
        timeout_s = self._timeout_s(timeout_millis)
        if not self.enabled:
            return FlushResult(ok=True, timeout_s=timeout_s)
        if self._closed:
            return replace(self.report(), ok=False, elapsed_s=0.0, timeout_s=timeout_s)
        started = time.monotonic()
        deadline = started + timeout_s
        with self._lock:
            previous = [thread for thread in self._flushing if thread.is_alive()]
            before = [(guard.tally, guard.tally.accepted()) for guard in self._guards]
        finished = _join(previous, deadline)
        results: dict[str, Any] = {}
        tasks: list[tuple[str, Callable[[], Any]]] = []
        if finished:
            millis = int(max(0.0, deadline - time.monotonic()) * 1000)
            if "traces" in signals:
                flush_traces = _sdk(self.tracer_provider, "force_flush")
                tasks.append(("flush-traces", lambda: flush_traces(millis)))
            if "metrics" in signals:
                flush_metrics = _sdk(self.meter_provider, "force_flush")
                tasks.append(("flush-metrics", lambda: flush_metrics(millis)))
            threads = _start(tasks, results)
            with self._lock:
                self._flushing = threads
            finished = _join(threads, deadline)
        complete = finished and all(results.get(name) is True for name, _ in tasks)
        if complete:
            for tally, accepted in before:
                if tally.signal == "traces" and "traces" in signals:
                    tally.count_lost(accepted)
        statuses = self._statuses()
        with self._lock:
            new_drops = 0
            for signal in signals:
                dropped = sum(st.dropped for st in statuses if st.signal == signal)
                new_drops += dropped - self._marks.get(signal, 0)
                self._marks[signal] = dropped
        result = merge(
            statuses,
            ok=complete and new_drops == 0,
            timed_out=not finished,
            elapsed_s=time.monotonic() - started,
            timeout_s=timeout_s,
        )
        if not finished:
            self._report("flush", result)
        return result

    def shutdown(self, timeout_millis: float | None = None) -> FlushResult:
        """Flush and shut down the providers and the scrape endpoint, waiting
        at most ``timeout_millis`` (default: ``shutdown_timeout_millis``).

        Idempotent: a second call returns the first one's result (as
        :meth:`report` gives it: spans that ended since count as dropped).
        ``handle.tracer_provider.shutdown()`` and
        ``handle.meter_provider.shutdown()`` are this shutdown. The result
        is falsy when the shutdown did not finish in time or when anything
        was dropped over the handle's life; what was still queued or in
        flight at the timeout counts as dropped. Exports still running then
        are abandoned: they end in daemon threads, which do not hold up exit.
        """
        timeout_s = self._timeout_s(timeout_millis)
        if not self.enabled:
            with self._lock:
                self._closed = True
            return FlushResult(ok=True, timeout_s=timeout_s)
        started = time.monotonic()
        if not self._shutdown_lock.acquire(timeout=timeout_s):
            # another thread is shutting down and did not finish in time
            return replace(self.report(), ok=False, timed_out=True, timeout_s=timeout_s)
        try:
            if self._final is not None:
                return self.report()
            with self._lock:
                self._closed = True
            deadline = started + timeout_s
            for guard in self._guards:
                guard.tally.set_deadline(deadline)
            results: dict[str, Any] = {}
            shutdown_metrics = _sdk(self.meter_provider, "shutdown")
            tasks: list[tuple[str, Callable[[], Any]]] = [
                ("shutdown-traces", _sdk(self.tracer_provider, "shutdown")),
                (
                    "shutdown-metrics",
                    lambda: shutdown_metrics(timeout_millis=timeout_s * 1000),
                ),
            ]
            if self._server is not None:
                tasks.insert(0, ("shutdown-server", self._close_server))
            finished = _join(_start(tasks, results), deadline)
            if not finished:
                for guard in self._guards:
                    guard.abandon()
            for guard in self._guards:
                guard.tally.close()
            statuses = self._statuses(final=True)
            raised = any(isinstance(value, Exception) for value in results.values())
            dropped = any(status.dropped for status in statuses)
            result = merge(
                statuses,
                ok=finished and not raised and not dropped,
                timed_out=not finished,
                elapsed_s=time.monotonic() - started,
                timeout_s=timeout_s,
            )
            self._final = result
            if not result.ok:
                self._report("shutdown", result)
            return result
        finally:
            self._shutdown_lock.release()

    def _close_server(self) -> None:
        server, thread = self._server
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)

    def _report(self, hook: str, result: FlushResult) -> None:
        suppressed = self._limiter.admit(hook)
        if suppressed is None:
            return
        telemetry_error(
            hook,
            None,
            timed_out=result.timed_out,
            timeout_s=result.timeout_s,
            spans_dropped=result.spans_dropped,
            spans_pending=result.spans_pending,
            points_dropped=result.points_dropped,
            reason=result.error,
            suppressed=suppressed,
        )

    def _shutdown_at_exit(self) -> None:
        try:
            self.shutdown()
        except Exception:
            pass


def _sdk(provider: Any, method: str) -> Callable[..., Any]:
    """The SDK's own ``method`` of a bounded provider (the bounded one calls the handle)."""
    found: Callable[..., Any] = getattr(provider, f"sdk_{method}", None) or getattr(
        provider, method
    )
    return found


def check_telemetry_options(owner: str, *, telemetry: Any = None, **options: Any) -> None:
    """Refuse a wrong type for any telemetry option given to ``owner``: the
    ``telemetry`` handle here, where :class:`TelemetryHandle` is defined, the
    others by :func:`~seamscope.telemetry._arguments.check_observer_options`
    (same keywords). None is always accepted; a refusal is a TypeError naming
    the owner and the field."""
    if telemetry is not None and not isinstance(telemetry, TelemetryHandle):
        raise TypeError(
            str(_c.fail(owner, "telemetry", "the TelemetryHandle configure() returns", telemetry))
        )
    check_observer_options(owner, **options)


def configure(
    *,
    service_name: str | None = None,
    otlp_endpoint: str | None = None,
    otlp_protocol: str | None = None,
    otlp_headers: Mapping[str, str] | None = None,
    otlp_metrics: bool = False,
    trace_file: str | os.PathLike[str] | None = None,
    trace_file_mode: str = "w",
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
    shutdown_timeout_millis: float | None = None,
    export_timeout_millis: float | None = None,
    environ: Mapping[str, str] | None = None,
) -> TelemetryHandle:
    """Build SDK tracer and meter providers and an :class:`OTelObserver`.

    * ``otlp_endpoint``: base URL of an OTLP receiver (for ``http/protobuf``
      ``/v1/traces`` is appended; ``grpc`` takes it as is); else
      ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (used as is) or
      ``OTEL_EXPORTER_OTLP_ENDPOINT``. An ``http://``/``https://`` URL; for
      ``grpc`` also ``host:port``, which is TLS (``http://`` is plaintext).
    * ``otlp_protocol``: ``http/protobuf`` (default) or ``grpc``; else
      ``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`` / ``_METRICS_PROTOCOL`` /
      ``OTEL_EXPORTER_OTLP_PROTOCOL``.
    * ``otlp_metrics``: also push metrics over OTLP.
    * ``trace_file``: also write spans as OTLP-JSON lines to this file.
    * ``trace_file_mode``: ``"w"`` (default) empties ``trace_file`` when
      ``configure()`` runs, so each process (each run of a script) writes a
      file of its own turns; ``"a"`` appends to what is there (several
      processes, or several runs, one file).
    * ``prometheus_port``: serve ``/metrics`` on ``prometheus_host:port``
      (``0`` picks a free port; the address is on the handle).
    * ``set_global``: install the providers as the global ones (an
      application's choice; tests pass False).
    * ``register_atexit``: run ``handle.shutdown()`` (bounded) at exit. With
      False nothing is flushed at exit: call ``shutdown()`` yourself.
    * ``shutdown_timeout_millis``: the bound of ``shutdown()``, of the exit
      hook and of ``flush()`` by default; else ``SEAMSCOPE_SHUTDOWN_TIMEOUT``
      (milliseconds), else 5000.
    * ``export_timeout_millis``: how long one OTLP export, with the SDK's
      retries, may take; else ``OTEL_EXPORTER_OTLP_[TRACES_|METRICS_]TIMEOUT``
      (seconds, as the Python SDK reads it), else the SDK's 10 s.
    """
    check_configure(dict(locals()))
    env = os.environ if environ is None else environ
    if trace_file_mode not in _TRACE_FILE_MODES:
        raise ValueError(
            "configure: trace_file_mode must be 'w' (a fresh file) or 'a' (append), "
            f"got {trace_file_mode!r}"
        )
    if shutdown_timeout_millis is None:
        bound = _env_int(ENV_SHUTDOWN_TIMEOUT, DEFAULT_SHUTDOWN_TIMEOUT_MILLIS, 1, env)
    else:
        bound = math.ceil(positive_millis("shutdown_timeout_millis", shutdown_timeout_millis))
    if export_timeout_millis is not None:
        positive_millis("export_timeout_millis", export_timeout_millis)
    if env_true(env, "OTEL_SDK_DISABLED"):
        observer = OTelObserver(
            tracer_provider=trace.NoOpTracerProvider(),
            meter_provider=metrics.NoOpMeterProvider(),
            config=config,
        )
        return TelemetryHandle(None, None, observer, enabled=False, shutdown_timeout_millis=bound)

    from opentelemetry.sdk.resources import Resource

    from seamscope.telemetry._bounded import BoundedMeterProvider, BoundedTracerProvider

    if prometheus_port is not None and (
        isinstance(prometheus_port, bool)
        or not isinstance(prometheus_port, int)
        or not 0 <= prometheus_port <= 65535
    ):
        raise ValueError(f"configure: prometheus_port must be 0..65535, got {prometheus_port!r}")
    targets = otlp_targets(otlp_endpoint, otlp_protocol, otlp_headers, otlp_metrics, env)

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

    install_sdk_log_filter()
    limiter = RateLimit(EXPORT_ERROR_INTERVAL_S)
    # the exit hook is ours (bounded); the SDK's own would wait 30 s per provider
    tracer_provider = BoundedTracerProvider(
        resource=resource, sampler=sampler, id_generator=id_generator, shutdown_on_exit=False
    )
    for processor in extra_span_processors:
        tracer_provider.add_span_processor(processor)
    exports = Exports(tracer_provider, limiter, env, export_timeout_millis)
    if targets.traces_endpoint:
        exports.otlp_spans(targets)
    trace_path: Path | None = None
    if trace_file is not None:
        trace_path = Path(trace_file)
        exports.file_spans(trace_path, trace_file_mode)

    exemplars = exemplar_filter(env)
    readers: list[Any] = []
    server: tuple[Any, Any] | None = None
    address = None
    if prometheus_port is not None:
        reader, address, server = prometheus_reader(
            prometheus_port, prometheus_host, prometheus_registry
        )
        readers.append(reader)
    if targets.push_metrics:
        readers.append(exports.otlp_metrics(targets))
    meter_provider = BoundedMeterProvider(
        resource=resource,
        metric_readers=readers,
        exemplar_filter=exemplars,
        shutdown_on_exit=False,
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
        push_metrics=targets.push_metrics,
        shutdown_timeout_millis=bound,
        _server=server,
        _guards=tuple(exports.guards),
        _limiter=limiter,
    )
    tracer_provider.bind(handle)
    meter_provider.bind(handle)
    if register_atexit:
        atexit.register(handle._shutdown_at_exit)
    return handle
