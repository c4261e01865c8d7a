"""Faults, round two: a collector that drips, the handle's own providers,
spans that end after shutdown, and a gRPC endpoint without a scheme.

Real local servers (``_servers.py``) on 127.0.0.1: a server that answers 200
with a 2 GB body sent slowly (or 64 MB sent fast), a closed port, a black
hole. Each test proves a bound of the README's "Reliability" section and
prints the measured figure (``pytest -s``); the margin covers a loaded
two-core machine.
"""

# The project writes `assert expected == actual` (STYLE.md).

from __future__ import annotations

import gzip
import time
import tracemalloc
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from seamscope.telemetry import TelemetryHandle
from seamscope.telemetry import conventions as c
from seamscope.telemetry._bounded import (
    GRPC_TLS_HINT,
    MAX_RESPONSE_BYTES,
    AnswerTooLarge,
    BoundedSession,
)

from . import _servers as srv
from . import _support as s

BOUND_MS = 1000
BOUND_S = BOUND_MS / 1000
MARGIN_S = 2.0
"""Added to every bound: thread start-up and a loaded CI machine."""


def _timed(call: Callable[[], Any]) -> tuple[Any, float]:
    started = time.monotonic()
    result = call()
    return result, time.monotonic() - started


def _turns(handle: TelemetryHandle, turns: int = 1) -> int:
    for _ in range(turns):
        s.run(telemetry=handle)
    pending = handle.report().spans_pending
    assert pending > 0
    return pending


def _export_events(logs: list[dict[str, Any]], hook: str = "export") -> list[dict[str, Any]]:
    return [e for e in logs if e["event"] == c.LOG_TELEMETRY_ERROR and e.get("hook") == hook]


# -- a collector that drips ------------------------------------------------------------------


def test_a_dripping_collector_does_not_hold_an_export_past_its_timeout(handles: Any) -> None:
    # one byte every 50 ms: every read answers within any read timeout
    with srv.Drip(chunk=1, interval=0.05) as drip:
        handle = handles(otlp_endpoint=drip.url, export_timeout_millis=BOUND_MS, environ={})
        spans = _turns(handle)
        result, elapsed = _timed(lambda: handle.flush(BOUND_MS * 8))
        print(f"\nflush with a dripping collector, 1 s export timeout: {elapsed:.2f} s")
        assert elapsed < BOUND_S + MARGIN_S
        assert (False, False, 0, spans, 0) == (
            bool(result),
            result.timed_out,
            result.spans_exported,
            result.spans_dropped,
            result.spans_pending,
        )
        assert "no success within the export timeout" == result.error
        assert 1 <= drip.requests


def test_a_dripping_collector_does_not_grow_memory_with_its_body(handles: Any) -> None:
    # 64 MB as fast as loopback carries it: read whole, the answer is 64 MB of memory
    with srv.Drip(chunk=64 * 1024, interval=0.0, limit=64 * 1024 * 1024) as drip:
        handle = handles(otlp_endpoint=drip.url, export_timeout_millis=BOUND_MS * 5, environ={})
        spans = _turns(handle)
        tracemalloc.start()
        try:
            result = handle.flush(BOUND_MS * 10)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        print(
            f"\nflush with a 64 MB answer: peak {peak / 2**20:.1f} MiB traced, "
            f"{drip.sent / 2**20:.1f} MiB sent by the server"
        )
        assert peak < 8 * 2**20
        assert (False, spans) == (bool(result), result.spans_dropped)
        assert f"the collector's answer is over {MAX_RESPONSE_BYTES // 1024} KiB" == result.error


def test_a_gzip_answer_is_capped_by_what_it_expands_to() -> None:
    small = b"ok" * 100
    bomb = gzip.compress(b"\0" * (MAX_RESPONSE_BYTES * 16))
    with srv.Answer(gzip.compress(small), {"Content-Encoding": "gzip"}) as server:
        assert small == BoundedSession().post(server.url, data=b"x", timeout=5).content
    with srv.Answer(bomb, {"Content-Encoding": "gzip"}) as server, pytest.raises(AnswerTooLarge):
        BoundedSession().post(server.url, data=b"x", timeout=5)
    assert len(bomb) < MAX_RESPONSE_BYTES


def test_pending_spans_are_bounded_by_the_queue_the_rest_count_as_dropped(
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
        report = handle.report()
        print(
            f"\n100 spans, queue 8, batch 4, no answer: {report.spans_pending} pending, "
            f"{report.spans_dropped} dropped"
        )
        assert report.spans_pending <= 8 + 4 + 4  # the queue, a batch taken, one in flight
        assert 100 == report.spans_exported + report.spans_dropped + report.spans_pending
        assert False is report.ok
        assert (0, 100) == (handle.shutdown().spans_exported, handle.shutdown().spans_dropped)


# -- the providers on the handle -------------------------------------------------------------


@pytest.fixture(params=["closed", "blackhole"])
def dead(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "closed":
        yield f"http://{srv.HOST}:{srv.closed_port()}"
    else:
        with srv.Blackhole() as hole:
            yield f"http://{srv.HOST}:{hole.port}"


def test_the_handles_tracer_provider_force_flush_is_bounded_and_false(
    handles: Any, dead: str
) -> None:
    handle = handles(otlp_endpoint=dead, shutdown_timeout_millis=BOUND_MS, environ={})
    spans = _turns(handle)
    flushed, elapsed = _timed(lambda: handle.tracer_provider.force_flush(BOUND_MS))
    print(f"\ntracer_provider.force_flush({BOUND_MS}) against {dead}: {elapsed:.2f} s")
    assert elapsed < BOUND_S + MARGIN_S
    assert False is flushed
    # without an argument: the handle's bound
    _, elapsed = _timed(handle.tracer_provider.force_flush)
    assert elapsed < BOUND_S + MARGIN_S
    done, elapsed = _timed(handle.tracer_provider.shutdown)
    print(f"tracer_provider.shutdown(): {elapsed:.2f} s (bound {BOUND_S:g} s)")
    assert elapsed < BOUND_S + MARGIN_S
    assert None is done
    final = handle.report()
    assert (False, 0, spans) == (final.ok, final.spans_exported, final.spans_dropped)
    assert final is handle.shutdown()


def test_the_handles_meter_provider_is_bounded(handles: Any, dead: str) -> None:
    handle = handles(
        otlp_endpoint=dead, otlp_metrics=True, shutdown_timeout_millis=BOUND_MS, environ={}
    )
    _turns(handle)
    flushed, elapsed = _timed(lambda: handle.meter_provider.force_flush(BOUND_MS))
    print(f"\nmeter_provider.force_flush({BOUND_MS}) against {dead}: {elapsed:.2f} s")
    assert elapsed < BOUND_S + MARGIN_S
    assert False is flushed
    _, elapsed = _timed(handle.meter_provider.shutdown)
    print(f"meter_provider.shutdown(): {elapsed:.2f} s (bound {BOUND_S:g} s)")
    assert elapsed < BOUND_S + MARGIN_S
    assert False is handle.report().ok


def test_the_handles_providers_flush_true_when_everything_arrived(handles: Any) -> None:
    with srv.OtlpHttp() as server:
        handle = handles(otlp_endpoint=server.url, otlp_metrics=True, environ={})
        spans = _turns(handle)
        assert (True, True) == (
            handle.tracer_provider.force_flush(BOUND_MS * 5),
            handle.meter_provider.force_flush(BOUND_MS * 5),
        )
        assert spans == server.items("/v1/traces")
        assert 0 < server.items("/v1/metrics")
        assert True is bool(handle.shutdown())


# -- spans that end after shutdown -----------------------------------------------------------


def test_spans_that_end_after_shutdown_are_counted_dropped(
    handles: Any, captured_logs: list[dict[str, Any]]
) -> None:
    with srv.OtlpHttp() as server:
        handle = handles(otlp_endpoint=server.url, environ={})
        tracer = handle.tracer_provider.get_tracer("late")
        with tracer.start_as_current_span("before"):
            pass
        late = [tracer.start_span(f"late {index}") for index in range(3)]
        first = handle.shutdown()
        assert (True, 1, 0) == (first.ok, first.spans_exported, first.spans_dropped)
        for span in late:
            span.end()
        report = handle.report()
        assert (False, 1, 3) == (report.ok, report.spans_exported, report.spans_dropped)
        assert (False, 3) == (bool(handle.shutdown()), handle.shutdown().spans_dropped)
        assert 1 == server.items("/v1/traces")
    events = _export_events(captured_logs, hook="span_after_shutdown")
    assert [1] == [e["dropped"] for e in events]


# -- gRPC without a scheme -------------------------------------------------------------------


def test_a_grpc_endpoint_without_a_scheme_says_why_it_failed(
    handles: Any, captured_logs: list[dict[str, Any]]
) -> None:
    pytest.importorskip("opentelemetry.exporter.otlp.proto.grpc.trace_exporter")
    with srv.OtlpGrpc() as server:
        handle = handles(
            otlp_endpoint=f"{srv.HOST}:{server.port}",
            otlp_protocol="grpc",
            export_timeout_millis=1500,
            environ={},
        )
        spans = _turns(handle)
        result = handle.flush(BOUND_MS * 5)
        assert (False, spans, 0) == (bool(result), result.spans_dropped, server.spans)
    assert result.error is not None and result.error.endswith(GRPC_TLS_HINT), result.error
    assert [result.error] == [e["reason"] for e in _export_events(captured_logs)]


def test_a_grpc_endpoint_with_http_is_plaintext(handles: Any) -> None:
    pytest.importorskip("opentelemetry.exporter.otlp.proto.grpc.trace_exporter")
    with srv.OtlpGrpc() as server:
        handle = handles(
            otlp_endpoint=f"http://{srv.HOST}:{server.port}", otlp_protocol="grpc", environ={}
        )
        spans = _turns(handle)
        result = handle.flush(BOUND_MS * 5)
        assert (True, spans) == (bool(result), server.spans)


def test_a_turn_still_running_at_shutdown_has_its_later_spans_counted(handles: Any) -> None:
    """The issue's shape: a predicate is still running when the application
    shuts telemetry down; the turn's spans that end after it are counted."""
    from seamscope.decisions import ModelConfig, ToolCallPolicy
    from seamscope.loop import DecisionLayer

    with srv.OtlpHttp() as server:
        handle = handles(otlp_endpoint=server.url, environ={})
        shut: list[Any] = []

        def slow_match(ctx: Any) -> bool:
            shut.append(handle.shutdown())  # the application shuts down meanwhile
            return True

        layer = DecisionLayer(
            default_model="claude-opus-4-6",
            policies=[ToolCallPolicy(name="p", match=slow_match, model=ModelConfig("m"))],
            telemetry=handle,
        )
        with layer.turn("conv", []) as turn, turn.iteration() as it:
            it.pre_model()
        report = handle.report()
    assert (True, 0) == (shut[0].ok, shut[0].spans_dropped)
    # invoke_agent, iteration and the PRE seam's span ended after the shutdown
    assert (False, 3, 0) == (report.ok, report.spans_dropped, server.items("/v1/traces"))
