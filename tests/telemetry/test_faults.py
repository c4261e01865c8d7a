"""Faults: a collector that is down, never answers, or answers 500/429 slowly.

Real local servers (``_servers.py``) on 127.0.0.1. Each test proves a bound
and prints the measured figure (``pytest -s`` shows them); the assertion has
a generous margin so a slow two-core machine passes. The promises are those of
docs/reliability.md:

* ``flush()`` and ``shutdown()`` return within their timeout, and at exit
  the hook does too;
* they return the truth: falsy, and how many spans and points were dropped;
* a failed export is one ``seamscope.telemetry.error`` event per exporter
  per interval, and none of the SDK's own log lines;
* OTLP/gRPC works as OTLP/HTTP does; headers from the environment are
  percent-decoded, and an error about them never shows a value.
"""

# The project writes `assert expected == actual` (STYLE.md).

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from seamscope.telemetry import FlushResult, TelemetryHandle
from seamscope.telemetry import conventions as c
from seamscope.telemetry._logging import RateLimit

from . import _servers as srv
from . import _support as s

BOUND_MS = 1000
BOUND_S = BOUND_MS / 1000
MARGIN_S = 2.0
"""Added to every bound: thread start-up and a loaded CI machine (an SDK retry waits >= 1 s)."""

ROOT = Path(__file__).resolve().parents[2]
SDK_LINES = ("Transient error", "Failed to export", "retrying in", "Header format invalid")


def _timed(call: Callable[[], FlushResult]) -> tuple[FlushResult, float]:
    started = time.monotonic()
    result = call()
    return result, time.monotonic() - started


def _turns(handle: TelemetryHandle, turns: int = 1) -> int:
    """Run ``turns`` scripted turns; the spans now waiting for the exporter."""
    for _ in range(turns):
        s.run(telemetry=handle)
    pending = handle.report().spans_pending
    assert pending > 0
    return pending


def _export_events(logs: list[dict[str, Any]], hook: str = "export") -> list[dict[str, Any]]:
    return [e for e in logs if e["event"] == c.LOG_TELEMETRY_ERROR and e.get("hook") == hook]


@pytest.fixture
def sdk_records(caplog: pytest.LogCaptureFixture) -> Iterator[Callable[[], list[str]]]:
    """The OpenTelemetry SDK's log records of the test, at every level."""
    caplog.set_level(logging.DEBUG, logger="opentelemetry")

    def records() -> list[str]:
        return [
            f"{r.name}: {r.getMessage()}"
            for r in caplog.records
            if r.name.startswith("opentelemetry.exporter") or r.name == "opentelemetry.util.re"
        ]

    yield records


FAULTS = ["closed", "blackhole", "500-slow", "429-slow"]


@pytest.fixture(params=FAULTS)
def fault(request: pytest.FixtureRequest) -> Iterator[str]:
    """The URL of a collector that is down, never answers, or fails slowly
    (an answer after 3 s, longer than the bound)."""
    if request.param == "closed":
        yield f"http://{srv.HOST}:{srv.closed_port()}"
    elif request.param == "blackhole":
        with srv.Blackhole() as hole:
            yield f"http://{srv.HOST}:{hole.port}"
    else:
        status = 500 if request.param == "500-slow" else 429
        with srv.OtlpHttp(status=status, delay=3.0, retry_after="1") as server:
            yield server.url


def test_shutdown_is_bounded_and_tells_what_was_dropped(
    handles: Any, fault: str, request: pytest.FixtureRequest
) -> None:
    handle = handles(
        otlp_endpoint=fault, otlp_metrics=True, shutdown_timeout_millis=BOUND_MS, environ={}
    )
    spans = _turns(handle)
    result, elapsed = _timed(handle.shutdown)
    name = request.node.callspec.params["fault"]
    print(f"\nshutdown with a {name} collector: {elapsed:.2f} s (bound {BOUND_S:g} s)")
    assert elapsed < BOUND_S + MARGIN_S
    assert (False, True) == (bool(result), result.timed_out)
    assert (0, spans, 0) == (result.spans_exported, result.spans_dropped, result.spans_pending)
    assert result.points_dropped > 0
    assert 0 == result.points_exported
    assert "export failed" in result.describe()
    # idempotent: the same result, at once
    again, elapsed_again = _timed(handle.shutdown)
    assert result is again
    assert elapsed_again < 0.5


def test_flush_is_bounded_and_false(
    handles: Any, fault: str, request: pytest.FixtureRequest
) -> None:
    handle = handles(otlp_endpoint=fault, shutdown_timeout_millis=BOUND_MS, environ={})
    spans = _turns(handle)
    result, elapsed = _timed(lambda: handle.flush(BOUND_MS))
    name = request.node.callspec.params["fault"]
    print(f"\nflush({BOUND_MS}) with a {name} collector: {elapsed:.2f} s (bound {BOUND_S:g} s)")
    assert elapsed < BOUND_S + MARGIN_S
    assert False is bool(result)
    assert 0 == result.spans_exported
    assert spans == result.spans_dropped + result.spans_pending
    # the flush still running in the background does not stretch the shutdown
    final, elapsed = _timed(handle.shutdown)
    print(f"shutdown after it: {elapsed:.2f} s (bound {BOUND_S:g} s)")
    assert elapsed < BOUND_S + MARGIN_S
    assert spans == final.spans_dropped


def test_a_failing_collector_is_one_error_event_and_no_sdk_lines(
    handles: Any,
    captured_logs: list[dict[str, Any]],
    sdk_records: Callable[[], list[str]],
) -> None:
    with srv.OtlpHttp(status=500) as server:
        handle = handles(otlp_endpoint=server.url, environ={})
        results = []
        for _ in range(5):
            _turns(handle)
            results.append(handle.flush(BOUND_MS * 3))
        assert 5 == len(server.requests)
    # every flush is False: each dropped a batch since the previous one
    assert [False] * 5 == [bool(r) for r in results]
    assert [False] * 5 == [r.timed_out for r in results]
    last = results[-1]
    assert (0, 0) == (last.spans_exported, last.spans_pending)
    assert last.spans_dropped == 5 * results[0].spans_dropped
    assert "HTTP 500 Internal Server Error" == last.error
    events = _export_events(captured_logs)
    assert 1 == len(events), events
    event = events[0]
    assert ("traces", "otlp/http", f"{server.url}/v1/traces", "HTTP 500 Internal Server Error") == (
        event["signal"],
        event["exporter"],
        event["endpoint"],
        event["reason"],
    )
    assert (results[0].spans_dropped, 0, "error") == (
        event["dropped"],
        event["suppressed"],
        event["log_level"],
    )
    assert [] == sdk_records()


def test_the_error_event_names_the_reason_of_a_closed_port(
    handles: Any, captured_logs: list[dict[str, Any]], sdk_records: Callable[[], list[str]]
) -> None:
    url = f"http://{srv.HOST}:{srv.closed_port()}"
    # two attempts per export: the SDK's second backoff (2 s) passes the 1.5 s
    handle = handles(otlp_endpoint=url, export_timeout_millis=1500, environ={})
    spans = _turns(handle)
    result, elapsed = _timed(lambda: handle.flush(BOUND_MS * 4))
    print(f"\nflush with a closed port and a 1.5 s export timeout: {elapsed:.2f} s")
    assert elapsed < 1.5 + MARGIN_S
    assert (False, False, spans) == (bool(result), result.timed_out, result.spans_dropped)
    assert "connection refused" == result.error
    assert ["connection refused"] == [e["reason"] for e in _export_events(captured_logs)]
    assert [] == sdk_records()


def test_a_healthy_collector_gets_everything_and_flush_is_true(handles: Any) -> None:
    with srv.OtlpHttp() as server:
        handle = handles(otlp_endpoint=server.url, otlp_metrics=True, environ={})
        spans = _turns(handle, turns=2)
        result, elapsed = _timed(handle.flush)
        print(f"\nflush with a healthy collector: {elapsed:.2f} s")
        assert True is bool(result)
        assert (spans, 0, 0) == (result.spans_exported, result.spans_dropped, result.spans_pending)
        assert result.points_exported > 0
        assert spans == server.items("/v1/traces")
        assert result.points_exported == server.items("/v1/metrics")
        final = handle.shutdown()
        assert (True, False, 0) == (bool(final), final.timed_out, final.spans_dropped)
        assert final.describe().startswith("export ok: otlp/http traces")


def test_spans_the_full_queue_evicted_are_counted_dropped(
    handles: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "8")
    monkeypatch.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "4")
    with srv.Blackhole() as hole:
        handle = handles(
            otlp_endpoint=f"http://{srv.HOST}:{hole.port}",
            shutdown_timeout_millis=BOUND_MS,
            environ={},
        )
        tracer = handle.tracer_provider.get_tracer("faults")
        for index in range(100):
            with tracer.start_as_current_span(f"span {index}"):
                pass
        result = handle.shutdown()
    assert (0, 100) == (result.spans_exported, result.spans_dropped)


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_exit_is_bounded_and_quiet(protocol: str) -> None:
    """The interpreter's exit runs the bounded shutdown: no hang, no SDK lines."""
    if protocol == "grpc":
        pytest.importorskip("opentelemetry.exporter.otlp.proto.grpc.trace_exporter")
    script = textwrap.dedent(
        """
        import logging
        import time
        from seamscope.telemetry import configure

        logging.basicConfig(level=logging.ERROR)  # seamscope's events show once logging is on
        handle = configure(set_global=False)
        tracer = handle.tracer_provider.get_tracer("exit")
        for index in range(50):
            with tracer.start_as_current_span(f"span {index}"):
                pass
        print(f"exiting {time.time()!r}", flush=True)
        """
    )
    with srv.Blackhole() as hole:
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "SEAMSCOPE_"))},
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://{srv.HOST}:{hole.port}",
            "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
            "SEAMSCOPE_SHUTDOWN_TIMEOUT": str(BOUND_MS),
        }
        done = subprocess.run(
            [sys.executable, "-c", script],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        ended = time.time()
    assert 0 == done.returncode, done.stderr
    exiting = float(done.stdout.split("exiting ", 1)[1].split()[0])
    elapsed = ended - exiting
    print(f"\nexit with a blackholed {protocol} collector: {elapsed:.2f} s (bound {BOUND_S:g} s)")
    assert elapsed < BOUND_S + MARGIN_S
    assert [] == [line for line in done.stderr.splitlines() if any(k in line for k in SDK_LINES)]
    # the shutdown's one event, through the application's logging (standard
    # error); standard output holds only what the program printed
    assert done.stdout.startswith("exiting ") and 1 == len(done.stdout.splitlines())
    assert "hook=shutdown" in done.stderr
    assert "spans_dropped=50" in done.stderr


def test_rate_limit_admits_one_event_per_interval() -> None:
    now = [0.0]
    limit = RateLimit(interval_s=60.0, clock=lambda: now[0])
    admitted = []
    for second in range(0, 150, 10):
        now[0] = float(second)
        admitted.append((second, limit.admit("export"), limit.admit("other")))
    assert [(0, 0, 0), (60, 5, 5), (120, 5, 5)] == [
        (t, a, b) for t, a, b in admitted if a is not None
    ]


def test_shutdown_timeout_from_argument_environment_and_default(handles: Any) -> None:
    assert 5000 == handles(environ={}).shutdown_timeout_millis
    assert 1500 == handles(environ={"SEAMSCOPE_SHUTDOWN_TIMEOUT": "1500"}).shutdown_timeout_millis
    given = handles(shutdown_timeout_millis=250, environ={"SEAMSCOPE_SHUTDOWN_TIMEOUT": "1500"})
    assert 250 == given.shutdown_timeout_millis
    disabled = handles(environ={"OTEL_SDK_DISABLED": "true", "SEAMSCOPE_SHUTDOWN_TIMEOUT": "700"})
    assert (700, True) == (disabled.shutdown_timeout_millis, bool(disabled.shutdown()))


def test_a_bad_shutdown_timeout(handles: Any, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="seamscope.telemetry"):
        handle = handles(environ={"SEAMSCOPE_SHUTDOWN_TIMEOUT": "soon"})
    assert 5000 == handle.shutdown_timeout_millis
    assert ["SEAMSCOPE_SHUTDOWN_TIMEOUT"] == [
        name for name in ["SEAMSCOPE_SHUTDOWN_TIMEOUT"] if name in caplog.text
    ]
    with pytest.raises(ValueError, match="shutdown_timeout_millis"):
        handles(shutdown_timeout_millis=0, environ={})
    with pytest.raises(TypeError, match="shutdown_timeout_millis"):
        handles(shutdown_timeout_millis="5", environ={})
    with pytest.raises(ValueError, match="export_timeout_millis"):
        handles(otlp_endpoint="http://127.0.0.1:4318", export_timeout_millis=-1, environ={})


# -- headers ----------------------------------------------------------------


def test_environment_headers_are_percent_decoded(handles: Any) -> None:
    with srv.OtlpHttp() as server:
        handle = handles(
            environ={
                "OTEL_EXPORTER_OTLP_ENDPOINT": server.url,
                "OTEL_EXPORTER_OTLP_HEADERS": "Authorization=Bearer%20tok, x-team = a%2Cb%3Dc ",
            }
        )
        _turns(handle)
        assert handle.flush()
        headers = server.requests[0].headers
    assert ("Bearer tok", "a,b=c") == (headers["authorization"], headers["x-team"])


def test_signal_headers_replace_the_general_ones(handles: Any) -> None:
    with srv.OtlpHttp() as server:
        handle = handles(
            environ={
                "OTEL_EXPORTER_OTLP_ENDPOINT": server.url,
                "OTEL_EXPORTER_OTLP_HEADERS": "x-general=1",
                "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "x-traces=2",
            }
        )
        _turns(handle)
        assert handle.flush()
        headers = server.requests[0].headers
    assert (None, "2") == (headers.get("x-general"), headers["x-traces"])


SECRET = "sk-live-5ecret"


@pytest.mark.parametrize(
    "raw",
    [
        f"Authorization Bearer {SECRET}",  # no '='
        f"Authorization: Bearer {SECRET}=x",  # not a header name
        f"x-ok=1,authorization=Bearer%FF{SECRET}",  # not UTF-8 once decoded
        f"authorization=Bearer {SECRET}%0D%0AX-Injected: 1",  # a line break
    ],
)
def test_a_malformed_header_never_shows_its_value(
    handles: Any, raw: str, sdk_records: Callable[[], list[str]], caplog: pytest.LogCaptureFixture
) -> None:
    for name in ("OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"):
        with pytest.raises(ValueError, match=name) as raised:
            handles(environ={"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", name: raw})
        message = str(raised.value)
        print(f"\n{message}")
        assert "entry" in message
        assert SECRET not in message
        assert "Bearer" not in message
        assert raised.value.__cause__ is None
    assert SECRET not in caplog.text


# -- protocols --------------------------------------------------------------


ENDPOINT = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}


@pytest.mark.parametrize(
    ("kwargs", "environ", "match"),
    [
        ({"otlp_protocol": "http/json"}, {}, "no OTLP/HTTP JSON exporter"),
        ({"otlp_protocol": "thrift"}, {}, "'http/protobuf' or 'grpc'"),
        ({}, {"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, "no OTLP/HTTP JSON exporter"),
        ({}, {"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "udp"}, "'http/protobuf' or 'grpc'"),
    ],
)
def test_unsupported_protocols_say_why(
    handles: Any, kwargs: dict[str, Any], environ: dict[str, str], match: str
) -> None:
    with pytest.raises(ValueError, match=match):
        handles(environ={**ENDPOINT, **environ}, **kwargs)


def test_grpc_without_its_package_names_the_extra(
    handles: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.grpc.trace_exporter", None)
    with pytest.raises(ImportError, match=r"seamscope\[grpc\]"):
        handles(otlp_endpoint="http://127.0.0.1:4317", otlp_protocol="grpc", environ={})


@pytest.fixture
def grpc_ready() -> None:
    pytest.importorskip("grpc")
    pytest.importorskip("opentelemetry.exporter.otlp.proto.grpc.trace_exporter")


@pytest.mark.usefixtures("grpc_ready")
@pytest.mark.parametrize("how", ["argument", "environment"])
def test_grpc_exports_spans_and_points(handles: Any, how: str) -> None:
    with srv.OtlpGrpc() as server:
        if how == "argument":
            handle = handles(
                otlp_endpoint=server.url, otlp_protocol="grpc", otlp_metrics=True, environ={}
            )
        else:
            handle = handles(
                otlp_metrics=True,
                environ={
                    "OTEL_EXPORTER_OTLP_ENDPOINT": server.url,
                    "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
                    "OTEL_EXPORTER_OTLP_HEADERS": "Authorization=Bearer%20tok",
                },
            )
        spans = _turns(handle)
        result = handle.flush()
        assert True is bool(result), result
        assert (spans, spans) == (result.spans_exported, server.spans)
        assert result.points_exported == server.points > 0
        assert {"otlp/grpc"} == {e.kind for e in result.exporters}
        if how == "environment":
            assert "Bearer tok" == server.metadata[0]["authorization"]
        assert handle.shutdown()


GRPC_FAULTS = ["closed", "blackhole", "unavailable-slow"]


@pytest.mark.usefixtures("grpc_ready")
@pytest.mark.parametrize("name", GRPC_FAULTS)
def test_grpc_shutdown_is_bounded(handles: Any, name: str) -> None:
    import grpc

    with srv.Blackhole() as hole, srv.OtlpGrpc(grpc.StatusCode.UNAVAILABLE, delay=3.0) as slow:
        url = {
            "closed": f"http://{srv.HOST}:{srv.closed_port()}",
            "blackhole": f"http://{srv.HOST}:{hole.port}",
            "unavailable-slow": slow.url,
        }[name]
        handle = handles(
            otlp_endpoint=url,
            otlp_protocol="grpc",
            otlp_metrics=True,
            shutdown_timeout_millis=BOUND_MS,
            environ={},
        )
        spans = _turns(handle)
        result, elapsed = _timed(handle.shutdown)
    print(f"\ngRPC shutdown with a {name} collector: {elapsed:.2f} s (bound {BOUND_S:g} s)")
    assert elapsed < BOUND_S + MARGIN_S
    assert (False, 0, spans) == (bool(result), result.spans_exported, result.spans_dropped)
    assert result.points_dropped > 0
