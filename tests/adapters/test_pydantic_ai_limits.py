"""pydantic-ai's ``UsageLimits`` in the real agent loop: a refused step is no iteration.

The scripted model logs every request it really answered (the ground truth).
"""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic_ai import Agent
from pydantic_ai.exceptions import UsageLimitExceeded
from pydantic_ai.usage import UsageLimits

from seamscope.adapters import DecisionLayer
from seamscope.adapters.pydantic_ai import SeamscopeCapability
from seamscope.telemetry import conventions as c

from ._pydantic_ai_support import Toolbox, call, scripted_models, step, text

MODEL = "claude-opus-4-6"
AGENT = "analyst"


def test_a_request_limit_leaves_no_iteration_without_a_model_call(
    span_exporter: InMemorySpanExporter, tracer_provider: Any
) -> None:
    models, log = scripted_models(
        [MODEL],
        [
            step(call("search", {"query": "a"}, "c1")),
            step(call("search", {"query": "b"}, "c2")),
            step(text("never asked")),
        ],
    )
    box = Toolbox()
    layer = DecisionLayer(default_model=MODEL, agent_name=AGENT, tracer_provider=tracer_provider)
    agent = Agent(
        models[MODEL], tools=[box.tools()["search"]], capabilities=[SeamscopeCapability(layer)]
    )
    with pytest.raises(UsageLimitExceeded):
        agent.run_sync("search twice", usage_limits=UsageLimits(request_limit=2))

    assert 2 == len(log)  # ground truth: two model requests, the third refused
    assert ["search", "search"] == [r.name for r in box.runs]
    spans = span_exporter.get_finished_spans()
    iterations = sorted(
        (s for s in spans if s.name == c.SPAN_ITERATION), key=lambda s: s.start_time or 0
    )
    assert [0, 1] == [(s.attributes or {})[c.ATTR_ITERATION_INDEX] for s in iterations]
    assert len(log) == len([s for s in spans if s.name == f"chat {MODEL}"])
    assert len(log) == len([s for s in spans if s.name == c.SPAN_SELECT_TOOLS])
    (agent_span,) = [s for s in spans if s.name == f"invoke_agent {AGENT}"]
    assert "UsageLimitExceeded" == (agent_span.attributes or {})[c.ATTR_ERROR_TYPE]
