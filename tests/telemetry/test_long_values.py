"""Names and ids of any length are cut to ``max_attribute_length``: attributes,
span names and metric label values alike (a 100,000-character value never
reaches the exporter or a metric series)."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from seamscope.adapters import DecisionLayer
from seamscope.decisions import ModelConfig, ModelUsage, ToolCall, ToolCallPolicy
from seamscope.telemetry import TelemetryConfig
from seamscope.telemetry import conventions as c
from seamscope.telemetry._genai import DEFAULT_MAX_LENGTH, GenAISpans

HUGE = 100_000
LIMIT = 64


def test_huge_names_and_ids_are_cut_everywhere(
    tracer_provider: Any,
    meter_provider: Any,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
) -> None:
    long = "x" * HUGE
    policy = ToolCallPolicy(
        name="p" * HUGE,
        match=lambda ctx: True,
        model=ModelConfig("m" * HUGE),
        when_tool="t" * HUGE,
        redirect_to="r" * HUGE,
    )
    layer = DecisionLayer(
        default_model="claude-opus-4-6",
        policies=[policy],
        agent_name="a" * HUGE,
        provider_name="v" * HUGE,
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        telemetry_config=TelemetryConfig.create(max_attribute_length=LIMIT),
    )
    call = ToolCall("i" * HUGE, "t" * HUGE, {})
    with layer.turn(long, []) as turn, turn.iteration() as it:
        it.select_tools(["t" * HUGE])
        pre = it.pre_model()
        with it.chat(pre.model.model_name) as chat:
            chat.report(ModelUsage(input_tokens=10, output_tokens=1), response_model="R" * HUGE)
        post = it.post_model([call])
        with it.execute_tool(post.calls[0]):
            pass
        it.offload(post.calls[0], 20_000.0)
    spans = span_exporter.get_finished_spans()
    too_long = [
        (span.name[:20], key)
        for span in spans
        for key, value in [("<name>", span.name), *dict(span.attributes or {}).items()]
        for item in (value if isinstance(value, tuple) else (value,))
        if isinstance(item, str) and len(item) > LIMIT
    ]
    data = metric_reader.get_metrics_data()
    labels = [
        (metric.name, key)
        for rm in (data.resource_metrics if data else ())
        for sm in rm.scope_metrics
        for metric in sm.metrics
        for point in metric.data.data_points
        for key, value in dict(point.attributes or {}).items()
        if isinstance(value, str) and len(value) > LIMIT
    ]
    assert (True, [], []) == (len(spans) > 5, too_long, labels)
    assert ["R" * (LIMIT - 1) + "…"] == [
        span.attributes[c.ATTR_GEN_AI_RESPONSE_MODEL]
        for span in spans
        if c.ATTR_GEN_AI_RESPONSE_MODEL in (span.attributes or {})
    ]


def test_a_reported_response_model_is_cut_to_the_default_length(
    tracer_provider: Any, span_exporter: InMemorySpanExporter
) -> None:
    """Adapters that report through the GenAI spans without a config cut at 1024."""
    span = tracer_provider.get_tracer("t").start_span("chat m")
    GenAISpans.record_usage(span, ModelUsage(input_tokens=1, output_tokens=1), "R" * HUGE)
    span.end()
    (finished,) = span_exporter.get_finished_spans()
    assert DEFAULT_MAX_LENGTH == len(finished.attributes[c.ATTR_GEN_AI_RESPONSE_MODEL])
