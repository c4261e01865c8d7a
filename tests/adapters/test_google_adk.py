"""The Google ADK plugin inside ADK's real agent loop: nested runs (an agent
run as a tool, a transfer to a sub-agent), parallel branches, containment.

The scripted models log every call (which model, streamed or not) and the
tools log what ran: the ground truth the spans are checked against. The run
loop, tool execution, streaming and sessions are ADK's own; no network.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from google.adk.agents import LlmAgent, ParallelAgent
from google.adk.agents.run_config import RunConfig, StreamingMode
from google.adk.apps import App
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.adk.tools.agent_tool import AgentTool
from google.genai import types
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from seamscope.adapters import DecisionLayer
from seamscope.adapters.google_adk import SeamscopePlugin
from seamscope.telemetry import conventions as c

from ._google_adk_support import Toolbox, call, scripted_models, step, text

LEAD = "lead"
KEEP = {"invoke_agent", c.SPAN_ITERATION, "chat", "execute_tool"}


def tree(span: ReadableSpan, spans: Sequence[ReadableSpan], keep: set[str]) -> Any:
    """``(name, index, [children])`` of the spans named in ``keep`` (prefixes)."""
    kids = sorted(
        (s for s in spans if s.parent is not None and s.parent.span_id == span.context.span_id),  # type: ignore[union-attr]
        key=lambda s: s.start_time or 0,
    )
    return (
        span.name,
        (span.attributes or {}).get(c.ATTR_ITERATION_INDEX),
        [tree(k, spans, keep) for k in kids if k.name.startswith(tuple(keep))],
    )


def run(root: LlmAgent, plugin: SeamscopePlugin, prompt: str, *, streamed: bool = False) -> str:
    """One invocation of ``root`` in a fresh session named ``conv-1``; the last text."""
    runner = Runner(
        app=App(name="app", root_agent=root, plugins=[plugin]),
        session_service=InMemorySessionService(),
    )
    mode = StreamingMode.SSE if streamed else StreamingMode.NONE

    async def go() -> str:
        await runner.session_service.create_session(
            app_name="app", user_id="u", session_id="conv-1"
        )
        last = ""
        async for event in runner.run_async(
            user_id="u",
            session_id="conv-1",
            new_message=types.Content(role="user", parts=[types.Part(text=prompt)]),
            run_config=RunConfig(streaming_mode=mode),
        ):
            parts = event.content.parts if event.content and not event.partial else None
            texts = [p.text for p in parts or () if p.text]
            last = "".join(texts) or last
        return last

    return asyncio.run(go())


def layer(tracer_provider: Any, **kwargs: Any) -> DecisionLayer:
    return DecisionLayer(
        default_model="outer-m", agent_name=LEAD, tracer_provider=tracer_provider, **kwargs
    )


# -- an agent run as a tool ------------------------------------------------------------------


@pytest.mark.parametrize("streamed", [False, True])
def test_an_agent_tool_runs_as_its_own_invoke_agent_under_the_tools_span(
    streamed: bool, span_exporter: InMemorySpanExporter, tracer_provider: Any
) -> None:
    models, log = scripted_models(
        ["outer-m", "inner-m"],
        [
            step(call("researcher", {"request": "q3"}, "o1")),
            step(call("search", {"query": "q3"}, "i1")),
            step(text("Q3 grew.")),
            step(text("Done: Q3 grew.")),
        ],
    )
    box = Toolbox()
    search = next(t for t in box.tools() if t.__name__ == "search")
    researcher = LlmAgent(
        name="researcher", model=models["inner-m"], description="Research.", tools=[search]
    )
    lead = LlmAgent(name=LEAD, model=models["outer-m"], tools=[AgentTool(researcher)])
    output = run(lead, SeamscopePlugin(layer(tracer_provider)), "How did Q3 go?", streamed=streamed)

    # ground truth: which model answered each call, and the tool that really ran
    assert "Done: Q3 grew." == output
    assert ["outer-m", "inner-m", "inner-m", "outer-m"] == [m.model for m in log]
    assert ["i1"] == [r.call_id for r in box.runs]
    spans = span_exporter.get_finished_spans()
    (root,) = [s for s in spans if s.parent is None]
    assert (
        f"invoke_agent {LEAD}",
        None,
        [
            (
                c.SPAN_ITERATION,
                0,
                [
                    ("chat outer-m", None, []),
                    (
                        "execute_tool researcher",
                        None,
                        [
                            (
                                "invoke_agent researcher",
                                None,
                                [
                                    (
                                        c.SPAN_ITERATION,
                                        0,
                                        [
                                            ("chat inner-m", None, []),
                                            ("execute_tool search", None, []),
                                        ],
                                    ),
                                    (c.SPAN_ITERATION, 1, [("chat inner-m", None, [])]),
                                ],
                            )
                        ],
                    ),
                ],
            ),
            (c.SPAN_ITERATION, 1, [("chat outer-m", None, [])]),
        ],
    ) == tree(root, spans, KEEP)
    # the nested run is part of the caller's conversation
    assert {"conv-1"} == {
        (s.attributes or {}).get(c.ATTR_GEN_AI_CONVERSATION_ID)
        for s in spans
        if c.ATTR_GEN_AI_CONVERSATION_ID in (s.attributes or {})
    }


def test_an_agent_tool_whose_run_fails_ends_its_spans_under_the_tool(
    span_exporter: InMemorySpanExporter, tracer_provider: Any
) -> None:
    """The nested run's tool raises: the nested run and the agent tool fail with
    it, and so does the calling run; every span ends with its ``error.type``."""
    models, _ = scripted_models(
        ["outer-m", "inner-m"],
        [
            step(call("researcher", {"request": "q3"}, "o1")),
            step(call("flaky", {"query": "q"}, "i1")),
        ],
    )
    box = Toolbox()
    flaky = next(t for t in box.tools() if t.__name__ == "flaky")
    researcher = LlmAgent(name="researcher", model=models["inner-m"], tools=[flaky])
    lead = LlmAgent(name=LEAD, model=models["outer-m"], tools=[AgentTool(researcher)])
    with pytest.raises(RuntimeError, match="backend down"):
        run(lead, SeamscopePlugin(layer(tracer_provider)), "How did Q3 go?")

    assert [("flaky", True)] == [(r.name, r.raised) for r in box.runs]
    spans = span_exporter.get_finished_spans()
    failed = sorted(
        s.name for s in spans if (s.attributes or {}).get(c.ATTR_ERROR_TYPE) == "RuntimeError"
    )
    assert [
        "execute_tool flaky",
        "execute_tool researcher",
        f"invoke_agent {LEAD}",
        "invoke_agent researcher",
        c.SPAN_ITERATION,
        c.SPAN_ITERATION,
    ] == failed


# -- a transfer to a sub-agent ---------------------------------------------------------------


@pytest.mark.parametrize("streamed", [False, True])
def test_after_a_transfer_the_iterations_name_the_agent_that_ran(
    streamed: bool, span_exporter: InMemorySpanExporter, tracer_provider: Any
) -> None:
    models, log = scripted_models(
        ["outer-m", "helper-m"],
        [
            step(call("transfer_to_agent", {"agent_name": "helper"}, "t1")),
            step(text("Helped.")),
        ],
    )
    helper = LlmAgent(name="helper", model=models["helper-m"], description="Helps.")
    lead = LlmAgent(name=LEAD, model=models["outer-m"], sub_agents=[helper])
    output = run(lead, SeamscopePlugin(layer(tracer_provider)), "Help me.", streamed=streamed)

    assert "Helped." == output
    assert ["outer-m", "helper-m"] == [m.model for m in log]
    spans = span_exporter.get_finished_spans()
    (root,) = [s for s in spans if s.parent is None]
    assert (
        f"invoke_agent {LEAD}",
        None,
        [
            (
                c.SPAN_ITERATION,
                0,
                [("chat outer-m", None, []), ("execute_tool transfer_to_agent", None, [])],
            ),
            (c.SPAN_ITERATION, 1, [("chat helper-m", None, [])]),
        ],
    ) == tree(root, spans, KEEP)
    agents = [
        (s.name, (s.attributes or {}).get(c.ATTR_GEN_AI_AGENT_NAME))
        for s in sorted(spans, key=lambda s: s.start_time or 0)
        if s.name in (c.SPAN_ITERATION, c.SPAN_SEAM_PRE_MODEL)
    ]
    assert [
        (c.SPAN_ITERATION, LEAD),
        (c.SPAN_SEAM_PRE_MODEL, LEAD),
        (c.SPAN_ITERATION, "helper"),
        (c.SPAN_SEAM_PRE_MODEL, "helper"),
    ] == agents


# -- parallel branches -------------------------------------------------------------------------


def test_parallel_branches_each_have_their_iterations_under_the_run(
    span_exporter: InMemorySpanExporter, tracer_provider: Any
) -> None:
    """A ParallelAgent runs two agents in one invocation at once: each branch's
    model calls and tools are iterations of their own, all under the run's
    ``invoke_agent``, none ended by the other branch."""
    a_models, _ = scripted_models(
        ["a-m"], [step(call("search", {"query": "a"}, "a1")), step(text("A."))]
    )
    b_models, _ = scripted_models(
        ["b-m"], [step(call("search", {"query": "b"}, "b1")), step(text("B."))]
    )
    box = Toolbox()
    search = next(t for t in box.tools() if t.__name__ == "search")
    both = ParallelAgent(
        name="both",
        sub_agents=[
            LlmAgent(name="a", model=a_models["a-m"], tools=[search]),
            LlmAgent(name="b", model=b_models["b-m"], tools=[search]),
        ],
    )
    run(both, SeamscopePlugin(layer(tracer_provider)), "Search both.")

    assert ["a1", "b1"] == sorted(r.call_id for r in box.runs)
    spans = span_exporter.get_finished_spans()
    (root,) = [s for s in spans if s.parent is None]
    assert f"invoke_agent {LEAD}" == root.name
    iterations = [s for s in spans if s.name == c.SPAN_ITERATION]
    assert 4 == len(iterations)
    assert {root.context.span_id} == {s.parent.span_id for s in iterations if s.parent}
    tools = [s for s in spans if s.name == "execute_tool search"]
    chats = [s for s in spans if s.name.startswith("chat ")]

    def sibling_chats(tool: ReadableSpan) -> list[str]:
        parent = None if tool.parent is None else tool.parent.span_id
        return [x.name for x in chats if x.parent is not None and x.parent.span_id == parent]

    # each tool span sits in the iteration of the model call that emitted it
    assert {"a1": ["chat a-m"], "b1": ["chat b-m"]} == {
        (t.attributes or {}).get(c.ATTR_GEN_AI_TOOL_CALL_ID): sibling_chats(t) for t in tools
    }


# -- seamscope's own failures are contained ------------------------------------------------------


def test_a_failing_role_or_scope_is_contained_and_the_run_goes_on(
    span_exporter: InMemorySpanExporter,
    tracer_provider: Any,
    captured_logs: list[dict[str, Any]],
) -> None:
    def broken(_: Any) -> Any:
        raise KeyError("no role here")

    models, _ = scripted_models(
        ["outer-m"], [step(call("search", {"query": "q"}, "s1")), step(text("Found."))]
    )
    box = Toolbox()
    search = next(t for t in box.tools() if t.__name__ == "search")
    lead = LlmAgent(name=LEAD, model=models["outer-m"], tools=[search])
    plugin = SeamscopePlugin(layer(tracer_provider), role=broken, scope=broken)

    assert "Found." == run(lead, plugin, "Search q.")
    assert ["s1"] == [r.call_id for r in box.runs]
    errors = sorted(
        (e["hook"], e["error_type"])
        for e in captured_logs
        if e.get("event") == c.LOG_TELEMETRY_ERROR
    )
    assert [
        ("google_adk.role", "KeyError"),
        ("google_adk.role", "KeyError"),
        ("google_adk.scope", "KeyError"),
    ] == errors
    assert 2 == sum(1 for s in span_exporter.get_finished_spans() if s.name == c.SPAN_ITERATION)


def test_a_model_object_of_another_kind_is_never_swapped_in(
    tracer_provider: Any, captured_logs: list[dict[str, Any]]
) -> None:
    """ADK calls the agent's model object: a PRE-seam choice whose model is of
    another kind is reported as unavailable, and the request keeps its model."""
    from seamscope.decisions import ModelConfig, ToolCallPolicy

    models, log = scripted_models(["outer-m", "other-m"], [step(text("Fine."))])

    class Other(type(models["other-m"])):  # type: ignore[misc]
        pass

    to_other = ToolCallPolicy("to_other", match=lambda ctx: True, model=ModelConfig("other-m"))
    plugin = SeamscopePlugin(
        layer(tracer_provider, policies=[to_other]),
        {"other-m": Other(model="other-m", answer=models["other-m"].answer)},
    )
    run(LlmAgent(name=LEAD, model=models["outer-m"]), plugin, "Hello.")

    assert ["outer-m"] == [m.model for m in log]
    [event] = [e for e in captured_logs if e.get("event") == c.LOG_MODEL_UNAVAILABLE]
    assert ("other-m", "outer-m", "to_other") == (
        event["chosen_model"],
        event["used_model"],
        event["policy"],
    )


def test_a_model_call_answered_by_a_later_plugin_ends_its_span_and_not_the_run(
    span_exporter: InMemorySpanExporter, tracer_provider: Any
) -> None:
    """A cache plugin after seamscope's answers the call itself: no model ran,
    the call's span ends when the answer comes back, and the run ends well."""
    from google.adk.models.llm_response import LlmResponse
    from google.adk.plugins.base_plugin import BasePlugin

    class Cache(BasePlugin):
        async def before_model_callback(self, **kwargs: Any) -> LlmResponse:
            return LlmResponse(content=types.Content(role="model", parts=[types.Part(text="Hit.")]))

    models, log = scripted_models(["outer-m"], [])
    lead = LlmAgent(name=LEAD, model=models["outer-m"])
    runner = Runner(
        app=App(
            name="app",
            root_agent=lead,
            plugins=[SeamscopePlugin(layer(tracer_provider)), Cache("cache")],
        ),
        session_service=InMemorySessionService(),
    )

    async def go() -> list[str]:
        await runner.session_service.create_session(app_name="app", user_id="u", session_id="s")
        message = types.Content(role="user", parts=[types.Part(text="Hello.")])
        return [
            p.text or ""
            async for e in runner.run_async(user_id="u", session_id="s", new_message=message)
            for p in (e.content.parts or [] if e.content else [])
        ]

    assert ["Hit."] == asyncio.run(go())
    assert [] == log
    spans = span_exporter.get_finished_spans()
    assert [None, None, None] == [
        (s.attributes or {}).get(c.ATTR_ERROR_TYPE)
        for s in spans
        if s.name in (f"invoke_agent {LEAD}", c.SPAN_ITERATION, "chat outer-m")
    ]


# -- with ADK's own tracing --------------------------------------------------------------------


def test_with_adks_tracing_nested_and_transferred_runs_join_adks_spans(
    monkeypatch: pytest.MonkeyPatch, span_exporter: InMemorySpanExporter, tracer_provider: Any
) -> None:
    """ADK records its spans in the same provider (its modules' tracer replaced
    for this test): each seamscope iteration is a child of ADK's
    ``invoke_agent`` of the agent that ran it, the agent tool's run included,
    and seamscope opens no inference, agent or tool span of its own."""
    from google.adk.flows.llm_flows.tools import _batch_executor
    from google.adk.telemetry import node_tracing, tracing

    for module in (tracing, node_tracing, _batch_executor):
        monkeypatch.setattr(module, "tracer", tracer_provider.get_tracer("gcp.vertex.agent"))
    models, log = scripted_models(
        ["outer-m", "inner-m", "helper-m"],
        [
            step(call("researcher", {"request": "q3"}, "o1")),
            step(call("search", {"query": "q3"}, "i1")),
            step(text("Q3 grew.")),
            step(call("transfer_to_agent", {"agent_name": "helper"}, "t1")),
            step(text("Helped.")),
        ],
    )
    box = Toolbox()
    search = next(t for t in box.tools() if t.__name__ == "search")
    researcher = LlmAgent(
        name="researcher", model=models["inner-m"], description="Research.", tools=[search]
    )
    helper = LlmAgent(name="helper", model=models["helper-m"], description="Helps.")
    lead = LlmAgent(
        name=LEAD, model=models["outer-m"], tools=[AgentTool(researcher)], sub_agents=[helper]
    )
    assert "Helped." == run(lead, SeamscopePlugin(layer(tracer_provider)), "Go.", streamed=True)

    assert ["outer-m", "inner-m", "inner-m", "outer-m", "helper-m"] == [m.model for m in log]
    spans = span_exporter.get_finished_spans()
    by_id = {s.context.span_id: s for s in spans}
    parents = [
        (by_id[s.parent.span_id].name, (s.attributes or {}).get(c.ATTR_GEN_AI_AGENT_NAME))
        for s in sorted(spans, key=lambda s: s.start_time or 0)
        if s.name == c.SPAN_ITERATION and s.parent is not None
    ]
    assert [
        (f"invoke_agent {LEAD}", LEAD),
        ("invoke_agent researcher", "researcher"),
        ("invoke_agent researcher", "researcher"),
        (f"invoke_agent {LEAD}", LEAD),
        ("invoke_agent helper", "helper"),
    ] == parents
    mine = [
        s.name
        for s in spans
        if s.instrumentation_scope and s.instrumentation_scope.name != "gcp.vertex.agent"
    ]
    assert [] == [n for n in mine if n.startswith(("invoke_agent", "chat", "execute_tool"))]
    assert 1 == len({s.context.trace_id for s in spans})


def test_the_pre_seams_model_parameters_reach_the_request(tracer_provider: Any) -> None:
    """A ModelConfig's parameters that are GenerateContentConfig fields go into the
    request's config (the others are not the model's to read)."""
    from google.adk.models.llm_request import LlmRequest

    from seamscope.decisions import ModelConfig, ToolCallPolicy

    seen: list[tuple[str | None, float | None, int | None]] = []

    def answer(request: LlmRequest, streamed: bool) -> Any:
        seen.append((request.model, request.config.temperature, request.config.max_output_tokens))
        return step(text("Cool."))

    models, _ = scripted_models(["outer-m"], [])
    cool = ToolCallPolicy(
        "cool",
        match=lambda ctx: True,
        model=ModelConfig("fast-m", {"temperature": 0.2, "max_output_tokens": 64, "seed_x": 1}),
    )
    lead = LlmAgent(name=LEAD, model=type(models["outer-m"])(model="outer-m", answer=answer))
    run(lead, SeamscopePlugin(layer(tracer_provider, policies=[cool]), {"fast-m": "fast-m"}), "Hi.")

    assert [("fast-m", 0.2, 64)] == seen
