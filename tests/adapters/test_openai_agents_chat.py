"""The chat span in the real Agents SDK: the provider's own spans are its
children, streamed or not.

A scripted model stands for a provider client instrumented with
OpenTelemetry: it opens a span of its own (on the current context) while it
answers, and logs the call; that span's parent is the ground truth.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from agents import Agent, set_tracing_disabled
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from seamscope.adapters import DecisionLayer
from seamscope.adapters.openai_agents import SeamscopeRunner

from ._openai_agents_support import ScriptedModel, step, text
from .test_openai_agents import run


@pytest.fixture(autouse=True)
def _sdk_tracing_off(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    set_tracing_disabled(True)
    yield
    set_tracing_disabled(False)


class _Instrumented(ScriptedModel):
    """A scripted model whose client records a span of its own per call."""

    def __init__(self, tracer: trace.Tracer) -> None:
        super().__init__("m-1", [step(text("hello"))], [])
        self._tracer = tracer

    async def get_response(self, *args: Any, **kwargs: Any) -> Any:
        with self._tracer.start_as_current_span("provider request"):
            return await super().get_response(*args, **kwargs)

    async def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        stream = super().stream_response(*args, **kwargs)
        with self._tracer.start_as_current_span("provider request"):
            first = await stream.__anext__()
        yield first
        async for event in stream:
            yield event


@pytest.mark.parametrize("mode", ["run", "run_sync", "run_streamed"])
def test_the_providers_own_span_is_a_child_of_the_chat_span(
    mode: str, span_exporter: InMemorySpanExporter, tracer_provider: Any
) -> None:
    model = _Instrumented(tracer_provider.get_tracer("provider"))
    layer = DecisionLayer(default_model="m-1", agent_name="lead", tracer_provider=tracer_provider)
    result = run(SeamscopeRunner(layer), Agent(name="lead", model=model), "hi", mode)

    assert "hello" == result.final_output
    assert 1 == len(model._log)  # ground truth: one model call
    spans = {s.name: s for s in span_exporter.get_finished_spans()}
    chat, provider = spans["chat m-1"], spans["provider request"]
    assert provider.parent is not None and chat.context is not None
    assert chat.context.span_id == provider.parent.span_id
