"""Content (messages, tool arguments, tool results, error text) is recorded only on opt-in."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from seamscope.adapters import ChatResponse
from seamscope.decisions import Message, ToolCall
from seamscope.telemetry import TelemetryConfig
from seamscope.telemetry import conventions as c

from . import _support as s

CANARY = "CANARY-7f3a9c"
USER_TEXT = f"show me last month's sales for {CANARY}"
ARGS = {"sql": f"select * from {CANARY}"}


class CanaryStage(s.ExplodingStage):
    name = "lazy_routing"

    def apply(self, tools: tuple[Any, ...], ctx: Any) -> Any:
        raise RuntimeError(CANARY)


def canary_scenario() -> s.Scenario:
    """The canary in every kind of content: user text, assistant text, tool arguments,
    tool results, and the messages of exceptions raised by adopter code."""
    response = ChatResponse(
        Message(
            "assistant",
            f"let me look at {CANARY}",
            (ToolCall("call_1", "run_block", ARGS), ToolCall("call_2", "hydrate_context", {})),
        ),
        usage=s.USAGE,
    )
    return s.Scenario(
        policies=s.policies(
            docs_match=s.raising(ValueError(CANARY)), transform=s.raising(KeyError(CANARY))
        ),
        stages=s.stages(replace={"lazy_routing": CanaryStage()}),
        response=response,
        tools=s.tools(big="x" * s.BIG_OUTPUT_CHARS + CANARY, small=f"context {CANARY}"),
        user_text=USER_TEXT,
        max_iterations=2,
    )


def everything(
    exporter: InMemorySpanExporter,
    reader: InMemoryMetricReader,
    logs: list[dict[str, Any]],
    records: list[logging.LogRecord],
) -> dict[str, str]:
    data = reader.get_metrics_data()
    return {
        "spans": "\n".join(span.to_json() for span in exporter.get_finished_spans()),
        "metrics": data.to_json() if data is not None else "",
        "structlog": repr(logs),
        "logging": "\n".join(record.getMessage() for record in records),
    }


@pytest.fixture
def run_canary(
    tracer_provider: Any,
    meter_provider: Any,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
    captured_logs: list[dict[str, Any]],
    caplog: pytest.LogCaptureFixture,
) -> Any:
    def run(config: TelemetryConfig | None = None) -> dict[str, str]:
        caplog.set_level(logging.DEBUG)
        s.run(
            canary_scenario(),
            tracer_provider=tracer_provider,
            meter_provider=meter_provider,
            telemetry_config=config,
        )
        return everything(span_exporter, metric_reader, captured_logs, caplog.records)

    return run


def test_off_by_default(run_canary: Any) -> None:
    recorded = run_canary()
    assert recorded["spans"]  # the run was recorded
    assert {"spans": False, "metrics": False, "structlog": False, "logging": False} == {
        where: CANARY in text for where, text in recorded.items()
    }


def test_off_when_the_environment_says_false(
    run_canary: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "false")
    assert [] == [where for where, text in run_canary().items() if CANARY in text]


@pytest.mark.parametrize("how", ["config", "environment"])
def test_on_records_content_on_spans_only(
    run_canary: Any,
    span_exporter: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
    how: str,
) -> None:
    if how == "environment":
        monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
        recorded = run_canary()
    else:
        recorded = run_canary(TelemetryConfig.create(capture_content=True))
    assert {"spans": True, "metrics": False, "structlog": False, "logging": False} == {
        where: CANARY in text for where, text in recorded.items()
    }
    spans = span_exporter.get_finished_spans()
    pre = s.named(spans, c.SPAN_SEAM_PRE_MODEL)
    assert USER_TEXT == pre[0].attributes[c.ATTR_MESSAGE_CONTENT]
    call_1 = s.named(spans, c.SPAN_DISPATCH)[0]
    # the args_transform raised: the redirect dispatches with the original arguments
    assert json.dumps(ARGS, sort_keys=True) == call_1.attributes[c.ATTR_DISPATCH_ARGS]
    error_messages = [
        (name, attrs.get(c.ATTR_ERROR_MESSAGE))
        for name, attrs in s.events(call_1)
        if c.ATTR_ERROR_TYPE in attrs
    ]
    assert [
        (c.EVENT_POLICY_EVALUATED, CANARY),
        (c.EVENT_ADOPTER_ERROR, repr(CANARY)),
    ] == error_messages
    tool = s.named(spans, "execute_tool hydrate_context")[0]
    assert f"context {CANARY}" == tool.attributes[c.ATTR_TOOL_CALL_RESULT]


def test_on_content_passes_through_the_mask(
    run_canary: Any, span_exporter: InMemorySpanExporter
) -> None:
    config = TelemetryConfig.create(
        capture_content=True, mask=lambda text: text.replace(CANARY, "[masked]")
    )
    recorded = run_canary(config)
    assert [] == [where for where, text in recorded.items() if CANARY in text]
    pre = s.named(span_exporter.get_finished_spans(), c.SPAN_SEAM_PRE_MODEL)[0]
    assert USER_TEXT.replace(CANARY, "[masked]") == pre.attributes[c.ATTR_MESSAGE_CONTENT]


def test_on_content_is_truncated(tracer_provider: Any, span_exporter: InMemorySpanExporter) -> None:
    config = TelemetryConfig.create(capture_content=True, max_attribute_length=32)
    s.run(s.Scenario(user_text="y" * 500), tracer_provider=tracer_provider, telemetry_config=config)
    pre = s.one(span_exporter.get_finished_spans(), c.SPAN_SEAM_PRE_MODEL)
    assert "y" * 31 + "…" == pre.attributes[c.ATTR_MESSAGE_CONTENT]


def test_off_records_no_content_attribute_at_all(
    tracer_provider: Any, span_exporter: InMemorySpanExporter
) -> None:
    s.run(canary_scenario(), tracer_provider=tracer_provider)
    content_keys = {
        c.ATTR_MESSAGE_CONTENT,
        c.ATTR_DISPATCH_ARGS,
        c.ATTR_TOOL_CALL_RESULT,
        c.ATTR_ERROR_MESSAGE,
    }
    spans = span_exporter.get_finished_spans()
    on_spans = {key for span in spans for key in span.attributes}
    on_events = {key for span in spans for event in span.events for key in event.attributes}
    assert set() == content_keys & (on_spans | on_events)
