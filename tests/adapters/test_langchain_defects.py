"""LangChain adapter defects found from outside, each driven through the real
``create_agent`` with scripted models and recording tools (the ground truth).

What the caller sees is compared with and without seamscope; what seamscope
records is compared with what the scripted models and tools recorded.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import BaseMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from seamscope.adapters import DecisionLayer
from seamscope.adapters.langchain import SeamscopeMiddleware
from seamscope.telemetry import conventions as c

from ._langchain_support import Toolbox, ai, scripted_models

OPUS = "claude-opus-4-6"
AGENT = "analyst"
THREAD = "conv-1"


def make_layer(tracer_provider: Any, meter_provider: Any, **kwargs: Any) -> DecisionLayer:
    return DecisionLayer(
        default_model=OPUS,
        agent_name=AGENT,
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        **kwargs,
    )


def named(spans: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    return sorted((s for s in spans if s.name == name), key=lambda s: s.start_time or 0)


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in (span.attributes or {}).items()}


def message_view(message: BaseMessage) -> tuple[Any, ...]:
    """A message as the caller sees it (message ids are random per run)."""
    return (
        type(message).__name__,
        message.content,
        [(t["name"], t["args"], t["id"]) for t in getattr(message, "tool_calls", None) or []],
        getattr(message, "tool_call_id", None),
    )


def chunk_view(chunk: Any) -> dict[str, Any]:
    return {
        key: [message_view(m) for m in value] if key == "messages" else value
        for key, value in chunk.items()
    }


# -- what the caller sees ------------------------------------------------------------


@pytest.mark.parametrize("mode", ["stream", "astream"])
def test_stream_values_chunks_are_the_same_with_and_without_seamscope(
    mode: str, span_exporter: InMemorySpanExporter, tracer_provider: Any, meter_provider: Any
) -> None:
    def chunks(middleware: list[Any]) -> list[dict[str, Any]]:
        models, _ = scripted_models([OPUS], [ai(("search", {"query": "q3"}, "c1")), ai(text="ok")])
        agent = create_agent(
            models[OPUS], Toolbox().tools(), middleware=middleware, checkpointer=InMemorySaver()
        )
        payload = {"messages": [HumanMessage("sales q3")]}
        config = {"configurable": {"thread_id": THREAD}}
        if mode == "astream":

            async def collect() -> list[Any]:
                return [c async for c in agent.astream(payload, config, stream_mode="values")]

            return [chunk_view(c) for c in asyncio.run(collect())]
        return [chunk_view(c) for c in agent.stream(payload, config, stream_mode="values")]

    without = chunks([])
    layer = make_layer(tracer_provider, meter_provider)
    with_seamscope = chunks([SeamscopeMiddleware(layer)])

    assert without == with_seamscope
    # and the run was recorded: one invoke_agent, two iterations
    spans = span_exporter.get_finished_spans()
    assert 1 == len(named(spans, f"invoke_agent {AGENT}"))
    assert [0, 1] == [attrs(s)[c.ATTR_ITERATION_INDEX] for s in named(spans, c.SPAN_ITERATION)]


def test_the_checkpoint_namespace_separator_is_langgraphs() -> None:
    """Tripwire: a run is found by its agent graph's checkpoint namespace."""
    from langgraph._internal._constants import NS_SEP

    from seamscope.adapters.langchain import _translate

    assert NS_SEP == _translate.NS_SEP
