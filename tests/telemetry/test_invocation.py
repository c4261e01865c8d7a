"""The one span lifecycle: an invocation started under a context, made current
for blocks, ended once from any task; a turn holding its agent span and one
open iteration at a time; an owner ending the decision spans an uncontained
exception left open."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from seamscope.decisions import Message, ToolCall
from seamscope.loop import DecisionLayer
from seamscope.telemetry import conventions as c
from seamscope.telemetry._invocation import Invocation, error_type, start


def _by_name(exporter: InMemorySpanExporter) -> dict[str, ReadableSpan]:
    return {s.name: s for s in exporter.get_finished_spans()}


def test_an_invocation_attaches_nothing_and_ends_once_from_another_thread(
    tracer_provider: TracerProvider, span_exporter: InMemorySpanExporter
) -> None:
    tracer = tracer_provider.get_tracer("t")
    outer = start(tracer, "outer", {})
    assert trace.get_current_span() is trace.INVALID_SPAN  # starting attaches nothing
    inner = start(tracer, "inner", {}, parent=outer.context)
    worker = threading.Thread(target=lambda: inner.fail(ConnectionError("down")))
    worker.start()
    worker.join()
    inner.stop()  # a second end does nothing
    outer.stop()
    spans = _by_name(span_exporter)
    assert 2 == len(span_exporter.get_finished_spans())
    assert spans["outer"].context.span_id == spans["inner"].parent.span_id  # type: ignore[union-attr]
    assert ("ConnectionError", StatusCode.ERROR) == (
        spans["inner"].attributes[c.ATTR_ERROR_TYPE],  # type: ignore[index]
        spans["inner"].status.status_code,
    )
    assert inner.ended and outer.ended


def test_current_parents_the_block_and_ends_the_span_with_what_it_raised(
    tracer_provider: TracerProvider, span_exporter: InMemorySpanExporter
) -> None:
    tracer = tracer_provider.get_tracer("t")
    ok = start(tracer, "ok", {})
    with ok.current():
        assert trace.get_current_span() is ok.span
    assert not ok.ended  # a block that returns leaves the span open
    assert trace.get_current_span() is trace.INVALID_SPAN
    ok.stop()
    paused = start(tracer, "paused", {})
    with pytest.raises(KeyboardInterrupt), paused.current(passes=(KeyboardInterrupt,)):
        raise KeyboardInterrupt
    failing = start(tracer, "failing", {})
    with pytest.raises(KeyError), failing.current():
        raise KeyError("k")
    spans = _by_name(span_exporter)
    assert StatusCode.UNSET == spans["paused"].status.status_code  # a pause, not a failure
    assert "KeyError" == spans["failing"].attributes[c.ATTR_ERROR_TYPE]  # type: ignore[index]
    assert trace.get_current_span() is trace.INVALID_SPAN


def test_the_with_form_detaches_only_where_it_attached(
    tracer_provider: TracerProvider, span_exporter: InMemorySpanExporter
) -> None:
    tracer = tracer_provider.get_tracer("t")
    invocation = start(tracer, "held", {})

    async def enter() -> None:
        invocation.attach()  # in a task's own context copy

    asyncio.run(enter())
    invocation.stop()  # ended here, in another context: the token is left alone
    assert trace.get_current_span() is trace.INVALID_SPAN
    assert ["held"] == [s.name for s in span_exporter.get_finished_spans()]


def test_an_owner_failing_ends_its_open_decision_spans_with_the_same_error(
    tracer_provider: TracerProvider, span_exporter: InMemorySpanExporter
) -> None:
    tracer = tracer_provider.get_tracer("t")
    owner = start(tracer, c.SPAN_ITERATION, {}, owner=True)
    with _Under(owner.context):
        done = start(tracer, "done", {}, join=True)
        done.stop()
        left_open = start(tracer, "left_open", {}, join=True)
    owner.fail(KeyboardInterrupt())
    spans = _by_name(span_exporter)
    assert left_open.ended
    assert "KeyboardInterrupt" == spans["left_open"].attributes[c.ATTR_ERROR_TYPE]  # type: ignore[index]
    assert c.ATTR_ERROR_TYPE not in (spans["done"].attributes or {})
    assert "KeyboardInterrupt" == spans[c.SPAN_ITERATION].attributes[c.ATTR_ERROR_TYPE]  # type: ignore[index]


class _Under:
    def __init__(self, context: Any) -> None:
        self._context = context

    def __enter__(self) -> None:
        self._token = otel_context.attach(self._context)

    def __exit__(self, *exc: object) -> None:
        otel_context.detach(self._token)


def test_a_turn_holds_one_iteration_at_a_time_under_its_agent_span(
    tracer_provider: TracerProvider, span_exporter: InMemorySpanExporter
) -> None:
    layer = DecisionLayer(default_model="m", agent_name="lead", tracer_provider=tracer_provider)
    turn = layer.start_turn("conv-1", [Message("user", "hi")])
    first = turn.start_iteration()
    assert turn.trace_context is first.trace_context
    second = turn.start_iteration()  # ends the first
    assert first.invocation.ended and not second.invocation.ended
    tool = second.start_tool(_call())
    turn.fail(ValueError("boom"))
    tool.stop()  # a tool span outlives nothing: its owner ends it
    spans = span_exporter.get_finished_spans()
    agent = next(s for s in spans if s.name == "invoke_agent lead")
    iterations = [s for s in spans if s.name == c.SPAN_ITERATION]
    assert [agent.context.span_id] * 2 == [s.parent.span_id for s in iterations]  # type: ignore[union-attr]
    assert [None, "ValueError"] == [(s.attributes or {}).get(c.ATTR_ERROR_TYPE) for s in iterations]
    assert "ValueError" == agent.attributes[c.ATTR_ERROR_TYPE]  # type: ignore[index]
    assert turn.trace_context is turn.agent_context  # nothing open: the agent's context


def _call() -> ToolCall:
    return ToolCall("c1", "search", {})


def test_error_type_names_what_the_users_code_raised_through_a_frameworks_wrapper() -> None:
    class UserError(Exception):
        pass

    UserError.__module__ = "agents.exceptions"  # the Agents SDK's wrapper of a tool's exception
    try:
        try:
            raise ValueError("bad")
        except ValueError as exc:
            raise UserError("tool failed") from exc
    except UserError as wrapped:
        assert "ValueError" == error_type(wrapped)
    assert isinstance(start(trace.NoOpTracer(), "x", {}), Invocation)
