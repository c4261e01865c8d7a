"""The chat span in real pydantic-ai: the provider's own spans are its
children, streamed or not.

A ``FunctionModel`` stands for an instrumented provider client: it records a
span of its own (on the current context) while it answers, and logs the
call; that span's parent is the ground truth.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from seamscope.adapters import DecisionLayer
from seamscope.adapters.pydantic_ai import SeamscopeCapability

from .test_pydantic_ai import run


@pytest.mark.parametrize("mode", ["run", "run_sync", "run_stream"])
def test_the_providers_own_span_is_a_child_of_the_chat_span(
    mode: str, span_exporter: InMemorySpanExporter, tracer_provider: Any
) -> None:
    tracer = tracer_provider.get_tracer("provider")
    calls: list[str] = []

    def request(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls.append("request")
        tracer.start_span("provider request").end()
        return ModelResponse(parts=[TextPart("hello")])

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        calls.append("stream")
        tracer.start_span("provider request").end()
        yield "hello"

    model = FunctionModel(request, stream_function=stream, model_name="m-1")
    layer = DecisionLayer(default_model="m-1", agent_name="lead", tracer_provider=tracer_provider)
    agent = Agent(model, name="lead", capabilities=[SeamscopeCapability(layer)])
    output, _ = run(agent, "hi", mode)

    assert "hello" == output
    assert ["stream" if mode == "run_stream" else "request"] == calls  # ground truth
    spans = {s.name: s for s in span_exporter.get_finished_spans()}
    chat, provider = spans["chat m-1"], spans["provider request"]
    assert provider.parent is not None and chat.context is not None
    assert chat.context.span_id == provider.parent.span_id
