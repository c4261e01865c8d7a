"""The kit's held span: entered in one hook's task, ended in another's, once.

Driven by real asyncio tasks and threads and the real OpenTelemetry SDK (the
spans an in-memory exporter received are the ground truth).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from seamscope._internal import GenAISpans
from seamscope.adapters._kit import Held, RunSpans
from seamscope.decisions import Message
from seamscope.loop import DecisionLayer, Turn
from seamscope.telemetry import conventions as c


def _failures() -> tuple[list[str], Any]:
    seen: list[str] = []
    return seen, seen.append


def test_a_span_held_across_tasks_parents_what_each_hook_attaches(
    span_exporter: InMemorySpanExporter, tracer_provider: TracerProvider
) -> None:
    genai = GenAISpans(tracer_provider)
    seen, failed = _failures()

    async def run() -> None:
        agent: Held[trace.Span] = await asyncio.create_task(
            _start(lambda: genai.invoke_agent("lead"), None, failed)
        )
        tool: Held[trace.Span] = await asyncio.create_task(
            _start(lambda: genai.execute_tool("search", call_id="c1"), agent.context, failed)
        )

        async def hook() -> None:  # another task attaches the tool's context
            token = otel_context.attach(tool.context)
            try:
                with tracer_provider.get_tracer("t").start_as_current_span("inside"):
                    pass
            finally:
                otel_context.detach(token)

        await asyncio.create_task(hook())
        await asyncio.create_task(_stop(tool))
        await asyncio.create_task(_stop(agent))

    before = otel_context.get_current()
    asyncio.run(run())
    assert before is otel_context.get_current()  # nothing left attached here
    assert [] == seen
    spans = {s.name: s for s in span_exporter.get_finished_spans()}
    assert ["inside", "execute_tool search", "invoke_agent lead"] == [
        s.name for s in span_exporter.get_finished_spans()
    ]
    root = spans["invoke_agent lead"]
    assert root.parent is None
    assert spans["execute_tool search"].parent.span_id == root.context.span_id  # type: ignore[union-attr]
    inside = spans["inside"]
    assert inside.parent.span_id == spans["execute_tool search"].context.span_id  # type: ignore[union-attr]


async def _start(factory: Any, parent: Any, failed: Any) -> Held[Any]:
    return Held(factory, parent=parent, what="test.span", failed=failed)


async def _stop(held: Held[Any]) -> None:
    held.stop()


def test_fail_records_the_error_and_the_span_ends_once_whoever_ends_it(
    span_exporter: InMemorySpanExporter, tracer_provider: TracerProvider
) -> None:
    genai = GenAISpans(tracer_provider)
    seen, failed = _failures()
    held = Held(lambda: genai.invoke_agent("lead"), what="test.span", failed=failed)
    assert not held.ended
    error = KeyError("boom")
    threads = [threading.Thread(target=held.fail, args=(error,)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    held.stop()
    assert held.ended
    (span,) = span_exporter.get_finished_spans()
    assert ("KeyError", StatusCode.ERROR) == (
        (span.attributes or {}).get(c.ATTR_ERROR_TYPE),
        span.status.status_code,
    )
    assert [] == seen


class _Paused(Exception):
    """A framework's pause (an interrupt): not a failure."""


@pytest.mark.parametrize("leaves", ["returns", "raises", "pauses"])
def test_current_parents_the_block_and_ends_the_span_with_what_the_block_raised(
    leaves: str, span_exporter: InMemorySpanExporter, tracer_provider: TracerProvider
) -> None:
    """The ``with`` form around a handler one hook calls: the span is current for
    the block only; the block's exception is re-raised unchanged and ends the
    span with its ``error.type`` (a pause ends it as stopped); a block that
    returns leaves the span to :meth:`Held.stop`."""
    genai = GenAISpans(tracer_provider)
    seen, failed = _failures()
    before = otel_context.get_current()
    held = Held(lambda: genai.invoke_agent("lead"), what="test.current", failed=failed)
    error: BaseException = {"raises": KeyError("k"), "pauses": _Paused()}.get(leaves, KeyError())
    with contextlib.suppress(KeyError, _Paused), held.current(passes=(_Paused,)) as value:
        assert value is trace.get_current_span()
        tracer_provider.get_tracer("t").start_span("inside").end()
        if leaves != "returns":
            raise error
    assert before is otel_context.get_current()
    assert (leaves != "returns") == held.ended
    held.stop()
    spans = {s.name: s for s in span_exporter.get_finished_spans()}
    agent = spans["invoke_agent lead"]
    assert agent.context.span_id == spans["inside"].parent.span_id  # type: ignore[union-attr]
    expected = ("KeyError", StatusCode.ERROR) if leaves == "raises" else (None, StatusCode.UNSET)
    assert expected == ((agent.attributes or {}).get(c.ATTR_ERROR_TYPE), agent.status.status_code)
    assert [] == seen


def test_a_scope_that_cannot_be_entered_or_exited_is_reported_never_raised(
    span_exporter: InMemorySpanExporter, tracer_provider: TracerProvider
) -> None:
    seen, failed = _failures()
    parent = trace.set_span_in_context(tracer_provider.get_tracer("t").start_span("parent"))

    def broken() -> contextlib.AbstractContextManager[Any]:
        raise RuntimeError("telemetry is down")

    held: Held[Any] = Held(broken, parent=parent, what="test.enter", failed=failed)
    assert (None, True) == (held.value, held.ended)
    assert parent is held.context  # hooks go on under the parent
    held.fail(ValueError("x"))  # nothing to end: nothing happens

    class ExitRaises(contextlib.AbstractContextManager[str]):
        def __enter__(self) -> str:
            return "entered"

        def __exit__(self, *exc: object) -> None:
            raise RuntimeError("exporter crashed")

    held2 = Held(ExitRaises, what="test.exit", failed=failed)
    assert "entered" == held2.value
    held2.stop()
    held2.stop()
    assert ["test.enter", "test.exit"] == seen


@contextlib.contextmanager
def _current_value(store: list[Any]) -> Iterator[str]:
    store.append(otel_context.get_current())
    yield "v"
    store.append(otel_context.get_current())


def test_the_scope_enters_and_exits_in_one_private_context_under_the_parent(
    tracer_provider: TracerProvider,
) -> None:
    """Entered in one thread, exited in another: the scope sees the same
    context at both ends (its own tokens match), the parent current."""
    seen, failed = _failures()
    parent = trace.set_span_in_context(tracer_provider.get_tracer("t").start_span("parent"))
    store: list[Any] = []
    box: list[Held[str]] = []
    t = threading.Thread(
        target=lambda: box.append(
            Held(lambda: _current_value(store), parent=parent, what="t", failed=failed)
        )
    )
    t.start()
    t.join()
    (held,) = box
    t2 = threading.Thread(target=held.stop)
    t2.start()
    t2.join()
    assert [parent, parent] == store
    assert "v" == held.value
    assert [] == seen


def test_run_spans_hold_one_iteration_at_a_time_under_the_invoke_agent(
    span_exporter: InMemorySpanExporter, tracer_provider: TracerProvider
) -> None:
    layer = DecisionLayer(default_model="m", agent_name="lead", tracer_provider=tracer_provider)
    turn = Turn(layer, "conv-1", [Message("user", "hi")], None, None, None)
    seen, failed = _failures()
    spans = RunSpans("test", failed)
    base = spans.context
    spans.open_agent(lambda: layer.genai.invoke_agent("lead", conversation_id="conv-1"))
    agent_context = spans.agent_context
    first = spans.start_iteration(turn)
    first_context = spans.context
    second = spans.start_iteration(turn)  # ends the first
    assert (0, 1) == (first.index, second.index)
    assert [c.SPAN_ITERATION] == [s.name for s in span_exporter.get_finished_spans()]
    spans.close(TimeoutError("late"))
    spans.close(None)  # once
    assert agent_context is spans.agent_context  # kept: a continuation starts under it
    assert agent_context is spans.context
    assert base is not agent_context and first_context is not agent_context
    finished = span_exporter.get_finished_spans()
    assert [c.SPAN_ITERATION, c.SPAN_ITERATION, "invoke_agent lead"] == [s.name for s in finished]
    root = finished[-1]
    assert all(s.parent.span_id == root.context.span_id for s in finished[:2])  # type: ignore[union-attr]
    assert [None, "TimeoutError", "TimeoutError"] == [
        (s.attributes or {}).get(c.ATTR_ERROR_TYPE) for s in finished
    ]
    assert [] == seen
