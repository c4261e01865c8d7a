"""GenAI spans held open across callbacks: start here, end there, once."""

from __future__ import annotations

import threading

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from seamscope.telemetry import conventions as c
from seamscope.telemetry._genai import GenAISpans


def _spans() -> tuple[GenAISpans, InMemorySpanExporter, TracerProvider]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return GenAISpans(provider), exporter, provider


def test_a_chat_started_in_one_thread_ends_in_another_under_its_parent() -> None:
    genai, exporter, provider = _spans()
    with provider.get_tracer("t").start_as_current_span("iteration") as parent:
        chat = genai.start_chat("claude-opus-4-6", conversation_id="conv-1")
    assert trace.get_current_span() is trace.INVALID_SPAN  # nothing was attached
    tool = genai.start_tool("search", parent=chat.context, call_id="c1")
    worker = threading.Thread(target=lambda: (tool.fail(ConnectionError("down")), chat.stop()))
    worker.start()
    worker.join()
    chat.stop()  # a second end does nothing
    tool.stop()
    spans = {s.name: s for s in exporter.get_finished_spans() if s.name != "iteration"}
    assert ["chat claude-opus-4-6", "execute_tool search"] == sorted(spans)
    assert parent.get_span_context().span_id == spans["chat claude-opus-4-6"].parent.span_id
    assert (
        spans["chat claude-opus-4-6"].context.span_id == spans["execute_tool search"].parent.span_id
    )
    failed = spans["execute_tool search"]
    assert ("ConnectionError", StatusCode.ERROR, "c1") == (
        failed.attributes[c.ATTR_ERROR_TYPE],
        failed.status.status_code,
        failed.attributes[c.ATTR_GEN_AI_TOOL_CALL_ID],
    )
    assert "conv-1" == spans["chat claude-opus-4-6"].attributes[c.ATTR_GEN_AI_CONVERSATION_ID]


class _Broken(trace.NoOpTracer):
    def start_span(self, *args: object, **kwargs: object) -> trace.Span:
        raise RuntimeError("exporter on fire")


class _BrokenProvider(trace.NoOpTracerProvider):
    def get_tracer(self, *args: object, **kwargs: object) -> trace.Tracer:
        return _Broken()


def test_a_tracer_that_raises_gives_an_invocation_that_does_nothing() -> None:
    genai = GenAISpans(_BrokenProvider())
    chat = genai.start_chat("m")
    chat.fail(ValueError("x"))
    chat.stop()
    assert chat.span is trace.INVALID_SPAN
    assert trace.get_current_span(chat.context) is trace.INVALID_SPAN  # the parent context
