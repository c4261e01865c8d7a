"""seamscope in a Deep Agents agent, where ``create_deep_agent`` puts it.

``create_deep_agent(middleware=[...])`` replaces a middleware of its own stack by
one of the same name (a watched ``FilesystemMiddleware`` takes the place of its
own, and gets the agent's permissions copied onto it) and puts the others after
its core stack: seamscope's model hook runs inside Deep Agents' filesystem one.
Scripted chat models, Deep Agents' default state backend, no network.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from seamscope.adapters import DecisionLayer
from seamscope.adapters.langchain import SeamscopeMiddleware
from seamscope.telemetry import conventions as c

from ._langchain_support import ai, scripted_models

deepagents = pytest.importorskip(
    "deepagents", reason="Deep Agents is not installed: pip install -e '.[test]'"
)
from deepagents.middleware.filesystem import (  # noqa: E402
    FilesystemMiddleware,
    FilesystemPermission,
)

OPUS = "claude-opus-4-6"
SECRET = "/secret/x.txt"


def layer_for(tracer_provider: Any) -> DecisionLayer:
    return DecisionLayer(default_model=OPUS, agent_name="deep", tracer_provider=tracer_provider)


@pytest.mark.parametrize("mode", ["alone", "plain", "watched"])
def test_a_denied_write_stays_denied_with_seamscope_watching_the_filesystem(
    mode: str, tracer_provider: Any
) -> None:
    """Deep Agents copies the agent's permissions onto its FilesystemMiddleware
    instances only: a watched one is still one, so the rule holds."""
    script = [ai(("write_file", {"file_path": SECRET, "content": "hi"}, "c1")), ai(text="ok")]
    models, _ = scripted_models([OPUS], script)
    middleware: list[Any] = []
    if mode == "plain":
        middleware = [SeamscopeMiddleware(layer_for(tracer_provider))]
    elif mode == "watched":
        middleware = SeamscopeMiddleware(layer_for(tracer_provider)).watching(
            FilesystemMiddleware()
        )
    permissions = [FilesystemPermission(operations=["write"], paths=["/secret/**"], mode="deny")]
    agent = deepagents.create_deep_agent(
        model=models[OPUS], permissions=permissions, middleware=middleware
    )
    out = agent.invoke({"messages": [HumanMessage("write it")]})

    (answer,) = [m for m in out["messages"] if getattr(m, "tool_call_id", None) == "c1"]
    assert f"Error: permission denied for write on {SECRET}" == answer.content
    assert SECRET not in (out.get("files") or {})


def _iteration_of(span: ReadableSpan, spans: list[ReadableSpan]) -> int | None:
    by_id = {s.context.span_id: s for s in spans if s.context is not None}
    parent = by_id.get(span.parent.span_id) if span.parent is not None else None
    if parent is None or parent.name != c.SPAN_ITERATION:
        return None
    return (parent.attributes or {}).get(c.ATTR_ITERATION_INDEX)  # type: ignore[return-value]


def test_a_watched_middleware_outside_seamscope_records_each_decision_in_its_model_call(
    span_exporter: InMemorySpanExporter, tracer_provider: Any
) -> None:
    """Deep Agents' FilesystemMiddleware (watched, outermost) narrows the tools of
    every model call (the default backend cannot execute: no ``execute``):
    one decision per model call, each in that call's iteration, the first too."""
    script = [ai(("ls", {"path": "/"}, "c1")), ai(text="done")]
    models, log = scripted_models([OPUS], script)
    middleware = SeamscopeMiddleware(layer_for(tracer_provider)).watching(FilesystemMiddleware())
    agent = deepagents.create_deep_agent(model=models[OPUS], middleware=middleware)
    agent.invoke({"messages": [HumanMessage("list")]})

    assert 2 == len(log)
    assert all("execute" not in (call.tools or []) for call in log)
    spans = list(span_exporter.get_finished_spans())
    decisions = [
        s
        for s in spans
        if (s.attributes or {}).get(c.ATTR_MIDDLEWARE_NAME) == "FilesystemMiddleware"
    ]
    assert ["tool_selection", "tool_selection"] == [
        (s.attributes or {}).get(c.ATTR_MIDDLEWARE_DECISION) for s in decisions
    ]
    assert [0, 1] == [_iteration_of(s, spans) for s in decisions]
    for span in decisions:
        assert "execute" in str((span.attributes or {}).get(c.ATTR_STAGE_DROPPED))
