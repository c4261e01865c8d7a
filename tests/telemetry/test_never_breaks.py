"""Telemetry never changes or breaks the loop: broken exporters, processors, metrics, values."""

from __future__ import annotations

import collections
import logging
from collections.abc import Sequence
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    MetricExporter,
    MetricExportResult,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from seamscope.adapters import ChatResponse
from seamscope.decisions import (
    Message,
    NoopObserver,
    OffloadGate,
    SeamRouter,
    SelectionContext,
    SelectionPipeline,
    StageOutcome,
    ToolCall,
)
from seamscope.decisions._policy import build_dispatch_context
from seamscope.decisions.records import GateCall, Seam
from seamscope.telemetry import OTelObserver, TelemetryConfig
from seamscope.telemetry import conventions as c

from . import _support as s

MESSAGES = (Message("user", s.USER_TEXT),)
EMITTED = (
    ToolCall("call_1", "run_block", {"sql": "select 1"}),
    ToolCall("call_2", "hydrate_context", {}),
)


def decide(observer: Any, stages: Sequence[Any] | None = None) -> tuple[Any, ...]:
    """One iteration through the real components, driven directly (no adapter spans)."""
    pipeline = SelectionPipeline(stages or s.stages(), catalog=s.CATALOG, observer=observer)
    router = SeamRouter(s.policies(), default_model=s.DEFAULT_MODEL, observer=observer)
    gate = OffloadGate(pricing=s.PRICING, observer=observer, id_factory=lambda: "off-1")

    def body() -> tuple[Any, ...]:
        ctx = SelectionContext(
            messages=MESSAGES, role=s.ROLE, conversation_id=s.CONVERSATION, agent_name=s.AGENT
        )
        selection = pipeline.run(s.OFFERED, ctx)
        common: dict[str, Any] = {
            "resolved_tool_names": selection.selected,
            "conversation_id": s.CONVERSATION,
            "agent_name": s.AGENT,
        }
        pre = router.pre_model(build_dispatch_context(Seam.PRE_MODEL, MESSAGES, **common))
        post = router.post_model(
            build_dispatch_context(
                Seam.POST_MODEL,
                MESSAGES,
                emitted_message=Message("assistant", "", EMITTED),
                **common,
            ),
            EMITTED,
        )
        decision = gate.evaluate(
            20_000.0,
            pre.model.model_name,
            GateCall(s.CONVERSATION, s.AGENT, "fetch_data", "call_1"),
        )
        return selection.selected, selection.records, pre, post.calls, post.records, decision

    if isinstance(observer, OTelObserver):
        with observer.iteration(0, conversation_id=s.CONVERSATION, agent_name=s.AGENT):
            return body()
    return body()


BARE = decide(NoopObserver())


def telemetry_errors(logs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in logs if e["event"] == c.LOG_TELEMETRY_ERROR]


def errors_by_hook(logs: list[dict[str, Any]]) -> dict[str, str]:
    return {e["hook"]: e["error_type"] for e in telemetry_errors(logs)}


# -- exporters and processors -------------------------------------------------------


class RaisingSpanExporter(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        raise ConnectionError("collector unreachable")


class RaisingProcessor(SpanProcessor):
    def __init__(self, where: str) -> None:
        self.where = where

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        if self.where == "on_start":
            raise RuntimeError("processor on_start")

    def on_end(self, span: ReadableSpan) -> None:
        if self.where == "on_end":
            raise RuntimeError("processor on_end")


def test_an_exporter_that_raises(
    captured_logs: list[dict[str, Any]], caplog: pytest.LogCaptureFixture
) -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(RaisingSpanExporter()))
    observer = OTelObserver(tracer_provider=provider)
    assert BARE == decide(observer)
    result = s.run(tracer_provider=provider)
    assert s.decisions(s.run(observer=NoopObserver())) == s.decisions(result)
    # the SDK's processor contains an exporter failure and logs it itself
    assert any("Exception while exporting Span" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("where", ["on_start", "on_end"])
def test_a_span_processor_that_raises_at_the_decisions(
    captured_logs: list[dict[str, Any]], where: str
) -> None:
    provider = TracerProvider()
    provider.add_span_processor(RaisingProcessor(where))
    assert BARE == decide(OTelObserver(tracer_provider=provider))
    hooks = errors_by_hook(captured_logs)
    expected_hooks = (
        {
            "iteration",
            "start_selection",
            "start_stage",
            "start_pre_model",
            "start_post_model",
            "start_dispatch",
            "start_offload_gate",
        }
        if where == "on_start"
        else {
            "iteration",
            "end_selection",
            "end_stage",
            "end_pre_model",
            "end_post_model",
            "end_dispatch",
            "end_offload_gate",
        }
    )
    assert expected_hooks == set(hooks)
    assert {"RuntimeError"} == set(hooks.values())


@pytest.mark.parametrize("where", ["on_start", "on_end"])
def test_a_span_processor_that_raises_in_the_whole_loop(
    captured_logs: list[dict[str, Any]], where: str
) -> None:
    provider = TracerProvider()
    provider.add_span_processor(RaisingProcessor(where))
    result = s.run(tracer_provider=provider)
    assert s.decisions(s.run(observer=NoopObserver())) == s.decisions(result)
    assert telemetry_errors(captured_logs)


# -- metrics ------------------------------------------------------------------------


class RaisingMetricExporter(MetricExporter):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def export(
        self, metrics_data: Any, timeout_millis: float = 10_000, **kwargs: Any
    ) -> MetricExportResult:
        self.calls += 1
        raise ConnectionError("metrics backend unreachable")

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        return None


def test_a_metric_exporter_that_fails(tracer_provider: Any) -> None:
    exporter = RaisingMetricExporter()
    meter_provider = MeterProvider(
        metric_readers=[PeriodicExportingMetricReader(exporter, export_interval_millis=60_000)]
    )
    try:
        result = s.run(tracer_provider=tracer_provider, meter_provider=meter_provider)
        assert s.decisions(s.run(observer=NoopObserver())) == s.decisions(result)
        meter_provider.force_flush()
        assert exporter.calls >= 1
    finally:
        meter_provider.shutdown()


class BrokenInstrument:
    def add(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("metric pipeline broken")

    def record(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("metric pipeline broken")


class BrokenMeterProvider:
    """A metric pipeline whose every measurement raises."""

    def get_meter(self, *args: Any, **kwargs: Any) -> Any:
        class Meter:
            def __getattr__(self, name: str) -> Any:
                return lambda *a, **k: BrokenInstrument()

        return Meter()


def recorded(spans: Sequence[ReadableSpan]) -> list[tuple[Any, ...]]:
    """Every span's name, status, attributes and events, in start order."""
    return [
        (span.name, span.status.status_code, s.attrs(span), s.events(span))
        for span in s.ordered(spans)
    ]


def test_failing_metrics_leave_decisions_and_the_span_tree_intact(
    tracer_provider: Any,
    span_exporter: InMemorySpanExporter,
    captured_logs: list[dict[str, Any]],
) -> None:
    healthy = InMemorySpanExporter()
    healthy_provider = TracerProvider()
    healthy_provider.add_span_processor(SimpleSpanProcessor(healthy))
    assert BARE == decide(OTelObserver(tracer_provider=healthy_provider))
    assert [] == telemetry_errors(captured_logs)
    observer = OTelObserver(tracer_provider=tracer_provider, meter_provider=BrokenMeterProvider())
    assert BARE == decide(observer)
    spans = span_exporter.get_finished_spans()
    assert [
        (0, c.SPAN_ITERATION),
        (1, c.SPAN_SELECT_TOOLS),
        *[(2, c.SPAN_STAGE)] * 6,
        (1, c.SPAN_SEAM_PRE_MODEL),
        (1, c.SPAN_SEAM_POST_MODEL),
        (2, c.SPAN_DISPATCH),
        (2, c.SPAN_DISPATCH),
        (1, c.SPAN_OFFLOAD_GATE),
    ] == s.tree(spans)
    # metrics, logs and spans fail on their own: every span got all its end
    # attributes and events, exactly as with working metrics
    assert recorded(healthy.get_finished_spans()) == recorded(spans)
    healthy_provider.shutdown()
    # one error per end hook that records metrics, and nothing else (a
    # dispatch's metrics are its POST seam's)
    assert {
        "end_selection": "RuntimeError",
        "end_stage": "RuntimeError",
        "end_pre_model": "RuntimeError",
        "end_post_model": "RuntimeError",
        "end_offload_gate": "RuntimeError",
    } == errors_by_hook(captured_logs)
    assert {
        "end_selection": 1,
        "end_stage": 6,
        "end_pre_model": 1,
        "end_post_model": 1,
        "end_offload_gate": 1,
    } == collections.Counter(e["hook"] for e in telemetry_errors(captured_logs))


def test_failing_metrics_in_the_whole_loop(tracer_provider: Any) -> None:
    result = s.run(tracer_provider=tracer_provider, meter_provider=BrokenMeterProvider())
    assert s.decisions(s.run(observer=NoopObserver())) == s.decisions(result)


# -- huge and wrong-typed values ------------------------------------------------------


class ReasonStage:
    """A stage (named like the lazy router) that abstains with the given reason."""

    name = "lazy_routing"
    protects_forced = True

    def __init__(self, reason: Any, degraded: bool = False) -> None:
        self.reason = reason
        self.degraded = degraded

    def apply(self, tools: tuple[Any, ...], ctx: Any) -> StageOutcome:
        return StageOutcome.abstain(self.reason, degraded=self.degraded)


def test_a_one_megabyte_stage_reason_is_truncated(
    tracer_provider: Any,
    span_exporter: InMemorySpanExporter,
    captured_logs: list[dict[str, Any]],
) -> None:
    reason = "r" * 1_000_000
    stages = s.stages(replace={"lazy_routing": ReasonStage(reason, degraded=True)})
    bare = s.run(s.Scenario(stages=stages), observer=NoopObserver())
    result = s.run(s.Scenario(stages=stages), tracer_provider=tracer_provider)
    assert s.decisions(bare) == s.decisions(result)
    stage = s.named(span_exporter.get_finished_spans(), c.SPAN_STAGE)[2]
    assert "r" * 1023 + "…" == stage.attributes[c.ATTR_STAGE_REASON]
    [logged] = [
        e
        for e in captured_logs
        if e["event"] == c.LOG_STAGE_DEGRADED and e["stage"] == "lazy_routing"
    ]
    assert "r" * 1023 + "…" == logged["reason"]
    assert [] == telemetry_errors(captured_logs)


class LongStr:
    """Not a str; its str() is 5000 characters."""

    def __str__(self) -> str:
        return "q" * 5000


@pytest.mark.parametrize(
    ("reason", "expected"),
    [(None, "None"), (404, "404"), (LongStr(), "q" * 1023 + "…")],
    ids=["none", "int", "long"],
)
def test_a_stage_reason_that_is_not_a_str(
    tracer_provider: Any,
    span_exporter: InMemorySpanExporter,
    captured_logs: list[dict[str, Any]],
    reason: Any,
    expected: str,
) -> None:
    """The reason is recorded as its str(), cut to the length limit; the
    attribute limits do this for any value, so it is no telemetry error."""
    stages = s.stages(replace={"lazy_routing": ReasonStage(reason)})
    bare = s.run(s.Scenario(stages=stages), observer=NoopObserver())
    result = s.run(s.Scenario(stages=stages), tracer_provider=tracer_provider)
    assert s.decisions(bare) == s.decisions(result)
    stage = s.named(span_exporter.get_finished_spans(), c.SPAN_STAGE)[2]
    assert "lazy_routing" == stage.attributes[c.ATTR_STAGE_NAME]
    assert expected == stage.attributes[c.ATTR_STAGE_REASON]
    assert [] == telemetry_errors(captured_logs)


def test_a_degraded_stage_reason_that_is_not_a_str_is_logged_as_its_str(
    tracer_provider: Any,
    span_exporter: InMemorySpanExporter,
    captured_logs: list[dict[str, Any]],
) -> None:
    stages = s.stages(replace={"lazy_routing": ReasonStage(LongStr(), degraded=True)})
    s.run(s.Scenario(stages=stages), tracer_provider=tracer_provider)
    stage = s.named(span_exporter.get_finished_spans(), c.SPAN_STAGE)[2]
    assert "q" * 1023 + "…" == stage.attributes[c.ATTR_STAGE_REASON]
    assert [{"stage": "lazy_routing", "reason": "q" * 1023 + "…"}] == [
        {"stage": e["stage"], "reason": e["reason"]}
        for e in captured_logs
        if e["event"] == c.LOG_STAGE_DEGRADED and e["stage"] == "lazy_routing"
    ]
    assert [] == telemetry_errors(captured_logs)


def type_errors(logs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    keys = ("event", "log_level", "hook", "error_type", "field", "value_type")
    return [{k: e.get(k) for k in keys} for e in telemetry_errors(logs)]


@pytest.mark.parametrize("call_id", [12345, {"id": 7}], ids=["int", "dict"])
def test_a_tool_call_id_that_is_not_a_str(
    tracer_provider: Any,
    span_exporter: InMemorySpanExporter,
    captured_logs: list[dict[str, Any]],
    call_id: Any,
) -> None:
    scenario = s.Scenario(response=s.emitted_calls(call_id=call_id))
    bare = s.run(s.Scenario(response=s.emitted_calls(call_id=call_id)), observer=NoopObserver())
    result = s.run(scenario, tracer_provider=tracer_provider)
    assert s.decisions(bare) == s.decisions(result)
    spans = span_exporter.get_finished_spans()
    dispatch = s.named(spans, c.SPAN_DISPATCH)[0]
    gate = s.named(spans, c.SPAN_OFFLOAD_GATE)[0]
    assert (str(call_id), str(call_id)) == (
        dispatch.attributes[c.ATTR_GEN_AI_TOOL_CALL_ID],
        gate.attributes[c.ATTR_GEN_AI_TOOL_CALL_ID],
    )
    # logged once, where the observer first meets the call
    assert [
        {
            "event": c.LOG_TELEMETRY_ERROR,
            "log_level": "error",
            "hook": "start_dispatch",
            "error_type": "TypeError",
            "field": "id",
            "value_type": type(call_id).__qualname__,
        }
    ] == type_errors(captured_logs)


def test_a_long_tool_call_id_that_is_not_a_str_is_truncated(
    tracer_provider: Any,
    span_exporter: InMemorySpanExporter,
    captured_logs: list[dict[str, Any]],
) -> None:
    call_id = 7**2000  # an int of 1691 digits
    s.run(s.Scenario(response=s.emitted_calls(call_id=call_id)), tracer_provider=tracer_provider)
    dispatch = s.named(span_exporter.get_finished_spans(), c.SPAN_DISPATCH)[0]
    assert str(call_id)[:1023] + "…" == dispatch.attributes[c.ATTR_GEN_AI_TOOL_CALL_ID]
    assert [("start_dispatch", "id", "int")] == [
        (e["hook"], e["field"], e["value_type"]) for e in type_errors(captured_logs)
    ]


def test_a_tool_name_that_is_not_a_str(
    tracer_provider: Any,
    span_exporter: InMemorySpanExporter,
    captured_logs: list[dict[str, Any]],
) -> None:
    observer = OTelObserver(
        tracer_provider=tracer_provider, config=TelemetryConfig.create(environ={})
    )
    router = SeamRouter(s.policies(), default_model=s.DEFAULT_MODEL, observer=observer)
    bare_router = SeamRouter(s.policies(), default_model=s.DEFAULT_MODEL)
    ctx = build_dispatch_context(Seam.POST_MODEL, MESSAGES, resolved_tool_names=("run_block",))
    odd = (ToolCall("call_9", 42, {}),)  # type: ignore[arg-type]
    assert bare_router.post_model(ctx, odd).records == router.post_model(ctx, odd).records
    dispatch = s.one(span_exporter.get_finished_spans(), c.SPAN_DISPATCH)
    assert ("call_9", "42", "42") == (
        dispatch.attributes[c.ATTR_GEN_AI_TOOL_CALL_ID],
        dispatch.attributes[c.ATTR_DISPATCH_EMITTED_TOOL],
        dispatch.attributes[c.ATTR_DISPATCH_FINAL_TOOL],
    )
    # the emitted call's name is the final one's too: logged once, by its field
    assert [
        {
            "event": c.LOG_TELEMETRY_ERROR,
            "log_level": "error",
            "hook": "start_dispatch",
            "error_type": "TypeError",
            "field": "name",
            "value_type": "int",
        }
    ] == type_errors(captured_logs)


def test_a_raising_observer_of_the_adopters_own_is_contained() -> None:
    class Faulty(NoopObserver):
        never_raises = False

        def start_stage(self, *args: Any) -> None:
            raise RuntimeError("observer bug")

        def end_dispatch(self, *args: Any) -> None:
            raise RuntimeError("observer bug")

    assert BARE == decide(Faulty())


def test_loop_errors_are_not_mistaken_for_telemetry_errors(
    tracer_provider: Any, captured_logs: list[dict[str, Any]]
) -> None:
    def chat(request: Any) -> ChatResponse:
        raise TimeoutError("model")

    layer = s.make_layer(s.Scenario(), tracer_provider=tracer_provider)
    with pytest.raises(TimeoutError):
        s.ReActAgent(layer, chat, s.tools()).run_turn(s.CONVERSATION, s.USER_TEXT)
    assert [] == telemetry_errors(captured_logs)


def test_nothing_logged_at_error_in_a_healthy_run(
    tracer_provider: Any,
    meter_provider: Any,
    captured_logs: list[dict[str, Any]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING):
        s.run(tracer_provider=tracer_provider, meter_provider=meter_provider)
    assert [] == telemetry_errors(captured_logs)
    assert [] == [r.getMessage() for r in caplog.records if r.name.startswith("opentelemetry")]
