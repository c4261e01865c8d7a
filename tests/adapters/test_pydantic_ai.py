"""The pydantic-ai adapter inside pydantic-ai's real agent loop.

The models are ``FunctionModel`` s that log which model was asked with
which tools and messages; the tools log their name, arguments, call id and
whether they raised. Every telemetry claim below is compared with that
ground truth. The run loop, the tool execution (parallel calls run
concurrently: compared by call id), streaming, message history and
structured output are pydantic-ai's own; no network.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.capabilities import AbstractCapability, Instrumentation
from pydantic_ai.models.instrumented import InstrumentationSettings
from pydantic_ai.toolsets import AbstractToolset

from seamscope.adapters import DecisionLayer
from seamscope.adapters.pydantic_ai import SeamscopeCapability
from seamscope.decisions import DispatchContext, ModelConfig, RolePaletteStage, ToolCallPolicy
from seamscope.loop import RECALL_TOOL
from seamscope.telemetry import conventions as c

from ._pydantic_ai_support import (
    BIG_REPORT_CHARS,
    ModelCall,
    Toolbox,
    call,
    scripted_models,
    step,
    text,
)

OPUS = "claude-opus-4-6"
HAIKU = "claude-haiku-4-5"
AGENT = "analyst"
PALETTES = {
    "analyst": ["run_block", "fetch_data", "search", "big_report", "flaky", RECALL_TOOL],
}
PALETTE = ("run_block", "fetch_data", "search", "big_report", "flaky")


# -- the scenario ----------------------------------------------------------------


def is_sales(ctx: DispatchContext) -> bool:
    return "sales" in ctx.user_text.lower()


def emitted_sales_block(ctx: DispatchContext) -> bool:
    """Guard: reads the just-emitted assistant message (the POST context's last)."""
    emitted = ctx.messages[-1]
    blocks = [tc.args["block"] for tc in emitted.tool_calls if tc.name == "run_block"]
    return bool(blocks) and all(block.startswith("sales_") for block in blocks)


def block_to_source(args: Any, ctx: DispatchContext) -> dict[str, Any]:
    return {"source": args["block"], "rows": args.get("limit", 10)}


POLICIES = (
    ToolCallPolicy(
        "sales_data_read",
        match=is_sales,
        when_tool="run_block",
        redirect_to="fetch_data",
        model=ModelConfig(HAIKU),
        args_transform=block_to_source,
        guard=emitted_sales_block,
    ),
    ToolCallPolicy(
        "archive_to_web", match=lambda ctx: True, when_tool="search", redirect_to="web_search"
    ),
)


def make_layer(tracer_provider: Any, meter_provider: Any = None, **kwargs: Any) -> DecisionLayer:
    options: dict[str, Any] = {
        "default_model": OPUS,
        "policies": POLICIES,
        "stages": [RolePaletteStage(resolver=PALETTES.get)],
        "agent_name": AGENT,
        "offload_id_factory": lambda: "off-1",
    }
    options.update(kwargs)
    return DecisionLayer(tracer_provider=tracer_provider, meter_provider=meter_provider, **options)


def analyst(model: Any, box: Toolbox, capability: Any, **kwargs: Any) -> Agent[Any, Any]:
    tools = box.tools()
    names = ["run_block", "fetch_data", "search", "web_search", "big_report", "flaky"]
    capabilities = [capability, *kwargs.pop("capabilities", [])]
    return Agent(
        model,
        name=AGENT,
        instructions="You analyse sales.",
        tools=[tools[n] for n in names],
        capabilities=capabilities,
        **kwargs,
    )


def run(agent: Agent[Any, Any], prompt: str, mode: str, **kwargs: Any) -> Any:
    """One run in ``mode``: ``run``, ``run_sync`` or ``run_stream`` (consumed);
    returns the output and the messages."""
    if mode == "run_sync":
        result = agent.run_sync(prompt, **kwargs)
        return result.output, result.all_messages()

    async def go() -> Any:
        if mode == "run":
            result = await agent.run(prompt, **kwargs)
            return result.output, result.all_messages()
        async with agent.run_stream(prompt, **kwargs) as streamed:
            output = await streamed.get_output()
        return output, streamed.all_messages()

    return asyncio.run(go())


# -- span helpers -----------------------------------------------------------------


def named(spans: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    return sorted((s for s in spans if s.name == name), key=lambda s: s.start_time or 0)


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in (span.attributes or {}).items()}


def pick(span: ReadableSpan, *keys: str) -> dict[str, Any]:
    values = attrs(span)
    return {k: values[k] for k in keys if k in values}


def tree(span: ReadableSpan, spans: Sequence[ReadableSpan]) -> tuple[str, list[Any]]:
    """``(name, [child trees])``, children sorted by name (parallel tools race)."""
    by_parent: dict[int, list[ReadableSpan]] = {}
    for s in spans:
        if s.parent is not None:
            by_parent.setdefault(s.parent.span_id, []).append(s)

    def build(node: ReadableSpan) -> tuple[str, list[Any]]:
        assert node.context is not None
        kids = by_parent.get(node.context.span_id, [])
        return node.name, sorted((build(k) for k in kids), key=lambda t: t[0])

    return build(span)


def iteration_tree(
    chat_model: str | None,
    *,
    tools: Sequence[str] = (),
    dispatches: int = 0,
    gate: int = 0,
    stages: int = 1,
) -> tuple[str, list[Any]]:
    kids: list[Any] = [
        (c.SPAN_SELECT_TOOLS, [(c.SPAN_STAGE, [])] * stages),
        (c.SPAN_SEAM_PRE_MODEL, []),
    ]
    if chat_model is not None:
        kids.append((f"chat {chat_model}", []))
    if dispatches:
        kids.append((c.SPAN_SEAM_POST_MODEL, [(c.SPAN_DISPATCH, [])] * dispatches))
    kids.extend((f"execute_tool {t}", []) for t in tools)
    kids.extend((c.SPAN_OFFLOAD_GATE, []) for _ in range(gate))
    return c.SPAN_ITERATION, sorted(kids, key=lambda t: t[0])


def root(spans: Sequence[ReadableSpan], name: str = f"invoke_agent {AGENT}") -> ReadableSpan:
    roots = [s for s in spans if s.parent is None]
    assert [name] == [r.name for r in roots]
    assert {roots[0].context.trace_id} == {s.context.trace_id for s in spans}
    return roots[0]


class Recording(SpanProcessor):
    """Counts spans started and ended (to prove every span ends)."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.ended: list[str] = []

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        self.started.append(span.name)

    def on_end(self, span: ReadableSpan) -> None:
        self.ended.append(span.name)


# -- parallel tool calls: a redirect, a palette-gate drop, an untouched call --------------


@pytest.mark.parametrize("mode", ["run", "run_sync", "run_stream"])
def test_parallel_calls_redirect_drop_and_untouched(
    mode: str,
    span_exporter: InMemorySpanExporter,
    tracer_provider: Any,
    meter_provider: Any,
    captured_logs: list[dict[str, Any]],
) -> None:
    layer = make_layer(tracer_provider, meter_provider)
    models, calls = scripted_models(
        [OPUS, HAIKU],
        [
            step(
                call("run_block", {"block": "sales_q3", "limit": 5}, "c1"),
                call("search", {"query": "q3 trends"}, "c2"),
                call("fetch_data", {"source": "crm"}, "c3"),
                usage=(1_000, 50, 200),
            ),
            step(text("Q3 sales grew 12%."), usage=(1_300, 30, 0)),
        ],
    )
    box = Toolbox()
    seamscope = SeamscopeCapability(layer, {HAIKU: models[HAIKU]})
    agent = analyst(models[OPUS], box, seamscope)

    output, history = run(agent, "How did Q3 sales go?", mode, conversation_id="conv-1")
    spans = list(span_exporter.get_finished_spans())

    # -- ground truth: what the model was asked and what ran ----------------------
    assert "Q3 sales grew 12%." == output
    assert [(HAIKU, PALETTE, mode == "run_stream")] * 2 == [
        (m.model, m.tools, m.streamed) for m in calls
    ]
    executed = sorted((r.call_id, r.name, r.args, r.raised) for r in box.runs)
    assert [
        ("c1", "fetch_data", {"source": "sales_q3", "rows": 5}, False),
        ("c2", "search", {"query": "q3 trends"}, False),
        ("c3", "fetch_data", {"source": "crm", "rows": 10}, False),
    ] == executed
    # the history the next request got holds the rewritten call, call id kept
    assert [("c1", "fetch_data"), ("c2", "search"), ("c3", "fetch_data")] == calls[1].calls()
    rewritten = [p for m in history for p in getattr(m, "parts", ()) if p.part_kind == "tool-call"]
    if mode != "run_stream":  # the scripted stream sends no provider item ids
        assert [None, "fc_c2", "fc_c3"] == [p.id for p in rewritten]

    # -- telemetry, compared with the ground truth --------------------------------
    top = root(spans)
    assert {
        c.ATTR_GEN_AI_OPERATION_NAME: "invoke_agent",
        c.ATTR_GEN_AI_AGENT_NAME: AGENT,
        c.ATTR_GEN_AI_CONVERSATION_ID: "conv-1",
    } == attrs(top)
    expected_tree = (
        f"invoke_agent {AGENT}",
        [
            iteration_tree(HAIKU, tools=["fetch_data", "fetch_data", "search"], dispatches=3),
            iteration_tree(HAIKU),
        ],
    )
    assert expected_tree == tree(top, spans)
    chats = named([s for s in spans if s.name.startswith("chat ")], f"chat {HAIKU}")
    assert [f"chat {m.model}" for m in calls] == [s.name for s in chats]
    if mode != "run_stream":  # a streamed FunctionModel estimates its usage
        assert [(1_000, 50, 200), (1_300, 30, None)] == [
            (
                attrs(s)[c.ATTR_GEN_AI_USAGE_INPUT_TOKENS],
                attrs(s)[c.ATTR_GEN_AI_USAGE_OUTPUT_TOKENS],
                attrs(s).get(c.ATTR_GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS),
            )
            for s in chats
        ]
    assert [list(m.tools) for m in calls] == [
        attrs(s)[c.ATTR_SELECTION_SELECTED] for s in named(spans, c.SPAN_SELECT_TOOLS)
    ]
    assert [[*PALETTE[:3], "web_search", *PALETTE[3:]]] * 2 == [
        attrs(s)[c.ATTR_SELECTION_OFFERED] for s in named(spans, c.SPAN_SELECT_TOOLS)
    ]
    pre = named(spans, c.SPAN_SEAM_PRE_MODEL)
    assert [{c.ATTR_POLICY_WINNER: "sales_data_read", c.ATTR_GEN_AI_REQUEST_MODEL: HAIKU}] * 2 == [
        pick(s, c.ATTR_POLICY_WINNER, c.ATTR_GEN_AI_REQUEST_MODEL) for s in pre
    ]
    dispatch = {
        attrs(s)[c.ATTR_GEN_AI_TOOL_CALL_ID]: pick(
            s,
            c.ATTR_DISPATCH_EMITTED_TOOL,
            c.ATTR_DISPATCH_FINAL_TOOL,
            c.ATTR_POLICY_WINNER,
            c.ATTR_DISPATCH_PALETTE_GATE,
            c.ATTR_DISPATCH_GUARD,
        )
        for s in named(spans, c.SPAN_DISPATCH)
    }
    assert {
        "c1": {
            c.ATTR_DISPATCH_EMITTED_TOOL: "run_block",
            c.ATTR_DISPATCH_FINAL_TOOL: "fetch_data",
            c.ATTR_POLICY_WINNER: "sales_data_read",
            c.ATTR_DISPATCH_PALETTE_GATE: "kept",
            c.ATTR_DISPATCH_GUARD: "passed",
        },
        "c2": {
            c.ATTR_DISPATCH_EMITTED_TOOL: "search",
            c.ATTR_DISPATCH_FINAL_TOOL: "search",
            c.ATTR_POLICY_WINNER: "archive_to_web",
            c.ATTR_DISPATCH_PALETTE_GATE: "dropped",
            c.ATTR_DISPATCH_GUARD: "none",
        },
        "c3": {
            c.ATTR_DISPATCH_EMITTED_TOOL: "fetch_data",
            c.ATTR_DISPATCH_FINAL_TOOL: "fetch_data",
            c.ATTR_DISPATCH_PALETTE_GATE: "kept",
            c.ATTR_DISPATCH_GUARD: "none",
        },
    } == dispatch
    # every final tool is what really ran, call id for call id
    assert {r.call_id: r.name for r in box.runs} == {
        i: d[c.ATTR_DISPATCH_FINAL_TOOL] for i, d in dispatch.items()
    }
    assert sorted((r.call_id, r.name) for r in box.runs) == sorted(
        (attrs(s)[c.ATTR_GEN_AI_TOOL_CALL_ID], attrs(s)[c.ATTR_GEN_AI_TOOL_NAME])
        for s in spans
        if s.name.startswith("execute_tool ")
    )
    post = named(spans, c.SPAN_SEAM_POST_MODEL)[0]
    assert {c.ATTR_SEAM_TOOL_CALLS: 3, c.ATTR_SEAM_REWRITTEN: 1} == pick(
        post, c.ATTR_SEAM_TOOL_CALLS, c.ATTR_SEAM_REWRITTEN
    )
    drops = [e for e in captured_logs if e["event"] == c.LOG_PALETTE_GATE_DROP]
    assert [("archive_to_web", "search", "web_search", "c2")] == [
        (e["policy"], e["emitted_tool"], e["target"], e["tool_call_id"]) for e in drops
    ]


# -- a conversation (message_history) with an offload and a later recall -------------------


def test_conversation_with_offload_and_recall(
    span_exporter: InMemorySpanExporter, tracer_provider: Any, meter_provider: Any
) -> None:
    """Two runs, the second given the first's messages: big_report's 20 000-token
    output is offloaded, the second run recalls it.

    Hand-computed (claude-opus-4-6 at $5 / $25 per 1M input / output tokens,
    output 80 000 chars = 20 000 tokens, H=5, p=0.5, stub 80 tokens):

    * predicted: reprefill 20 000 x 5 x $5/M = $0.50; stub carry 80 x 5 x $5/M
      = $0.002; expected recall 0.5 x (12 500 x $5/M + 250 x $25/M) = $0.034375;
      net $0.463625.
    * carried turns: the request after big_report (run 1) and the first request
      of run 2 carry the stub; the request after the recall has the full text
      back (the recall expanded it), so it is not counted: 2 turns.
    * realized savings: 2 x 20 000 x $5/M = $0.20; stub carry 2 x 80 x $5/M =
      $0.0008; the recall: 20 000 tokens back as input ($0.10) + the recalling
      request's 20 output tokens x $25/M ($0.0005) = $0.1005.
    * realized net: $0.20 - $0.0008 - $0.1005 = $0.0987 (a gain).
    """
    layer = make_layer(tracer_provider, meter_provider)
    models, calls = scripted_models(
        [OPUS],
        [
            step(call("big_report", {"topic": "q3"}, "c1"), usage=(1_200, 40, 0)),
            step(text("The report is ready."), usage=(1_300, 30, 0)),
            step(call(RECALL_TOOL, {"offload_id": "off-1"}, "c2"), usage=(1_400, 20, 0)),
            step(text("Here is the full report."), usage=(21_000, 25, 0)),
        ],
    )
    box = Toolbox()
    seamscope = SeamscopeCapability(layer)
    agent = analyst(models[OPUS], box, seamscope)

    first = agent.run_sync("Write the Q3 report.", conversation_id="conv-7")
    first_spans = list(span_exporter.get_finished_spans())
    span_exporter.clear()
    final = agent.run_sync("Show me the full report again.", message_history=first.all_messages())
    second_spans = list(span_exporter.get_finished_spans())
    assert "conv-7" == final.conversation_id  # pydantic-ai carries it in the history
    settlements = layer.end_conversation("conv-7")

    # -- ground truth ----------------------------------------------------------------
    assert "Here is the full report." == final.output
    assert [("c1", "big_report", False)] == [(r.call_id, r.name, r.raised) for r in box.runs]
    stub = calls[1].outputs()["c1"]
    assert stub.startswith("[offloaded off-1: 20000 tokens from big_report;")
    assert stub == calls[2].outputs()["c1"] == calls[3].outputs()["c1"]
    # the model got the full text back from the recall
    assert BIG_REPORT_CHARS == len(calls[3].outputs()["c2"])
    assert BIG_REPORT_CHARS == len(seamscope.stored_output("off-1") or "")
    # the recall tool is offered only once there is something to recall
    assert [PALETTE, (*PALETTE, RECALL_TOOL), (*PALETTE, RECALL_TOOL), (*PALETTE, RECALL_TOOL)] == [
        m.tools for m in calls
    ]

    # -- telemetry -----------------------------------------------------------------------
    assert tree(root(first_spans), first_spans) == (
        f"invoke_agent {AGENT}",
        [iteration_tree(OPUS, tools=["big_report"], dispatches=1, gate=1), iteration_tree(OPUS)],
    )
    assert tree(root(second_spans), second_spans) == (
        f"invoke_agent {AGENT}",
        [iteration_tree(OPUS, tools=[RECALL_TOOL], dispatches=1), iteration_tree(OPUS)],
    )
    gate = named(first_spans, c.SPAN_OFFLOAD_GATE)[0]
    assert {
        c.ATTR_OFFLOAD_FIRE: True,
        c.ATTR_OFFLOAD_ID: "off-1",
        c.ATTR_OFFLOAD_REASON_CODE: "net_positive",
        c.ATTR_GEN_AI_TOOL_CALL_ID: "c1",
    } == pick(
        gate,
        c.ATTR_OFFLOAD_FIRE,
        c.ATTR_OFFLOAD_ID,
        c.ATTR_OFFLOAD_REASON_CODE,
        c.ATTR_GEN_AI_TOOL_CALL_ID,
    )
    assert pytest.approx(0.463625) == attrs(gate)["seamscope.offload.net_saving_usd"]
    tool_span = next(s for s in first_spans if s.name == "execute_tool big_report")
    assert gate.parent.span_id == tool_span.parent.span_id  # type: ignore[union-attr]

    assert 1 == len(settlements)
    s = settlements[0]
    assert ("off-1", "conv-7", OPUS, 2, 1) == (
        s.offload_id,
        s.conversation_id,
        s.model,
        s.turns_carried,
        s.recalls,
    )
    assert Decimal("0.4636250") == s.predicted_net_saving
    assert Decimal("0.2") == s.realized_savings
    assert Decimal("0.0002625") == s.stub_carry_cost
    assert Decimal("0.1005") == s.recall_cost
    assert Decimal("0.0992375") == s.realized_savings - s.stub_carry_cost - s.recall_cost


def test_a_recall_from_another_conversation_finds_nothing(tracer_provider: Any) -> None:
    layer = make_layer(tracer_provider)
    models, calls = scripted_models(
        [OPUS],
        [
            step(call("big_report", {"topic": "q3"}, "c1")),
            step(text("ready")),
            step(call(RECALL_TOOL, {"offload_id": "off-1"}, "c2")),
            step(text("nothing")),
        ],
    )
    seamscope = SeamscopeCapability(layer)
    agent = analyst(models[OPUS], Toolbox(), seamscope)
    agent.run_sync("Write the Q3 report.", conversation_id="conv-a")
    # another conversation: the recall tool is not offered, and not callable
    agent.run_sync("Recall it.", conversation_id="conv-b")
    assert PALETTE == calls[2].tools
    answer = str(calls[3].outputs()["c2"])  # pydantic-ai's answer to an unknown tool
    assert answer.startswith("Unknown tool name: 'recall_tool_result'")
    assert "xxxx" not in answer


# -- streaming, abandoned part way ------------------------------------------------------


def test_a_stream_abandoned_part_way_ends_every_span(
    span_exporter: InMemorySpanExporter, tracer_provider: TracerProvider
) -> None:
    recording = Recording()
    tracer_provider.add_span_processor(recording)
    layer = make_layer(tracer_provider)
    models, calls = scripted_models(
        [OPUS],
        [step(call("fetch_data", {"source": "crm"}, "c1")), step(text("never read"))],
    )
    models.hold_from(1)  # the second request stops mid-stream
    box = Toolbox()
    agent = analyst(models[OPUS], box, SeamscopeCapability(layer))

    async def go() -> None:
        async with agent.run_stream("crm data", conversation_id="conv-s") as streamed:
            async for _ in streamed.stream_text(delta=True):
                break  # the second request is under way: stop reading

    asyncio.run(asyncio.wait_for(go(), 10))
    assert [("c1", "fetch_data")] == [(r.call_id, r.name) for r in box.runs]
    assert 2 == len(calls)
    assert sorted(recording.started) == sorted(recording.ended)
    spans = list(span_exporter.get_finished_spans())
    top = root(spans)
    assert c.ATTR_ERROR_TYPE in attrs(top)
    assert 2 == len(named(spans, f"chat {OPUS}"))
    assert 2 == len(named(spans, c.SPAN_ITERATION))


# -- a tool that raises ---------------------------------------------------------------------


def test_a_tool_that_raises(
    span_exporter: InMemorySpanExporter, tracer_provider: TracerProvider
) -> None:
    """pydantic-ai lets a tool's exception end the run: every span ends with it."""
    recording = Recording()
    tracer_provider.add_span_processor(recording)
    layer = make_layer(tracer_provider)
    models, calls = scripted_models(
        [OPUS],
        [step(call("flaky", {"query": "q"}, "c1"), call("fetch_data", {"source": "s"}, "c2"))],
    )
    box = Toolbox()
    agent = analyst(models[OPUS], box, SeamscopeCapability(layer))
    with pytest.raises(RuntimeError, match="backend down"):
        agent.run_sync("status?")
    spans = list(span_exporter.get_finished_spans())

    assert 1 == len(calls)  # the run ended with the tool's exception
    assert ("c1", "flaky", True) in {(r.call_id, r.name, r.raised) for r in box.runs}
    assert sorted(recording.started) == sorted(recording.ended)
    tools = {
        attrs(s)[c.ATTR_GEN_AI_TOOL_CALL_ID]: s for s in spans if s.name.startswith("execute_tool ")
    }
    # c2 runs concurrently and is cancelled when c1 raises, before or after its body ran
    assert {r.call_id for r in box.runs} <= set(tools) == {"c1", "c2"}
    if "c2" not in {r.call_id for r in box.runs}:
        assert "CancelledError" == attrs(tools["c2"])[c.ATTR_ERROR_TYPE]
    assert "RuntimeError" == attrs(tools["c1"])[c.ATTR_ERROR_TYPE]
    assert "ERROR" == tools["c1"].status.status_code.name
    assert "RuntimeError" == attrs(root(spans))[c.ATTR_ERROR_TYPE]
    assert "RuntimeError" == attrs(named(spans, c.SPAN_ITERATION)[0])[c.ATTR_ERROR_TYPE]


# -- structured output --------------------------------------------------------------------------


class Report(BaseModel):
    quarter: str
    growth: float


@pytest.mark.parametrize("mode", ["run", "run_stream"])
def test_structured_output(
    mode: str, span_exporter: InMemorySpanExporter, tracer_provider: Any
) -> None:
    """``final_result`` (pydantic-ai's output tool) is never selected, never sent to
    the POST seam (a policy for it does not fire) and never counted as a tool run;
    its call is a ``seamscope.dispatch`` span under the iteration, marked
    ``structured_output``, dispatched as emitted (the rule LangChain's
    ``ToolStrategy`` answer follows)."""
    grab = ToolCallPolicy(
        "grab_output", match=lambda ctx: True, when_tool="final_result", redirect_to="fetch_data"
    )
    layer = make_layer(tracer_provider, policies=(*POLICIES, grab))
    models, calls = scripted_models(
        [OPUS, HAIKU],
        [
            step(call("fetch_data", {"source": "sales"}, "c1")),
            step(call("final_result", {"quarter": "Q3", "growth": 0.12}, "c2")),
        ],
    )
    box = Toolbox()
    agent = analyst(
        models[OPUS], box, SeamscopeCapability(layer, {HAIKU: models[HAIKU]}), output_type=Report
    )
    output, _ = run(agent, "Q3 sales as a report", mode)
    spans = list(span_exporter.get_finished_spans())

    assert Report(quarter="Q3", growth=0.12) == output
    assert [(HAIKU, PALETTE, ("final_result",))] * 2 == [
        (m.model, m.tools, m.output_tools) for m in calls
    ]
    assert [("c1", "fetch_data")] == [(r.call_id, r.name) for r in box.runs]
    answer = (
        c.SPAN_ITERATION,
        sorted(
            [
                (c.SPAN_SELECT_TOOLS, [(c.SPAN_STAGE, [])]),
                (c.SPAN_SEAM_PRE_MODEL, []),
                (f"chat {HAIKU}", []),
                (c.SPAN_DISPATCH, []),
            ],
            key=lambda t: t[0],
        ),
    )
    assert tree(root(spans), spans) == (
        f"invoke_agent {AGENT}",
        [iteration_tree(HAIKU, tools=["fetch_data"], dispatches=1), answer],
    )
    dispatches = named(spans, c.SPAN_DISPATCH)
    assert [("c1", None, "fetch_data"), ("c2", True, "final_result")] == [
        (
            attrs(s)[c.ATTR_GEN_AI_TOOL_CALL_ID],
            attrs(s).get(c.ATTR_DISPATCH_STRUCTURED_OUTPUT),
            attrs(s)[c.ATTR_DISPATCH_FINAL_TOOL],
        )
        for s in dispatches
    ]
    assert "grab_output" not in attrs(dispatches[1]).values()
    assert all(
        "final_result" not in attrs(s)[c.ATTR_SELECTION_SELECTED]
        for s in named(spans, c.SPAN_SELECT_TOOLS)
    )


@pytest.mark.parametrize("mode", ["run", "run_stream"])
def test_no_policy_redirects_the_structured_answer(
    mode: str, span_exporter: InMemorySpanExporter, tracer_provider: Any
) -> None:
    """A catch-all redirect policy (every call of every tool) leaves pydantic-ai's
    ``final_result`` alone: the caller's output is the same with and without
    seamscope."""
    steps = [step(call("final_result", {"quarter": "Q4", "growth": 0.3}, "c1"))]
    everything = ToolCallPolicy("everything", match=lambda ctx: True, redirect_to="fetch_data")
    layer = make_layer(tracer_provider, policies=[everything])
    models, _ = scripted_models([OPUS], steps)
    box = Toolbox()
    seamscope = SeamscopeCapability(layer, {})
    with_seamscope, _ = run(analyst(models[OPUS], box, seamscope, output_type=Report), "Q4", mode)
    plain_models, _ = scripted_models([OPUS], steps)
    tools = Toolbox().tools()
    plain = Agent(
        plain_models[OPUS],
        name=AGENT,
        instructions="You analyse sales.",
        tools=[tools["fetch_data"]],
        output_type=Report,
    )
    without, _ = run(plain, "Q4", mode)

    assert Report(quarter="Q4", growth=0.3) == without == with_seamscope
    assert [] == box.runs
    [dispatch] = named(list(span_exporter.get_finished_spans()), c.SPAN_DISPATCH)
    assert ("final_result", True) == (
        attrs(dispatch)[c.ATTR_DISPATCH_FINAL_TOOL],
        attrs(dispatch)[c.ATTR_DISPATCH_STRUCTURED_OUTPUT],
    )


# -- 64 concurrent runs ----------------------------------------------------------------------------


def _scenario(n: int) -> list[Any]:
    if n % 2:
        return [
            step(
                call("run_block", {"block": f"sales_{n}"}, f"c{n}a"),
                call("search", {"query": str(n)}, f"c{n}b"),
            ),
            step(text(f"done {n}")),
        ]
    return [step(call("fetch_data", {"source": f"s{n}"}, f"c{n}a")), step(text(f"done {n}"))]


def _decisions(spans: Sequence[ReadableSpan]) -> dict[str, list[Any]]:
    """Per conversation: the PRE models, the dispatches and the selected tools, in order."""
    by_id = {s.context.span_id: s for s in spans}

    def conversation(span: ReadableSpan) -> str:
        node = span
        while node.parent is not None:
            node = by_id[node.parent.span_id]
        return str(attrs(node)[c.ATTR_GEN_AI_CONVERSATION_ID])

    out: dict[str, list[Any]] = {}
    for s in sorted(spans, key=lambda s: s.start_time or 0):
        a = attrs(s)
        if s.name == c.SPAN_SEAM_PRE_MODEL:
            item: Any = ("pre", a[c.ATTR_GEN_AI_REQUEST_MODEL])
        elif s.name == c.SPAN_DISPATCH:
            item = (
                "dispatch",
                a[c.ATTR_GEN_AI_TOOL_CALL_ID],
                a[c.ATTR_DISPATCH_FINAL_TOOL],
                a.get(c.ATTR_DISPATCH_PALETTE_GATE, None),
            )
        elif s.name == c.SPAN_SELECT_TOOLS:
            item = ("select", tuple(a[c.ATTR_SELECTION_SELECTED]))
        else:
            continue
        out.setdefault(conversation(s), []).append(item)
    return {k: sorted(v, key=repr) for k, v in out.items()}


def test_64_concurrent_runs_decide_like_sequential_ones(
    span_exporter: InMemorySpanExporter, tracer_provider: Any
) -> None:
    layer = make_layer(tracer_provider)
    box = Toolbox()
    seamscope = SeamscopeCapability(layer)
    logs: dict[int, list[ModelCall]] = {}

    async def one(n: int) -> Any:
        models, log = scripted_models([OPUS], _scenario(n))
        logs[n] = log
        agent = analyst(models[OPUS], box, seamscope)
        prompt = f"sales {n}" if n % 2 else f"data {n}"
        return (await agent.run(prompt, conversation_id=f"conv-{n}")).output

    async def sequential() -> None:
        for n in range(64):
            await one(n)

    async def concurrent() -> list[Any]:
        return await asyncio.gather(*(one(n) for n in range(64)))

    asyncio.run(sequential())
    expected = _decisions(span_exporter.get_finished_spans())
    expected_runs = sorted((r.call_id, r.name, tuple(sorted(r.args.items()))) for r in box.runs)
    span_exporter.clear()
    box.runs.clear()
    outputs = asyncio.run(concurrent())
    spans = list(span_exporter.get_finished_spans())

    assert [f"done {n}" for n in range(64)] == outputs
    assert expected == _decisions(spans)
    assert 64 == len(expected)
    assert expected_runs == sorted(
        (r.call_id, r.name, tuple(sorted(r.args.items()))) for r in box.runs
    )
    # every span is in its own run's trace: one invoke_agent root per trace
    roots = {s.context.trace_id: s for s in spans if s.parent is None}
    assert 64 == len(roots)
    assert {f"invoke_agent {AGENT}"} == {r.name for r in roots.values()}
    by_id = {s.context.span_id: s for s in spans}
    for s in spans:
        node = s
        while node.parent is not None:
            assert node.parent.span_id in by_id  # no dangling parent
            node = by_id[node.parent.span_id]
        assert node is roots[s.context.trace_id]
        assert attrs(node)[c.ATTR_GEN_AI_CONVERSATION_ID] == attrs(s).get(
            c.ATTR_GEN_AI_CONVERSATION_ID, attrs(node)[c.ATTR_GEN_AI_CONVERSATION_ID]
        )


# -- side by side with pydantic-ai's own instrumentation -----------------------------------------


@pytest.mark.parametrize("how", ["capability", "agent.instrument"])
def test_side_by_side_with_pydantic_ai_instrumentation(
    how: str, span_exporter: InMemorySpanExporter, tracer_provider: TracerProvider
) -> None:
    """pydantic-ai's spans and seamscope's land in one trace, under the caller's
    span; seamscope's iterations are inside pydantic-ai's ``invoke_agent`` and
    seamscope opens no GenAI span of its own."""
    layer = make_layer(tracer_provider)
    models, calls = scripted_models(
        [OPUS, HAIKU],
        [step(call("run_block", {"block": "sales_q3"}, "c1")), step(text("12%"))],
    )
    box = Toolbox()
    settings = InstrumentationSettings(tracer_provider=tracer_provider)
    extra = [Instrumentation(settings=settings)] if how == "capability" else []
    agent = analyst(
        models[OPUS], box, SeamscopeCapability(layer, {HAIKU: models[HAIKU]}), capabilities=extra
    )
    if how == "agent.instrument":
        agent.instrument = settings
    tracer = tracer_provider.get_tracer("caller")
    with tracer.start_as_current_span("request") as request:
        output, _ = run(agent, "Q3 sales?", "run", conversation_id="conv-i")
    spans = list(span_exporter.get_finished_spans())

    assert "12%" == output
    assert [("c1", "fetch_data")] == [(r.call_id, r.name) for r in box.runs]
    assert [HAIKU, HAIKU] == [m.model for m in calls]
    assert {request.get_span_context().trace_id} == {s.context.trace_id for s in spans}
    ours = [s for s in spans if s.instrumentation_scope.name == "seamscope"]
    theirs = [s for s in spans if s.instrumentation_scope.name.startswith("pydantic-ai")]
    assert theirs, "pydantic-ai recorded its own spans"
    assert not [s for s in ours if not s.name.startswith("seamscope.")]  # no GenAI span twice
    invoke = named(theirs, f"invoke_agent {AGENT}")
    assert 1 == len(invoke)
    assert request.get_span_context().span_id == invoke[0].parent.span_id  # type: ignore[union-attr]
    iterations = named(spans, c.SPAN_ITERATION)
    assert 2 == len(iterations)
    assert {invoke[0].context.span_id} == {s.parent.span_id for s in iterations}  # type: ignore[union-attr]
    assert [f"chat {HAIKU}", f"chat {HAIKU}"] == [
        s.name for s in theirs if s.name.startswith("chat ")
    ]
    assert ["execute_tool fetch_data"] == [
        s.name for s in theirs if s.name.startswith("execute_tool ")
    ]
    by_id = {s.context.span_id: s for s in spans}
    for s in ours:  # every decision span hangs under pydantic-ai's invoke_agent
        node = s
        while node.parent is not None and node.parent.span_id in by_id:
            node = by_id[node.parent.span_id]
            if node is invoke[0]:
                break
        assert node is invoke[0]
    assert [tree(s, spans) for s in iterations] == [
        iteration_tree(None, dispatches=1),
        iteration_tree(None),
    ]


# -- nothing patched, configuration errors ------------------------------------------------


def test_nothing_is_patched_and_bad_arguments_fail(tracer_provider: Any) -> None:
    import pydantic_ai
    from pydantic_ai.capabilities import AbstractCapability

    hooks = ("prepare_tools", "wrap_model_request", "after_model_request", "wrap_tool_execute")
    before = (
        pydantic_ai.Agent.run,
        pydantic_ai.Agent.iter,
        pydantic_ai.Agent.run_stream,
        *(getattr(AbstractCapability, h) for h in hooks),
    )
    layer = make_layer(tracer_provider)
    models, _ = scripted_models([OPUS], [step(text("hi"))])
    agent = analyst(models[OPUS], Toolbox(), SeamscopeCapability(layer))
    run(agent, "hi", "run")
    assert before == (
        pydantic_ai.Agent.run,
        pydantic_ai.Agent.iter,
        pydantic_ai.Agent.run_stream,
        *(getattr(AbstractCapability, h) for h in hooks),
    )

    with pytest.raises(ValueError, match="layer"):
        SeamscopeCapability(object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"models\['x'\]"):
        SeamscopeCapability(layer, {"x": object()})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="max_stored_outputs"):
        SeamscopeCapability(layer, max_stored_outputs=0)
    with pytest.raises(ValueError, match="genai_spans"):
        SeamscopeCapability(layer, genai_spans="yes")  # type: ignore[arg-type]


# -- the documented snippet ----------------------------------------------------------------------

SNIPPET_PAGE = "docs/adapters/pydantic-ai.md"


def _readme_snippet() -> str:
    text = (Path(__file__).parents[2] / SNIPPET_PAGE).read_text(encoding="utf-8")
    # the example with OpenAI's models (the page's first one runs offline, scripted)
    section = text.split("## With OpenAI's models", 1)[1]
    [block] = re.findall(r"```python\n(.*?)```", section, re.S)
    return block


def test_readme_snippet_runs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, global_providers_kept: list[str]
) -> None:
    """The page's snippet as written, with only the two model objects replaced
    by scripted ones (a dummy key, so that the OpenAI provider constructs; no
    model uses it)."""
    snippet = _readme_snippet()
    mini, full = "gpt-4.1-mini", "gpt-4.1"
    models, calls = scripted_models(
        [full, mini],
        [step(call("big_report", {"topic": "q3"}, "c1")), step(text("Q3 sales grew 12%."))],
    )
    source = snippet
    for name in (mini, full):
        pattern = rf'OpenAIResponsesModel\("{re.escape(name)}"\)'
        assert 1 == len(re.findall(pattern, source))
        source = re.sub(pattern, f"SCRIPTED[{name!r}]", source)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-offline-test")
    for name in ("OTEL_SDK_DISABLED", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_TRACES_EXPORTER"):
        monkeypatch.delenv(name, raising=False)
    namespace: dict[str, Any] = {"SCRIPTED": models, "__name__": "readme"}
    exec(compile(source, SNIPPET_PAGE, "exec"), namespace)
    # configure() set the global providers, as an application asks it to
    assert ["set_tracer_provider", "set_meter_provider"] == global_providers_kept

    assert [mini, mini] == [m.model for m in calls]  # the sales policy's model
    assert ("big_report", RECALL_TOOL) == (calls[0].tools[0], calls[1].tools[-1])
    assert calls[1].outputs()["c1"].startswith("[offloaded ")
    [settlement] = namespace["settled"]
    assert (mini, 1) == (settlement.model, settlement.turns_carried)
    written = (tmp_path / "pydantic-ai-openai-trace.jsonl").read_text(encoding="utf-8")
    for name in (
        f"invoke_agent {AGENT}",
        c.SPAN_OFFLOAD_GATE,
        f"chat {mini}",
        "execute_tool big_report",
    ):
        assert f'"{name}"' in written


class _Spy(AbstractCapability[Any]):
    """A capability that logs the tools its ``prepare_tools`` is given, each step."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, ...]] = []

    async def prepare_tools(self, ctx: Any, tool_defs: list[Any]) -> list[Any]:
        self.seen.append(tuple(t.name for t in tool_defs))
        return tool_defs


@dataclasses.dataclass
class _Opaque(AbstractToolset[Any]):
    """A toolset wrapper that is not a pydantic-ai ``WrapperToolset``."""

    inner: AbstractToolset[Any]

    @property
    def id(self) -> str | None:
        return None

    async def get_tools(self, ctx: Any) -> dict[str, Any]:
        return await self.inner.get_tools(ctx)

    async def call_tool(self, name: str, tool_args: dict[str, Any], ctx: Any, tool: Any) -> Any:
        return await self.inner.call_tool(name, tool_args, ctx, tool)


class _Wraps(AbstractCapability[Any]):
    def get_wrapper_toolset(self, toolset: Any) -> Any:
        return _Opaque(toolset)


@pytest.mark.parametrize("beside", ["spy", "opaque wrapper"])
def test_the_recall_tool_is_offered_once_there_is_something_to_recall_whatever_wraps_the_tools(
    beside: str, tracer_provider: Any
) -> None:
    """The recall tool is one of the run's tools (no toolset of its own beside
    the agent's): beneath the capabilities' ``prepare_tools``, so another
    capability's hook sees it like any tool; where another capability's wrapper
    hides that layer, added outside it where seamscope's selection kept it.
    Either way the model is offered it once a stub is in the prompt, and the
    recall brings the output back."""
    layer = make_layer(tracer_provider)
    models, calls = scripted_models(
        [OPUS],
        [
            step(call("big_report", {"topic": "q3"}, "c1")),
            step(call(RECALL_TOOL, {"offload_id": "off-1"}, "c2")),
            step(text("Here is the full report.")),
        ],
    )
    box = Toolbox()
    other = _Spy() if beside == "spy" else _Wraps()
    agent = analyst(models[OPUS], box, SeamscopeCapability(layer), capabilities=[other])
    assert "Here is the full report." == agent.run_sync("The Q3 report.").output
    assert [PALETTE, (*PALETTE, RECALL_TOOL), (*PALETTE, RECALL_TOOL)] == [m.tools for m in calls]
    assert BIG_REPORT_CHARS == len(calls[2].outputs()["c2"])
    if isinstance(other, _Spy):
        # the recall tool reached its hook in every step (seamscope's selection,
        # first in the list, narrowed the step's tools before it)
        assert [PALETTE, (*PALETTE, RECALL_TOOL), (*PALETTE, RECALL_TOOL)] == other.seen
