"""The OpenAI Agents SDK adapter inside the SDK's real ``Runner``.

The models are scripted ``agents.models.interface.Model`` implementations
that log which model was asked with which tools and input; the tools log
their name, arguments, call id and whether they raised. Every telemetry
claim below is compared with that ground truth. The run loop, the tool
execution, handoffs, sessions and streaming are the SDK's own; no network,
no key (the SDK's own tracing is off, except in the side-by-side test with
OpenInference, which replaces the SDK's exporter).
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
from collections.abc import Iterator, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from agents import (
    Agent,
    RunConfig,
    RunHooks,
    SQLiteSession,
    handoff,
    set_tracing_disabled,
)
from agents.exceptions import MaxTurnsExceeded
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import BaseModel

from seamscope.adapters import DecisionLayer
from seamscope.adapters.openai_agents import SeamscopeRunner
from seamscope.decisions import (
    DispatchContext,
    ModelConfig,
    RolePaletteStage,
    ToolCallPolicy,
)
from seamscope.loop import RECALL_TOOL
from seamscope.telemetry import conventions as c

from ._openai_agents_support import (
    BIG_REPORT_CHARS,
    ModelCall,
    ScriptedModel,
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
    "analyst": ["run_block", "fetch_data", "search", "big_report", "flaky", "fatal", RECALL_TOOL],
    "triage": ["search", "transfer_to_billing"],
    "billing": ["lookup_invoice"],
}


@pytest.fixture(autouse=True)
def _sdk_tracing_off(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The SDK's own exporter posts to OpenAI when a key is set: no key, tracing off."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    set_tracing_disabled(True)
    yield
    set_tracing_disabled(False)


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


def analyst(model: Any, box: Toolbox, runner: SeamscopeRunner, **kwargs: Any) -> Agent[Any]:
    tools = box.tools()
    names = ["run_block", "fetch_data", "search", "web_search", "big_report", "flaky", "fatal"]
    return Agent(
        name=AGENT,
        instructions="You analyse sales.",
        model=model,
        tools=[*(tools[n] for n in names), runner.recall_tool],
        **kwargs,
    )


def run(runner: SeamscopeRunner, agent: Agent[Any], input: Any, mode: str, **kwargs: Any) -> Any:
    """One run in ``mode``: ``run``, ``run_sync`` or ``run_streamed`` (consumed)."""
    if mode == "run_sync":
        return runner.run_sync(agent, input, **kwargs)

    async def go() -> Any:
        if mode == "run":
            return await runner.run(agent, input, **kwargs)
        result = runner.run_streamed(agent, input, **kwargs)
        async for _ in result.stream_events():
            pass
        return result

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
    chat_model: str, *, tools: Sequence[str] = (), dispatches: int = 0, gate: int = 0
) -> tuple[str, list[Any]]:
    kids: list[Any] = [
        (c.SPAN_SELECT_TOOLS, [(c.SPAN_STAGE, [])]),
        (c.SPAN_SEAM_PRE_MODEL, []),
        (f"chat {chat_model}", []),
    ]
    if dispatches:
        kids.append((c.SPAN_SEAM_POST_MODEL, [(c.SPAN_DISPATCH, [])] * dispatches))
    kids.extend((f"execute_tool {t}", []) for t in tools)
    kids.extend((c.SPAN_OFFLOAD_GATE, []) for _ in range(gate))
    return c.SPAN_ITERATION, sorted(kids, key=lambda t: t[0])


def root(spans: Sequence[ReadableSpan]) -> ReadableSpan:
    roots = [s for s in spans if s.parent is None]
    assert [f"invoke_agent {AGENT}"] == [r.name for r in roots]
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


class UserHooks(RunHooks[Any]):
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    async def on_tool_start(self, context: Any, agent: Any, tool: Any) -> None:
        self.events.append(("start", context.tool_call_id))

    async def on_tool_end(self, context: Any, agent: Any, tool: Any, result: Any) -> None:
        self.events.append(("end", context.tool_call_id))


@pytest.mark.parametrize("mode", ["run", "run_sync", "run_streamed"])
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
    runner = SeamscopeRunner(layer, {HAIKU: models[HAIKU]})
    agent = analyst(models[OPUS], box, runner)
    user_config = RunConfig(workflow_name="sales")
    user_hooks = UserHooks()
    snapshot = {f.name: getattr(user_config, f.name) for f in dataclasses.fields(RunConfig)}

    result = run(
        runner,
        agent,
        "How did Q3 sales go?",
        mode,
        conversation="conv-1",
        run_config=user_config,
        hooks=user_hooks,
    )
    spans = list(span_exporter.get_finished_spans())

    # -- ground truth: what the model was asked and what ran ----------------------
    assert "Q3 sales grew 12%." == result.final_output
    palette = ["run_block", "fetch_data", "search", "big_report", "flaky", "fatal"]
    assert [(HAIKU, tuple(palette), mode == "run_streamed")] * 2 == [
        (m.model, m.tools, m.streamed) for m in calls
    ]
    executed = sorted((r.call_id, r.name, r.args, r.raised) for r in box.runs)
    assert [
        ("c1", "fetch_data", {"source": "sales_q3", "rows": 5}, False),
        ("c2", "search", {"query": "q3 trends"}, False),
        ("c3", "fetch_data", {"source": "crm", "rows": 10}, False),
    ] == executed
    # the history the next model call got holds the rewritten call, id kept
    second_input = calls[1].input
    assert [("c1", "fetch_data"), ("c2", "search"), ("c3", "fetch_data")] == [
        (item["call_id"], item["name"])
        for item in second_input
        if item.get("type") == "function_call"
    ]
    # the caller's hooks still saw every tool; its RunConfig is untouched
    assert {("start", i) for i in ("c1", "c2", "c3")} | {
        ("end", i) for i in ("c1", "c2", "c3")
    } == set(user_hooks.events)
    assert snapshot == {f.name: getattr(user_config, f.name) for f in dataclasses.fields(RunConfig)}

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
    chats = [s for s in spans if s.name.startswith("chat ")]
    assert [f"chat {m.model}" for m in calls] == [s.name for s in chats]
    assert [(1_000, 50, 200), (1_300, 30, None)] == [
        (
            attrs(s)[c.ATTR_GEN_AI_USAGE_INPUT_TOKENS],
            attrs(s)[c.ATTR_GEN_AI_USAGE_OUTPUT_TOKENS],
            attrs(s).get(c.ATTR_GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS),
        )
        for s in sorted(chats, key=lambda s: s.start_time or 0)
    ]
    assert [list(m.tools) for m in calls] == [
        attrs(s)[c.ATTR_SELECTION_SELECTED] for s in named(spans, c.SPAN_SELECT_TOOLS)
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


# -- a conversation (session) with an offload and a later recall ------------------------


@pytest.mark.parametrize("mode", ["run", "run_streamed"])
def test_conversation_with_offload_and_recall(
    mode: str, span_exporter: InMemorySpanExporter, tracer_provider: Any, meter_provider: Any
) -> None:
    """Two runs on one SQLiteSession: big_report's 20 000-token output is offloaded,
    the next run recalls it.

    Hand-computed (claude-opus-4-6 at $5 / $25 per 1M input / output tokens,
    output 80 000 chars = 20 000 tokens, H=5, p=0.5, stub 80 tokens):

    * predicted: reprefill 20 000 x 5 x $5/M = $0.50; stub carry 80 x 5 x $5/M
      = $0.002; expected recall 0.5 x (12 500 x $5/M + 250 x $25/M) = $0.034375;
      net $0.463625.
    * carried turns: the model call after big_report (run 1) and the first call
      of run 2 carry the stub; the call after the recall carries the full text
      again (the recall expanded it), so it is not counted: 2 turns.
    * realized savings: 2 x 20 000 x $5/M = $0.20; stub carry: the stub really
      sent, 105 characters (26.25 tokens), 2 x 26.25 x $5/M = $0.0002625; the
      recall: 20 000 tokens back as input ($0.10) + the recalling call's 20
      output tokens x $25/M ($0.0005) = $0.1005.
    * realized net: $0.20 - $0.0002625 - $0.1005 = $0.0992375 (a gain).
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
    runner = SeamscopeRunner(layer)
    agent = analyst(models[OPUS], box, runner)
    session = SQLiteSession("conv-7")

    run(runner, agent, "Write the Q3 report.", mode, session=session)
    first = list(span_exporter.get_finished_spans())
    span_exporter.clear()
    final = run(runner, agent, "Show me the full report again.", mode, session=session)
    second = list(span_exporter.get_finished_spans())
    settlements = layer.end_conversation("conv-7")

    # -- ground truth ----------------------------------------------------------------
    assert "Here is the full report." == final.final_output
    assert [("c1", "big_report", False)] == [(r.call_id, r.name, r.raised) for r in box.runs]
    stub = calls[1].outputs()["c1"]
    assert stub.startswith("[offloaded off-1: 20000 tokens from big_report;")
    assert stub == calls[2].outputs()["c1"] == calls[3].outputs()["c1"]
    # the model got the full text back from the recall, and the session keeps it
    assert BIG_REPORT_CHARS == len(calls[3].outputs()["c2"])
    assert BIG_REPORT_CHARS == len(runner.stored_output("off-1") or "")
    stored = asyncio.run(session.get_items())
    assert BIG_REPORT_CHARS == len(
        next(
            i["output"]
            for i in stored
            if i.get("call_id") == "c1"  # type: ignore[union-attr]
            and i.get("type") == "function_call_output"
        )
    )
    # recall is offered only once there is something to recall
    palette = ("run_block", "fetch_data", "search", "big_report", "flaky", "fatal")
    assert [palette, (*palette, RECALL_TOOL), (*palette, RECALL_TOOL), (*palette, RECALL_TOOL)] == [
        m.tools for m in calls
    ]

    # -- telemetry -----------------------------------------------------------------------
    assert tree(root(first), first) == (
        f"invoke_agent {AGENT}",
        [iteration_tree(OPUS, tools=["big_report"], dispatches=1, gate=1), iteration_tree(OPUS)],
    )
    assert tree(root(second), second) == (
        f"invoke_agent {AGENT}",
        [iteration_tree(OPUS, tools=[RECALL_TOOL], dispatches=1), iteration_tree(OPUS)],
    )
    gate = named(first, c.SPAN_OFFLOAD_GATE)[0]
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
    # the gate span follows the execute_tool span it judged, in the same iteration
    tool_span = next(s for s in first if s.name == "execute_tool big_report")
    assert gate.parent.span_id == tool_span.parent.span_id  # type: ignore[union-attr]
    assert (tool_span.end_time or 0) <= (gate.start_time or 0)

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


def test_manual_history_carries_the_stub(
    span_exporter: InMemorySpanExporter, tracer_provider: Any
) -> None:
    """Without a session: the caller passes ``result.to_input_list()`` back; the
    conversation id is given, so the stub follows the output by its call id."""
    layer = make_layer(tracer_provider)
    models, calls = scripted_models(
        [OPUS],
        [
            step(call("big_report", {"topic": "q3"}, "c1")),
            step(text("ready")),
            step(text("still here")),
        ],
    )
    runner = SeamscopeRunner(layer)
    agent = analyst(models[OPUS], Toolbox(), runner)
    first = run(runner, agent, "Write the Q3 report.", "run", conversation="conv-9")
    history = [*first.to_input_list(), {"role": "user", "content": "and now?"}]
    run(runner, agent, history, "run", conversation="conv-9")
    assert calls[1].outputs()["c1"] == calls[2].outputs()["c1"]
    assert calls[2].outputs()["c1"].startswith("[offloaded off-1:")
    [settled] = layer.end_conversation("conv-9")
    assert 2 == settled.turns_carried


def test_the_recall_tool_is_offered_while_the_input_holds_a_stub(tracer_provider: Any) -> None:
    """The recall tool is offered to a model call whose input holds a stub,
    not to one whose input holds none though the offload store holds the
    conversation's output (a run given a new input, no history); where the
    provider keeps the history (``previous_response_id``), the input cannot
    show it: offered while the store holds an output of the conversation."""
    layer = make_layer(tracer_provider)
    models, calls = scripted_models(
        [OPUS],
        [
            step(call("big_report", {"topic": "q3"}, "c1")),
            step(text("ready")),
            step(text("a new question, no history")),
            step(text("the provider's history")),
        ],
    )
    runner = SeamscopeRunner(layer)
    agent = analyst(models[OPUS], Toolbox(), runner)
    run(runner, agent, "Write the Q3 report.", "run", conversation="conv-10")
    run(runner, agent, "Something else.", "run", conversation="conv-10")
    run(
        runner, agent, "And now?", "run", conversation="conv-10", previous_response_id="resp-1"
    )
    palette = ("run_block", "fetch_data", "search", "big_report", "flaky", "fatal")
    assert [palette, (*palette, RECALL_TOOL), palette, (*palette, RECALL_TOOL)] == [
        m.tools for m in calls
    ]


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
    models[OPUS].hold_from = 1  # the second call stops mid-stream
    box = Toolbox()
    runner = SeamscopeRunner(layer)
    agent = analyst(models[OPUS], box, runner)

    async def go() -> None:
        result = runner.run_streamed(agent, "crm data", conversation="conv-s")
        async for _event in result.stream_events():
            if len(calls) == 2:  # the second model call is under way: stop reading
                break
        result.cancel()
        assert result.run_loop_task is not None
        with pytest.raises(asyncio.CancelledError):
            await result.run_loop_task
        await asyncio.sleep(0)

    asyncio.run(go())
    assert [("c1", "fetch_data")] == [(r.call_id, r.name) for r in box.runs]
    assert sorted(recording.started) == sorted(recording.ended)
    spans = list(span_exporter.get_finished_spans())
    top = root(spans)
    assert "CancelledError" == attrs(top)[c.ATTR_ERROR_TYPE]
    chats = named(spans, f"chat {OPUS}")
    assert 2 == len(chats) == len(calls)
    assert 2 == len(named(spans, c.SPAN_ITERATION))


# -- a tool that raises ---------------------------------------------------------------------


def test_a_tool_that_raises(span_exporter: InMemorySpanExporter, tracer_provider: Any) -> None:
    layer = make_layer(tracer_provider)
    models, calls = scripted_models(
        [OPUS],
        [
            step(call("flaky", {"query": "q"}, "c1"), call("fetch_data", {"source": "s"}, "c2")),
            step(text("the backend is down")),
        ],
    )
    box = Toolbox()
    runner = SeamscopeRunner(layer)
    result = run(runner, analyst(models[OPUS], box, runner), "status?", "run")
    spans = list(span_exporter.get_finished_spans())

    assert "the backend is down" == result.final_output
    assert {("c1", "flaky", True), ("c2", "fetch_data", False)} == {
        (r.call_id, r.name, r.raised) for r in box.runs
    }
    assert calls[1].outputs()["c1"].startswith("An error occurred while running the tool")
    tools = {
        attrs(s)[c.ATTR_GEN_AI_TOOL_CALL_ID]: s for s in spans if s.name.startswith("execute_tool ")
    }
    assert "RuntimeError" == attrs(tools["c1"])[c.ATTR_ERROR_TYPE]
    assert "ERROR" == tools["c1"].status.status_code.name
    assert c.ATTR_ERROR_TYPE not in attrs(tools["c2"])
    assert c.ATTR_ERROR_TYPE not in attrs(root(spans))


def test_a_tool_error_the_sdk_raises_ends_the_run_spans(
    span_exporter: InMemorySpanExporter, tracer_provider: TracerProvider
) -> None:
    recording = Recording()
    tracer_provider.add_span_processor(recording)
    layer = make_layer(tracer_provider)
    models, _ = scripted_models([OPUS], [step(call("fatal", {"query": "q"}, "c1"))])
    box = Toolbox()
    runner = SeamscopeRunner(layer)
    with pytest.raises(Exception) as raised:
        run(runner, analyst(models[OPUS], box, runner), "go", "run")
    assert [("c1", "fatal", True)] == [(r.call_id, r.name, r.raised) for r in box.runs]
    assert sorted(recording.started) == sorted(recording.ended)
    spans = list(span_exporter.get_finished_spans())
    # the SDK's UserError is re-raised unchanged; error.type names what the tool raised
    assert ("UserError", KeyError) == (
        type(raised.value).__qualname__,
        type(raised.value.__cause__),
    )
    assert "KeyError" == attrs(root(spans))[c.ATTR_ERROR_TYPE]
    assert "KeyError" == attrs(named(spans, "execute_tool fatal")[0])[c.ATTR_ERROR_TYPE]


# -- handoffs between agents ------------------------------------------------------------------


def test_handoffs_between_agents(span_exporter: InMemorySpanExporter, tracer_provider: Any) -> None:
    """Roles follow the running agent (its name): each agent gets its own palette."""
    layer = make_layer(tracer_provider, policies=())
    script_models, calls = scripted_models(
        [OPUS, "gpt-4o"],
        [
            step(call("transfer_to_billing", {}, "h1")),
            step(call("lookup_invoice", {"number": "42"}, "c1")),
            step(text("Invoice 42 is paid.")),
        ],
    )
    box = Toolbox()
    tools = box.tools()
    billing = Agent(
        name="billing",
        instructions="Billing.",
        model=script_models["gpt-4o"],
        tools=[tools["lookup_invoice"], tools["search"]],
    )
    triage = Agent(
        name="triage",
        instructions="Triage.",
        model=script_models[OPUS],
        tools=[tools["search"], tools["lookup_invoice"]],
        handoffs=[handoff(billing)],
    )
    runner = SeamscopeRunner(layer)
    result = run(runner, triage, "Is invoice 42 paid?", "run", conversation="conv-h")
    spans = list(span_exporter.get_finished_spans())

    assert "Invoice 42 is paid." == result.final_output
    assert "billing" == result.last_agent.name
    assert [
        (OPUS, ("search",), ("transfer_to_billing",), "Triage."),
        ("gpt-4o", ("lookup_invoice",), (), "Billing."),
        ("gpt-4o", ("lookup_invoice",), (), "Billing."),
    ] == [(m.model, m.tools, m.handoffs, m.instructions) for m in calls]
    assert [("c1", "lookup_invoice")] == [(r.call_id, r.name) for r in box.runs]
    # the chat spans name the model each agent really ran on; the PRE seam chose
    # the default, which means "the agent's own model"
    assert [f"chat {m.model}" for m in calls] == [
        s.name
        for s in sorted(
            (s for s in spans if s.name.startswith("chat ")), key=lambda s: s.start_time or 0
        )
    ]
    assert [list(m.tools) for m in calls] == [
        attrs(s)[c.ATTR_SELECTION_SELECTED] for s in named(spans, c.SPAN_SELECT_TOOLS)
    ]
    # the handoff call passed the POST seam untouched
    assert [
        ("h1", "transfer_to_billing", "transfer_to_billing"),
        ("c1", "lookup_invoice", "lookup_invoice"),
    ] == [
        (
            attrs(s)[c.ATTR_GEN_AI_TOOL_CALL_ID],
            attrs(s)[c.ATTR_DISPATCH_EMITTED_TOOL],
            attrs(s)[c.ATTR_DISPATCH_FINAL_TOOL],
        )
        for s in named(spans, c.SPAN_DISPATCH)
    ]
    assert 3 == len(named(spans, c.SPAN_ITERATION))
    # every iteration, its chat span and its decisions name the agent that ran it
    by_start = sorted(spans, key=lambda s: s.start_time or 0)
    for kind in (c.SPAN_ITERATION, c.SPAN_SEAM_PRE_MODEL):
        assert ["triage", "billing", "billing"] == [
            attrs(s).get(c.ATTR_GEN_AI_AGENT_NAME) for s in by_start if s.name == kind
        ], kind
    assert ["triage", "billing", "billing"] == [
        attrs(s).get(c.ATTR_GEN_AI_AGENT_NAME) for s in by_start if s.name.startswith("chat ")
    ]


# -- structured output --------------------------------------------------------------------------


class Report(BaseModel):
    quarter: str
    growth: float


def test_structured_output(span_exporter: InMemorySpanExporter, tracer_provider: Any) -> None:
    layer = make_layer(tracer_provider)
    models, calls = scripted_models(
        [OPUS, HAIKU],
        [
            step(call("fetch_data", {"source": "sales"}, "c1")),
            step(text('{"quarter": "Q3", "growth": 0.12}')),
        ],
    )
    box = Toolbox()
    runner = SeamscopeRunner(layer, {HAIKU: models[HAIKU]})
    agent = analyst(models[OPUS], box, runner, output_type=Report)
    result = run(runner, agent, "Q3 sales as a report", "run")
    spans = list(span_exporter.get_finished_spans())

    assert Report(quarter="Q3", growth=0.12) == result.final_output
    assert [HAIKU, HAIKU] == [m.model for m in calls]
    assert tree(root(spans), spans) == (
        f"invoke_agent {AGENT}",
        [iteration_tree(HAIKU, tools=["fetch_data"], dispatches=1), iteration_tree(HAIKU)],
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
    runner = SeamscopeRunner(layer, {})
    box = Toolbox()

    def agent_for(n: int) -> tuple[Agent[Any], list[ModelCall]]:
        log: list[ModelCall] = []
        model = ScriptedModel(OPUS, _scenario(n), log)
        return analyst(model, box, runner), log

    async def one(n: int) -> Any:
        agent, _ = agent_for(n)
        return await runner.run(
            agent, f"sales {n}" if n % 2 else f"data {n}", conversation=f"conv-{n}"
        )

    async def sequential() -> None:
        for n in range(64):
            await one(n)

    async def concurrent() -> list[Any]:
        return await asyncio.gather(*(one(n) for n in range(64)))

    asyncio.run(sequential())
    expected = _decisions(span_exporter.get_finished_spans())
    span_exporter.clear()
    results = asyncio.run(concurrent())
    spans = list(span_exporter.get_finished_spans())

    assert [f"done {n}" for n in range(64)] == [r.final_output for r in results]
    assert expected == _decisions(spans)
    assert 64 == len(expected)
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


# -- nothing patched, configuration errors ------------------------------------------------


def test_nothing_is_patched_and_bad_arguments_fail(tracer_provider: Any) -> None:
    import agents

    before = (
        agents.Runner.run,
        agents.Runner.run_sync,
        agents.Runner.run_streamed,
        agents.FunctionTool.__init__,
        agents.Agent.get_all_tools,
    )
    layer = make_layer(tracer_provider)
    models, _ = scripted_models([OPUS], [step(text("hi"))])
    box = Toolbox()
    runner = SeamscopeRunner(layer)
    agent = analyst(models[OPUS], box, runner)
    tools_before = list(agent.tools)
    run(runner, agent, "hi", "run")
    assert before == (
        agents.Runner.run,
        agents.Runner.run_sync,
        agents.Runner.run_streamed,
        agents.FunctionTool.__init__,
        agents.Agent.get_all_tools,
    )
    assert tools_before == agent.tools and models[OPUS] is agent.model

    with pytest.raises(ValueError, match="layer"):
        SeamscopeRunner(object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"models\['x'\]"):
        SeamscopeRunner(layer, {"x": object()})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="max_stored_outputs"):
        SeamscopeRunner(layer, max_stored_outputs=0)
    with pytest.raises(MaxTurnsExceeded):  # the SDK's own checks still apply
        run(runner, agent, "hi", "run", max_turns=0)


# -- side by side with OpenInference ------------------------------------------------------------


def test_side_by_side_with_openinference(
    span_exporter: InMemorySpanExporter, tracer_provider: TracerProvider
) -> None:
    """The SDK's spans (through OpenInference) and seamscope's land in one OTel
    trace, under the caller's request span."""
    instrumentation = pytest.importorskip(
        "openinference.instrumentation.openai_agents",
        reason="OpenInference's Agents SDK instrumentation is not installed",
    )
    OpenAIAgentsInstrumentor = instrumentation.OpenAIAgentsInstrumentor

    set_tracing_disabled(False)
    instrumentor = OpenAIAgentsInstrumentor()
    instrumentor.instrument(tracer_provider=tracer_provider)  # replaces the OpenAI exporter
    try:
        layer = make_layer(tracer_provider)
        models, calls = scripted_models(
            [OPUS, HAIKU],
            [step(call("run_block", {"block": "sales_q3"}, "c1")), step(text("12%"))],
        )
        box = Toolbox()
        runner = SeamscopeRunner(layer, {HAIKU: models[HAIKU]})
        agent = analyst(models[OPUS], box, runner)
        tracer = tracer_provider.get_tracer("caller")
        with tracer.start_as_current_span("request") as request:
            run(runner, agent, "Q3 sales?", "run")
    finally:
        instrumentor.uninstrument()
    spans = list(span_exporter.get_finished_spans())
    assert [("c1", "fetch_data")] == [(r.call_id, r.name) for r in box.runs]
    assert {request.get_span_context().trace_id} == {s.context.trace_id for s in spans}
    by_id = {s.context.span_id: s for s in spans}
    invoke = named(spans, f"invoke_agent {AGENT}")[0]
    assert request.get_span_context().span_id == invoke.parent.span_id  # type: ignore[union-attr]
    sdk = [s for s in spans if (s.instrumentation_scope.name or "").startswith("openinference")]
    assert sdk, "OpenInference recorded the SDK's spans"
    sdk_root = next(s for s in sdk if s.parent is None or by_id[s.parent.span_id] not in sdk)
    assert invoke.context.span_id == sdk_root.parent.span_id  # type: ignore[union-attr]
    tool_names = {s.name for s in sdk}
    assert "fetch_data" in tool_names  # the SDK itself ran (and recorded) the redirect
    assert [HAIKU, HAIKU] == [m.model for m in calls]


# -- the documented snippet ----------------------------------------------------------------------

SNIPPET_PAGE = "docs/adapters/openai-agents.md"


def _readme_snippet() -> str:
    text = (Path(__file__).parents[2] / SNIPPET_PAGE).read_text(encoding="utf-8")
    # the example with OpenAI's models (the page's first one runs offline, scripted)
    section = text.split("## With OpenAI's models", 1)[1].split("\n## ", 1)[0]
    [block] = re.findall(r"```python\n(.*?)```", section, re.S)
    return block


def test_readme_snippet_runs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, global_providers_kept: list[str]
) -> None:
    """The page's snippet as written, with only the two model objects replaced
    by scripted ones (and a dummy key, so that ``AsyncOpenAI()`` constructs; the
    SDK's tracing is off and no model uses the client)."""
    snippet = _readme_snippet()
    mini, full = "gpt-4.1-mini", "gpt-4.1"
    models, calls = scripted_models(
        [full, mini],
        [step(call("big_report", {"topic": "q3"}, "c1")), step(text("Q3 sales grew 12%."))],
    )
    source = snippet
    for name in (mini, full):
        pattern = rf'OpenAIResponsesModel\(model="{re.escape(name)}", openai_client=client\)'
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
    assert ("big_report", "recall_tool_result") == (calls[0].tools[0], calls[1].tools[-1])
    assert calls[1].outputs()["c1"].startswith("[offloaded ")
    [settlement] = namespace["settled"]
    assert ("conv-7", mini, 1) == (
        settlement.conversation_id,
        settlement.model,
        settlement.turns_carried,
    )
    written = (tmp_path / "openai-agents-openai-trace.jsonl").read_text(encoding="utf-8")
    for name in (
        f"invoke_agent {AGENT}",
        c.SPAN_OFFLOAD_GATE,
        f"chat {mini}",
        "execute_tool big_report",
    ):
        assert f'"{name}"' in written


# -- streamed and not: the same end -------------------------------------------------------------


def _ends(tracer_provider: Any, span_exporter: InMemorySpanExporter, mode: str, **kw: Any) -> Any:
    """A run that ends with the SDK's own exception (max turns, an input
    guardrail's tripwire): the exception type and the invoke_agent span's end."""
    span_exporter.clear()
    layer = make_layer(tracer_provider)
    models, _ = scripted_models(
        [OPUS], [step(call("search", {"query": "q"}, "m1")), step(text("x"))]
    )
    box = Toolbox()
    runner = SeamscopeRunner(layer)
    agent = analyst(models[OPUS], box, runner)
    if "guardrail" in kw:
        agent = agent.clone(input_guardrails=[kw.pop("guardrail")])
    with pytest.raises(Exception) as raised:
        run(runner, agent, "hi", mode, **kw)
    [root_span] = [s for s in span_exporter.get_finished_spans() if s.parent is None]
    return (
        type(raised.value).__qualname__,
        attrs(root_span).get(c.ATTR_ERROR_TYPE),
        root_span.status.status_code.name,
    )


@pytest.mark.parametrize("mode", ["run", "run_streamed"])
def test_max_turns_and_a_tripwire_end_the_run_alike_streamed_or_not(
    mode: str, span_exporter: InMemorySpanExporter, tracer_provider: Any
) -> None:
    from agents import GuardrailFunctionOutput, input_guardrail

    @input_guardrail
    def refuse(ctx: Any, agent: Any, input: Any) -> GuardrailFunctionOutput:
        return GuardrailFunctionOutput(output_info="no", tripwire_triggered=True)

    assert ("MaxTurnsExceeded", "MaxTurnsExceeded", "ERROR") == _ends(
        tracer_provider, span_exporter, mode, max_turns=1
    )
    tripped = "InputGuardrailTripwireTriggered"
    assert (tripped, tripped, "ERROR") == _ends(
        tracer_provider, span_exporter, mode, guardrail=refuse
    )
