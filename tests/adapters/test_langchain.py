"""The LangChain v1 adapter inside the real ``create_agent`` loop.

The chat model is scripted and the tools record what really ran; the agent
loop, the middleware chain, the tool node and the checkpointer are
LangChain's own. Spans come from fresh in-memory providers passed to the
DecisionLayer.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Sequence
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command, interrupt
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NoOpTracer, StatusCode, TracerProvider

from seamscope.adapters import DecisionLayer
from seamscope.adapters.langchain import SeamscopeMiddleware
from seamscope.decisions import (
    DispatchContext,
    ForcedChoiceStage,
    ModelConfig,
    OffloadGateInputs,
    RolePaletteStage,
    ToolCallPolicy,
    evaluate_offload_gate,
)
from seamscope.loop import RECALL_TOOL
from seamscope.telemetry import TelemetryConfig
from seamscope.telemetry import conventions as c

from ._langchain_support import (
    BIG_REPORT_CHARS,
    ModelCall,
    Toolbox,
    ai,
    scripted_models,
    tree,
)

OPUS = "claude-opus-4-6"
HAIKU = "claude-haiku-4-5"
SONNET = "claude-sonnet-4-5"
AGENT = "analyst"
THREAD = "conv-1"
PALETTES = {AGENT: ["run_block", "fetch_data", "search", "big_report", RECALL_TOOL]}


# -- the scenario --------------------------------------------------------------


def classifier_down(ctx: DispatchContext) -> bool:
    raise RuntimeError("intent classifier unavailable")


def is_sales(ctx: DispatchContext) -> bool:
    return "sales" in ctx.user_text.lower()


def emitted_sales_block(ctx: DispatchContext) -> bool:
    """Guard: reads the just-emitted AIMessage (the POST context's last message)."""
    emitted = ctx.messages[-1]
    blocks = [tc["args"]["block"] for tc in emitted.tool_calls if tc["name"] == "run_block"]
    return bool(blocks) and all(block.startswith("sales_") for block in blocks)


def block_to_source(args: Any, ctx: DispatchContext) -> dict[str, Any]:
    return {"source": args["block"], "rows": args.get("limit", 10)}


POLICIES = (
    ToolCallPolicy("flaky_intent", match=classifier_down, model=ModelConfig(SONNET)),
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


def make_layer(tracer_provider: Any, meter_provider: Any, **kwargs: Any) -> DecisionLayer:
    options: dict[str, Any] = {
        "default_model": OPUS,
        "policies": POLICIES,
        "stages": [RolePaletteStage(resolver=PALETTES.get)],
        "agent_name": AGENT,
        "offload_id_factory": lambda: "off-1",
    }
    options.update(kwargs)
    return DecisionLayer(tracer_provider=tracer_provider, meter_provider=meter_provider, **options)


TURN_1 = [
    ai(
        ("run_block", {"block": "sales_q3", "limit": 5}, "c1"),
        ("search", {"query": "q3 trends"}, "c2"),
        usage=(1_000, 50, 200, 100),
    ),
    ai(("big_report", {"topic": "q3"}, "c3"), usage=(1_200, 40, 0, 0)),
    ai(text="Q3 sales grew 12%.", usage=(1_300, 30, 0, 0)),
]
TURN_2 = [
    ai((RECALL_TOOL, {"offload_id": "off-1"}, "c4"), usage=(900, 20, 0, 0)),
    ai(text="Here is the full report.", usage=(21_000, 25, 0, 0)),
]


def invoke(agent: Any, text: str, config: dict[str, Any] | None, mode: str) -> dict[str, Any]:
    payload = {"messages": [HumanMessage(text)]}
    if mode == "ainvoke":
        result: dict[str, Any] = asyncio.run(agent.ainvoke(payload, config=config))
    else:
        result = agent.invoke(payload, config=config)
    return result


def named(spans: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    return sorted((s for s in spans if s.name == name), key=lambda s: s.start_time or 0)


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in (span.attributes or {}).items()}


def pick(span: ReadableSpan, *keys: str) -> dict[str, Any]:
    values = attrs(span)
    return {k: values[k] for k in keys if k in values}


def events(span: ReadableSpan) -> list[dict[str, Any]]:
    return [{"name": e.name, **dict(e.attributes or {})} for e in span.events]


def parent_of(span: ReadableSpan, spans: Sequence[ReadableSpan]) -> ReadableSpan:
    assert span.parent is not None
    by_id = {s.context.span_id: s for s in spans if s.context is not None}
    return by_id[span.parent.span_id]


def points(reader: InMemoryMetricReader, name: str) -> dict[tuple[tuple[str, Any], ...], Any]:
    data = reader.get_metrics_data()
    found: dict[tuple[tuple[str, Any], ...], Any] = {}
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == name:
                    for point in metric.data.data_points:
                        key = tuple(sorted((point.attributes or {}).items()))
                        found[key] = getattr(point, "value", None)
    return found


def iteration_tree(
    chat_model: str, *, tools: Sequence[str] = (), dispatches: int = 0, gate: bool = False
) -> tuple[str, list[Any]]:
    kids: list[Any] = [
        (c.SPAN_SELECT_TOOLS, [(c.SPAN_STAGE, [])]),
        (c.SPAN_SEAM_PRE_MODEL, []),
        (f"chat {chat_model}", []),
    ]
    if dispatches:
        kids.append((c.SPAN_SEAM_POST_MODEL, [(c.SPAN_DISPATCH, [])] * dispatches))
    kids.extend((f"execute_tool {t}", []) for t in tools)
    if gate:
        kids.append((c.SPAN_OFFLOAD_GATE, []))
    return c.SPAN_ITERATION, sorted(kids, key=lambda t: t[0])


# -- the integration test ----------------------------------------------------------


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_a_conversation_through_create_agent(
    mode: str,
    span_exporter: InMemorySpanExporter,
    tracer_provider: Any,
    meter_provider: Any,
    metric_reader: InMemoryMetricReader,
    captured_logs: list[dict[str, Any]],
) -> None:
    layer = make_layer(tracer_provider, meter_provider)
    models, calls = scripted_models([OPUS, HAIKU], [*TURN_1, *TURN_2])
    box = Toolbox()
    seamscope = SeamscopeMiddleware(layer, models, role=AGENT)
    agent = create_agent(
        models[OPUS], box.tools(), middleware=[seamscope], checkpointer=InMemorySaver()
    )
    config = {"configurable": {"thread_id": THREAD}}

    invoke(agent, "How did Q3 sales go?", config, mode)
    turn_1_spans = list(span_exporter.get_finished_spans())
    span_exporter.clear()
    final = invoke(agent, "Thanks. Show me the full report again.", config, mode)
    turn_2_spans = list(span_exporter.get_finished_spans())

    # -- what the loop really did ----------------------------------------------
    # PRE seam: the sales turn runs on haiku, the next turn on the default opus;
    # the raising predicate never broke a call.
    assert [HAIKU, HAIKU, HAIKU, OPUS, OPUS] == [call.model for call in calls]
    # selection: the analyst palette drops web_search; recall is offered only
    # once there is an offloaded output to recall
    palette = ["run_block", "fetch_data", "search", "big_report"]
    assert [palette, palette] == [call.tools for call in calls[:2]]
    for call in calls[2:]:
        assert sorted([*palette, RECALL_TOOL]) == sorted(call.tools or [])
    assert [None] * 5 == [call.tool_choice for call in calls]
    # POST seam: run_block was redirected to fetch_data (guard passed, args
    # transformed); search -> web_search was dropped by the palette gate
    expected_executed = [
        ("fetch_data", {"source": "sales_q3", "rows": 5}),
        ("search", {"query": "q3 trends"}),
        ("big_report", {"topic": "q3"}),
    ]
    assert sorted(expected_executed) == sorted(box.executed)
    # the agent's history holds the rewritten call with its original id
    first_ai = calls[1].messages[1]
    assert isinstance(first_ai, AIMessage)
    assert [
        ("fetch_data", {"source": "sales_q3", "rows": 5}, "c1"),
        ("search", {"query": "q3 trends"}, "c2"),
    ] == [(tc["name"], tc["args"], tc["id"]) for tc in first_ai.tool_calls]
    assert "fetch_data" == calls[1].tool_message("c1").name
    # offload: the model after big_report saw a stub, not 80 000 chars
    stub = calls[2].tool_message("c3").content
    assert isinstance(stub, str)
    assert stub.startswith("[offloaded off-1: 20000 tokens from big_report;")
    assert BIG_REPORT_CHARS == len(seamscope.stored_output("off-1") or "")
    # recall brought the full output back in the next turn
    recalled = [m for m in final["messages"] if isinstance(m, ToolMessage)][-1]
    assert (RECALL_TOOL, "c4", BIG_REPORT_CHARS) == (
        recalled.name,
        recalled.tool_call_id,
        len(recalled.content),
    )
    assert "Here is the full report." == final["messages"][-1].content

    # -- the spans: one trace per run, everything under invoke_agent -----------
    for spans in (turn_1_spans, turn_2_spans):
        roots = [s for s in spans if s.parent is None]
        assert [f"invoke_agent {AGENT}"] == [r.name for r in roots]
        assert {roots[0].context.trace_id} == {s.context.trace_id for s in spans}
        assert {
            c.ATTR_GEN_AI_OPERATION_NAME: "invoke_agent",
            c.ATTR_GEN_AI_AGENT_NAME: AGENT,
            c.ATTR_GEN_AI_CONVERSATION_ID: THREAD,
        } == attrs(roots[0])
    assert turn_1_spans[0].context.trace_id != turn_2_spans[0].context.trace_id

    root_1 = next(s for s in turn_1_spans if s.parent is None)
    expected_tree_1 = (
        f"invoke_agent {AGENT}",
        [
            iteration_tree(HAIKU, tools=["fetch_data", "search"], dispatches=2),
            iteration_tree(HAIKU, tools=["big_report"], dispatches=1, gate=True),
            iteration_tree(HAIKU),
        ],
    )
    assert expected_tree_1 == tree(root_1, turn_1_spans)
    root_2 = next(s for s in turn_2_spans if s.parent is None)
    expected_tree_2 = (
        f"invoke_agent {AGENT}",
        [iteration_tree(OPUS, tools=[RECALL_TOOL], dispatches=1), iteration_tree(OPUS)],
    )
    assert expected_tree_2 == tree(root_2, turn_2_spans)

    iterations = named(turn_1_spans, c.SPAN_ITERATION)
    assert [
        {
            c.ATTR_ITERATION_INDEX: i,
            c.ATTR_GEN_AI_CONVERSATION_ID: THREAD,
            c.ATTR_GEN_AI_AGENT_NAME: AGENT,
        }
        for i in range(3)
    ] == [attrs(s) for s in iterations]
    # within an iteration: select, PRE, chat, POST, then the tools
    first = iterations[0]
    order = [
        s.name
        for s in sorted(turn_1_spans, key=lambda s: s.start_time or 0)
        if s.parent is not None and s.parent.span_id == first.context.span_id
    ]
    assert [
        c.SPAN_SELECT_TOOLS,
        c.SPAN_SEAM_PRE_MODEL,
        f"chat {HAIKU}",
        c.SPAN_SEAM_POST_MODEL,
    ] == (order[:4])

    # selection
    selection = named(turn_1_spans, c.SPAN_SELECT_TOOLS)[0]
    assert {
        c.ATTR_SELECTION_OFFERED: ["run_block", "fetch_data", "search", "web_search", "big_report"],
        c.ATTR_SELECTION_SELECTED: palette,
        c.ATTR_SELECTION_DROPPED: ["web_search"],
        c.ATTR_SELECTION_REINSTATED: False,
    } == pick(
        selection,
        c.ATTR_SELECTION_OFFERED,
        c.ATTR_SELECTION_SELECTED,
        c.ATTR_SELECTION_DROPPED,
        c.ATTR_SELECTION_FORCED_TOOL,
        c.ATTR_SELECTION_REINSTATED,
    )

    # PRE seam: the winner, the model, and the contained predicate error
    pre_1 = named(turn_1_spans, c.SPAN_SEAM_PRE_MODEL)[0]
    assert {
        c.ATTR_SEAM_WINNER_SOURCE: c.WinnerSource.POLICY.value,
        c.ATTR_POLICY_WINNER: "sales_data_read",
        c.ATTR_GEN_AI_REQUEST_MODEL: HAIKU,
    } == pick(pre_1, c.ATTR_SEAM_WINNER_SOURCE, c.ATTR_POLICY_WINNER, c.ATTR_GEN_AI_REQUEST_MODEL)
    assert [
        {
            "name": c.EVENT_POLICY_EVALUATED,
            c.ATTR_POLICY_NAME: "flaky_intent",
            c.ATTR_SEAM: c.Seam.PRE_MODEL.value,
            c.ATTR_POLICY_RESULT: c.PolicyResult.ERROR.value,
            c.ATTR_ERROR_TYPE: "RuntimeError",
        },
        {
            "name": c.EVENT_POLICY_EVALUATED,
            c.ATTR_POLICY_NAME: "sales_data_read",
            c.ATTR_SEAM: c.Seam.PRE_MODEL.value,
            c.ATTR_POLICY_RESULT: c.PolicyResult.MATCHED.value,
        },
    ] == events(pre_1)
    assert StatusCode.UNSET == pre_1.status.status_code
    pre_2 = named(turn_2_spans, c.SPAN_SEAM_PRE_MODEL)[0]
    assert {
        c.ATTR_SEAM_WINNER_SOURCE: c.WinnerSource.DEFAULT.value,
        c.ATTR_GEN_AI_REQUEST_MODEL: OPUS,
    } == pick(pre_2, c.ATTR_SEAM_WINNER_SOURCE, c.ATTR_POLICY_WINNER, c.ATTR_GEN_AI_REQUEST_MODEL)

    # the chat span: the model really called, with the AIMessage's usage
    chat_1 = named(turn_1_spans, f"chat {HAIKU}")[0]
    assert {
        c.ATTR_GEN_AI_OPERATION_NAME: "chat",
        c.ATTR_GEN_AI_REQUEST_MODEL: HAIKU,
        c.ATTR_GEN_AI_CONVERSATION_ID: THREAD,
        c.ATTR_GEN_AI_AGENT_NAME: AGENT,
        c.ATTR_GEN_AI_USAGE_INPUT_TOKENS: 1_000,
        c.ATTR_GEN_AI_USAGE_OUTPUT_TOKENS: 50,
        c.ATTR_GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: 200,
        c.ATTR_GEN_AI_USAGE_CACHE_WRITE_INPUT_TOKENS: 100,
        c.ATTR_GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS: 100,  # the old name, one release
        # the tools the model was sent (names and types; schemas only with content capture)
        c.ATTR_GEN_AI_TOOL_DEFINITIONS: json.dumps(
            [
                {"type": "function", "name": name}
                for name in ("run_block", "fetch_data", "search", "big_report")
            ],
            separators=(",", ":"),
        ),
        c.ATTR_OFFLOAD_CARRIED: [],  # the ledger accounted it; nothing offloaded yet
        c.ATTR_OFFLOAD_CARRIED_STUB_TOKENS: [],
    } == attrs(chat_1)

    # POST seam and its dispatches
    post_1 = named(turn_1_spans, c.SPAN_SEAM_POST_MODEL)[0]
    assert {c.ATTR_SEAM_TOOL_CALLS: 2, c.ATTR_SEAM_REWRITTEN: 1} == pick(
        post_1, c.ATTR_SEAM_TOOL_CALLS, c.ATTR_SEAM_REWRITTEN
    )
    dispatch_keys = (
        c.ATTR_GEN_AI_TOOL_CALL_ID,
        c.ATTR_DISPATCH_EMITTED_TOOL,
        c.ATTR_POLICY_WINNER,
        c.ATTR_DISPATCH_REDIRECT_TO,
        c.ATTR_DISPATCH_GUARD,
        c.ATTR_DISPATCH_ADOPTER_OVERRIDE,
        c.ATTR_DISPATCH_PALETTE_GATE,
        c.ATTR_DISPATCH_FINAL_TOOL,
        c.ATTR_DISPATCH_ARGS_TRANSFORMED,
    )
    dispatches = sorted(
        named(turn_1_spans, c.SPAN_DISPATCH)[:2], key=lambda s: attrs(s)[c.ATTR_GEN_AI_TOOL_CALL_ID]
    )
    assert [
        {
            c.ATTR_GEN_AI_TOOL_CALL_ID: "c1",
            c.ATTR_DISPATCH_EMITTED_TOOL: "run_block",
            c.ATTR_POLICY_WINNER: "sales_data_read",
            c.ATTR_DISPATCH_REDIRECT_TO: "fetch_data",
            c.ATTR_DISPATCH_GUARD: c.GuardResult.PASSED.value,
            c.ATTR_DISPATCH_ADOPTER_OVERRIDE: False,
            c.ATTR_DISPATCH_PALETTE_GATE: c.PaletteVerdict.KEPT.value,
            c.ATTR_DISPATCH_FINAL_TOOL: "fetch_data",
            c.ATTR_DISPATCH_ARGS_TRANSFORMED: True,
        },
        {
            c.ATTR_GEN_AI_TOOL_CALL_ID: "c2",
            c.ATTR_DISPATCH_EMITTED_TOOL: "search",
            c.ATTR_POLICY_WINNER: "archive_to_web",
            c.ATTR_DISPATCH_REDIRECT_TO: "web_search",
            c.ATTR_DISPATCH_GUARD: c.GuardResult.NONE.value,
            c.ATTR_DISPATCH_ADOPTER_OVERRIDE: False,
            c.ATTR_DISPATCH_PALETTE_GATE: c.PaletteVerdict.DROPPED.value,
            c.ATTR_DISPATCH_FINAL_TOOL: "search",
            c.ATTR_DISPATCH_ARGS_TRANSFORMED: False,
        },
    ] == [pick(s, *dispatch_keys) for s in dispatches]
    assert all(parent_of(s, turn_1_spans) is post_1 for s in dispatches)

    # execute_tool spans carry the dispatched tool and the emitted call id
    executed = sorted(
        (attrs(s)[c.ATTR_GEN_AI_TOOL_NAME], attrs(s)[c.ATTR_GEN_AI_TOOL_CALL_ID])
        for s in turn_1_spans
        if s.name.startswith("execute_tool ")
    )
    assert [("big_report", "c3"), ("fetch_data", "c1"), ("search", "c2")] == executed

    # the offload gate: fired, with the priced terms of the seed's formula
    gate = named(turn_1_spans, c.SPAN_OFFLOAD_GATE)
    assert 1 == len(gate)
    assert iterations[1] is parent_of(gate[0], turn_1_spans)
    expected = evaluate_offload_gate(OffloadGateInputs(BIG_REPORT_CHARS / 4, 5, 0.5, HAIKU))
    assert expected.fire
    assert 0.092725 == pytest.approx(expected.net_saving_usd)
    assert {
        c.ATTR_OFFLOAD_FIRE: True,
        c.ATTR_OFFLOAD_REASON_CODE: c.OffloadReasonCode.NET_POSITIVE.value,
        c.ATTR_OFFLOAD_NET_SAVING_USD: expected.net_saving_usd,
        c.ATTR_OFFLOAD_REPREFILL_SAVING_USD: expected.reprefill_saving_usd,
        c.ATTR_OFFLOAD_STUB_CARRY_COST_USD: expected.stub_carry_cost_usd,
        c.ATTR_OFFLOAD_EXPECTED_RECALL_HOP_COST_USD: expected.expected_recall_hop_cost_usd,
        c.ATTR_OFFLOAD_OUTPUT_TOKENS: 20_000.0,
        c.ATTR_OFFLOAD_HORIZON: 5,
        c.ATTR_OFFLOAD_RECALL_PROBABILITY: 0.5,
        c.ATTR_OFFLOAD_PRICING_SOURCE: c.PricingSource.GENAI_PRICES.value,
        c.ATTR_OFFLOAD_STUB_TOKENS: 80,
        c.ATTR_OFFLOAD_THRESHOLD_TOKENS: 15_000,
        c.ATTR_OFFLOAD_RECALL_INPUT_TOKENS: 12_500,
        c.ATTR_OFFLOAD_RECALL_OUTPUT_TOKENS: 250,
        c.ATTR_OFFLOAD_PRIOR_SOURCE: c.PriorSource.DEFAULT.value,
        c.ATTR_OFFLOAD_INPUT_USD_PER_MTOK: 1.0,  # the rates it was priced with
        c.ATTR_OFFLOAD_OUTPUT_USD_PER_MTOK: 5.0,
        c.ATTR_OFFLOAD_CACHE_READ_USD_PER_MTOK: 0.1,
        c.ATTR_OFFLOAD_CACHE_WRITE_USD_PER_MTOK: 1.25,
        c.ATTR_GEN_AI_REQUEST_MODEL: HAIKU,
        c.ATTR_OFFLOAD_ID: "off-1",
        c.ATTR_GEN_AI_TOOL_NAME: "big_report",
        c.ATTR_GEN_AI_TOOL_CALL_ID: "c3",
        c.ATTR_GEN_AI_CONVERSATION_ID: THREAD,
        c.ATTR_GEN_AI_AGENT_NAME: AGENT,
    } == {k: v for k, v in attrs(gate[0]).items() if k != c.ATTR_OFFLOAD_REASON}

    # -- metrics and the ledger ------------------------------------------------
    evaluations = points(metric_reader, c.METRIC_POLICY_EVALUATIONS.name)
    flaky_errors = (
        (c.ATTR_POLICY_NAME, "flaky_intent"),
        (c.ATTR_POLICY_RESULT, c.PolicyResult.ERROR.value),
        (c.ATTR_SEAM, c.Seam.PRE_MODEL.value),
    )
    assert 5 == evaluations[flaky_errors]
    # the recall happened on turn 2's model
    assert {
        ((c.ATTR_GEN_AI_REQUEST_MODEL, OPUS), (c.ATTR_OFFLOAD_MECHANISM, "seamscope_gate")): 1
    } == points(metric_reader, c.METRIC_OFFLOAD_RECALLS.name)
    settlements = layer.end_conversation(THREAD)
    # carried on the two model calls between the offload and its recall; once
    # recalled, the output is back in the prompt and no later call carries its stub
    assert [("off-1", 2, 1)] == [(s.offload_id, s.turns_carried, s.recalls) for s in settlements]

    # -- logs: the palette-gate drop is a WARN event -----------------------------
    drops = [e for e in captured_logs if e["event"] == c.LOG_PALETTE_GATE_DROP]
    assert [("archive_to_web", "search", "web_search", "c2")] == [
        (e["policy"], e["emitted_tool"], e["target"], e["tool_call_id"]) for e in drops
    ]


# -- selection reaches the model -------------------------------------------------


def test_a_role_palette_narrows_the_tools_the_model_receives(
    span_exporter: InMemorySpanExporter, tracer_provider: Any, meter_provider: Any
) -> None:
    layer = make_layer(
        tracer_provider,
        meter_provider,
        policies=(),
        stages=[RolePaletteStage(resolver={"support": ["search"]}.get)],
    )
    models, calls = scripted_models([OPUS], [ai(("search", {"query": "refund"}, "s1")), ai()])
    box = Toolbox()
    agent = create_agent(
        models[OPUS], box.tools(), middleware=[SeamscopeMiddleware(layer, models, role="support")]
    )
    agent.invoke({"messages": [HumanMessage("Where is my refund?")]})

    assert [["search"], ["search"]] == [call.tools for call in calls]
    assert [("search", {"query": "refund"})] == box.executed
    stage = named(span_exporter.get_finished_spans(), c.SPAN_STAGE)[0]
    assert {
        c.ATTR_STAGE_NAME: "role_palette",
        c.ATTR_STAGE_OUTCOME: c.StageOutcomeKind.SELECT.value,
        c.ATTR_STAGE_DROPPED: ["run_block", "fetch_data", "web_search", "big_report"],
    } == pick(stage, c.ATTR_STAGE_NAME, c.ATTR_STAGE_OUTCOME, c.ATTR_STAGE_DROPPED)


def test_a_forced_tool_becomes_the_request_tool_choice(
    span_exporter: InMemorySpanExporter, tracer_provider: Any, meter_provider: Any
) -> None:
    force_search = ForcedChoiceStage(resolver=lambda ctx: "search")
    layer = make_layer(tracer_provider, meter_provider, policies=(), stages=[force_search])
    models, calls = scripted_models([OPUS], [ai(("search", {"query": "q"}, "s1")), ai()])
    agent = create_agent(
        models[OPUS], Toolbox().tools(), middleware=[SeamscopeMiddleware(layer, models)]
    )
    agent.invoke({"messages": [HumanMessage("look it up")]})

    # forced on the first call; released once search has run
    assert ["search", None] == [call.tool_choice for call in calls]
    selections = named(span_exporter.get_finished_spans(), c.SPAN_SELECT_TOOLS)
    assert ["search", None] == [attrs(s).get(c.ATTR_SELECTION_FORCED_TOOL) for s in selections]


# -- decisions about models ------------------------------------------------------------


def test_an_unknown_model_keeps_the_request_model_and_is_recorded(
    span_exporter: InMemorySpanExporter,
    tracer_provider: Any,
    meter_provider: Any,
    captured_logs: list[dict[str, Any]],
) -> None:
    to_sonnet = ToolCallPolicy("deep_think", match=lambda ctx: True, model=ModelConfig(SONNET))
    layer = make_layer(tracer_provider, meter_provider, policies=(to_sonnet,), stages=())
    models, calls = scripted_models([OPUS, HAIKU], [ai(text="done")])
    agent = create_agent(
        models[OPUS], Toolbox().tools(), middleware=[SeamscopeMiddleware(layer, models)]
    )
    agent.invoke({"messages": [HumanMessage("think hard")]})

    assert [OPUS] == [call.model for call in calls]
    spans = span_exporter.get_finished_spans()
    pre = named(spans, c.SPAN_SEAM_PRE_MODEL)[0]
    assert SONNET == attrs(pre)[c.ATTR_GEN_AI_REQUEST_MODEL]
    assert [OPUS] == [attrs(s)[c.ATTR_GEN_AI_REQUEST_MODEL] for s in named(spans, f"chat {OPUS}")]
    unavailable = [
        (e["chosen_model"], e["used_model"], e["winner_source"], e["policy"], e["log_level"])
        for e in captured_logs
        if e["event"] == c.LOG_MODEL_UNAVAILABLE
    ]
    assert [(SONNET, OPUS, "policy", "deep_think", "warning")] == unavailable


def test_model_parameters_of_the_chosen_model_reach_the_binding(
    tracer_provider: Any, meter_provider: Any
) -> None:
    cheap = ToolCallPolicy(
        "cheap", match=lambda ctx: True, model=ModelConfig(HAIKU, {"temperature": 0})
    )
    layer = make_layer(tracer_provider, meter_provider, policies=(cheap,), stages=())
    models, calls = scripted_models([OPUS, HAIKU], [ai(text="done")])
    agent = create_agent(
        models[OPUS], Toolbox().tools(), middleware=[SeamscopeMiddleware(layer, models)]
    )
    agent.invoke({"messages": [HumanMessage("hi")]})

    assert [(HAIKU, {"temperature": 0})] == [(call.model, call.settings) for call in calls]


# -- no thread id -------------------------------------------------------------------------


def test_without_a_thread_id_spans_share_one_trace_and_recall_works_within_the_run(
    span_exporter: InMemorySpanExporter, tracer_provider: Any, meter_provider: Any
) -> None:
    layer = make_layer(tracer_provider, meter_provider, policies=(), stages=())
    script = [
        ai(("big_report", {"topic": "q3"}, "b1")),
        ai((RECALL_TOOL, {"offload_id": "off-1"}, "r1")),
        ai(text="done"),
    ]
    models, calls = scripted_models([OPUS], script)
    agent = create_agent(
        models[OPUS], Toolbox().tools(), middleware=[SeamscopeMiddleware(layer, models)]
    )
    result = agent.invoke({"messages": [HumanMessage("full report please")]})

    assert RECALL_TOOL not in (calls[0].tools or [])
    assert RECALL_TOOL in (calls[1].tools or [])
    assert str(calls[1].tool_message("b1").content).startswith("[offloaded off-1:")
    recalled = [m for m in result["messages"] if isinstance(m, ToolMessage)][-1]
    assert BIG_REPORT_CHARS == len(recalled.content)
    spans = span_exporter.get_finished_spans()
    assert 1 == len({s.context.trace_id for s in spans})
    assert [f"invoke_agent {AGENT}"] == [s.name for s in spans if s.parent is None]
    assert [] == [s.name for s in spans if c.ATTR_GEN_AI_CONVERSATION_ID in attrs(s)]
    # no conversation id: the gate decided, the ledger follows nothing
    assert 0 == len(layer.ledger)


@pytest.mark.parametrize("capture", [True, False])
def test_a_tools_answer_is_on_its_execute_tool_span_only_with_content_capture(
    capture: bool, span_exporter: InMemorySpanExporter, tracer_provider: Any, meter_provider: Any
) -> None:
    """The tool step's span is the kit's: with content capture on it records the
    tool's answer, as every adapter's does; off, nothing of it."""
    layer = make_layer(
        tracer_provider,
        meter_provider,
        policies=(),
        stages=(),
        telemetry_config=TelemetryConfig(capture_content=capture),
    )
    script = [ai(("fetch_data", {"source": "sales", "rows": 3}, "f1")), ai(text="done")]
    models, _ = scripted_models([OPUS], script)
    agent = create_agent(
        models[OPUS], Toolbox().tools(), middleware=[SeamscopeMiddleware(layer, models)]
    )
    agent.invoke({"messages": [HumanMessage("three sales rows")]})

    [span] = [s for s in span_exporter.get_finished_spans() if s.name == "execute_tool fetch_data"]
    expected = "3 rows of sales" if capture else None
    assert expected == attrs(span).get(c.ATTR_TOOL_CALL_RESULT)


def test_a_recall_cannot_read_another_conversation(
    tracer_provider: Any, meter_provider: Any
) -> None:
    layer = make_layer(tracer_provider, meter_provider, policies=(), stages=())
    script = [
        ai(("big_report", {"topic": "q3"}, "b1")),
        ai(text="stored"),
        ai((RECALL_TOOL, {"offload_id": "off-1"}, "r1")),
        ai(text="done"),
    ]
    models, _ = scripted_models([OPUS], script)
    agent = create_agent(
        models[OPUS],
        Toolbox().tools(),
        middleware=[SeamscopeMiddleware(layer, models)],
        checkpointer=InMemorySaver(),
    )
    agent.invoke({"messages": [HumanMessage("a")]}, config={"configurable": {"thread_id": "a"}})
    other = agent.invoke(
        {"messages": [HumanMessage("b")]}, config={"configurable": {"thread_id": "b"}}
    )

    # conversation b holds no stub, so it is offered no recall tool: the call is an
    # unknown tool's, answered by LangChain, and a's output never reaches b
    answer = [m for m in other["messages"] if isinstance(m, ToolMessage)][-1]
    assert str(answer.content).startswith("Error: recall_tool_result is not a valid tool")
    assert all(len(str(m.content)) < 1_000 for m in other["messages"])


# -- failures -----------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_the_agents_own_exception_propagates_unchanged_and_is_recorded(
    mode: str, span_exporter: InMemorySpanExporter, tracer_provider: Any, meter_provider: Any
) -> None:
    layer = make_layer(tracer_provider, meter_provider, policies=(), stages=())
    boom = ValueError("archive offline")
    models, _ = scripted_models([OPUS], [ai(("search", {"query": "q"}, "s1")), ai()])
    box = Toolbox(error=boom)
    agent = create_agent(models[OPUS], box.tools(), middleware=[SeamscopeMiddleware(layer, models)])

    with pytest.raises(ValueError) as raised:
        invoke(agent, "look it up", None, mode)

    assert raised.value is boom
    spans = span_exporter.get_finished_spans()
    failed = {s.name: attrs(s).get(c.ATTR_ERROR_TYPE) for s in spans if s.status.is_ok is False}
    assert {
        "execute_tool search": "ValueError",
        c.SPAN_ITERATION: "ValueError",
        f"invoke_agent {AGENT}": "ValueError",
    } == failed


def test_a_failing_model_call_propagates_unchanged(
    span_exporter: InMemorySpanExporter, tracer_provider: Any, meter_provider: Any
) -> None:
    layer = make_layer(tracer_provider, meter_provider, policies=(), stages=())
    boom = ConnectionError("provider down")
    models, _ = scripted_models([OPUS], [ai()], error=boom)
    agent = create_agent(
        models[OPUS], Toolbox().tools(), middleware=[SeamscopeMiddleware(layer, models)]
    )

    with pytest.raises(ConnectionError) as raised:
        agent.invoke({"messages": [HumanMessage("hi")]})

    assert raised.value is boom
    failed = {
        s.name: attrs(s).get(c.ATTR_ERROR_TYPE)
        for s in span_exporter.get_finished_spans()
        if s.status.status_code is StatusCode.ERROR
    }
    assert {
        f"chat {OPUS}": "ConnectionError",
        c.SPAN_ITERATION: "ConnectionError",
        f"invoke_agent {AGENT}": "ConnectionError",
    } == failed


class _BrokenTracer(NoOpTracer):
    def start_span(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("exporter misconfigured")

    def start_as_current_span(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("exporter misconfigured")


class _BrokenTracerProvider(TracerProvider):
    def get_tracer(self, *args: Any, **kwargs: Any) -> Any:
        return _BrokenTracer()


def run_sales_turn(layer: DecisionLayer) -> tuple[list[ModelCall], Toolbox, dict[str, Any]]:
    models, calls = scripted_models([OPUS, HAIKU], TURN_1)
    box = Toolbox()
    agent = create_agent(
        models[OPUS], box.tools(), middleware=[SeamscopeMiddleware(layer, models, role=AGENT)]
    )
    result = agent.invoke(
        {"messages": [HumanMessage("How did Q3 sales go?")]},
        config={"configurable": {"thread_id": THREAD}},
    )
    return calls, box, result


def test_broken_telemetry_never_changes_the_decisions(
    tracer_provider: Any, meter_provider: Any
) -> None:
    healthy = run_sales_turn(make_layer(tracer_provider, meter_provider))
    broken = run_sales_turn(make_layer(_BrokenTracerProvider(), meter_provider))

    def summary(run: tuple[list[ModelCall], Toolbox, dict[str, Any]]) -> Any:
        calls, box, result = run
        return (
            [(call.model, call.tools, call.tool_choice) for call in calls],
            sorted(box.executed),
            [type(m).__name__ + ":" + str(m.content)[:40] for m in result["messages"]],
        )

    assert summary(healthy) == summary(broken)
    assert [HAIKU, HAIKU, HAIKU] == [call.model for call in broken[0]]


def test_a_raising_telemetry_hook_is_contained(
    span_exporter: InMemorySpanExporter,
    tracer_provider: Any,
    meter_provider: Any,
    captured_logs: list[dict[str, Any]],
) -> None:
    layer = make_layer(tracer_provider, meter_provider)

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("genai spans broken")

    layer.genai.start_chat = broken  # type: ignore[method-assign]
    layer.genai.start_tool = broken  # type: ignore[method-assign]
    calls, box, _ = run_sales_turn(layer)

    assert [HAIKU, HAIKU, HAIKU] == [call.model for call in calls]
    assert ("fetch_data", {"source": "sales_q3", "rows": 5}) in box.executed
    names = {s.name for s in span_exporter.get_finished_spans()}
    assert {f"invoke_agent {AGENT}", c.SPAN_ITERATION, c.SPAN_OFFLOAD_GATE} <= names
    assert not any(n.startswith(("chat ", "execute_tool ")) for n in names)
    contained = {
        (e["hook"], e["error_type"]) for e in captured_logs if e["event"] == c.LOG_TELEMETRY_ERROR
    }
    assert {
        ("chat", "RuntimeError"),
        ("execute_tool", "RuntimeError"),
    } == contained


def test_an_interrupted_run_resumes_in_the_same_trace(
    span_exporter: InMemorySpanExporter, tracer_provider: Any, meter_provider: Any
) -> None:
    @tool
    def deploy(service: str) -> str:
        """Deploy a service after a human approves."""
        answer = interrupt({"deploy": service})
        return f"deployed {service}: {answer}"

    layer = make_layer(tracer_provider, meter_provider, policies=(), stages=())
    models, _ = scripted_models([OPUS], [ai(("deploy", {"service": "api"}, "d1")), ai(text="ok")])
    agent = create_agent(
        models[OPUS],
        [deploy],
        middleware=[SeamscopeMiddleware(layer, models)],
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": THREAD}}
    paused = agent.invoke({"messages": [HumanMessage("ship it")]}, config=config)
    assert "__interrupt__" in paused
    assert [] == [s.name for s in span_exporter.get_finished_spans() if s.parent is None]

    done = agent.invoke(Command(resume="approved"), config=config)

    assert "ok" == done["messages"][-1].content
    spans = span_exporter.get_finished_spans()
    roots = [s for s in spans if s.parent is None]
    assert [f"invoke_agent {AGENT}"] == [r.name for r in roots]
    assert {roots[0].context.trace_id} == {s.context.trace_id for s in spans}
    # the interrupt is not an error; the paused and the resumed tool attempts
    # both sit under the iteration that emitted the call
    assert [] == [s.name for s in spans if s.status.status_code is StatusCode.ERROR]
    first_iteration: list[Any] = [
        (f"chat {OPUS}", []),
        ("execute_tool deploy", []),
        ("execute_tool deploy", []),
        (c.SPAN_SEAM_POST_MODEL, [(c.SPAN_DISPATCH, [])]),
        (c.SPAN_SEAM_PRE_MODEL, []),
        (c.SPAN_SELECT_TOOLS, []),
    ]
    last_iteration: list[Any] = [
        (f"chat {OPUS}", []),
        (c.SPAN_SEAM_PRE_MODEL, []),
        (c.SPAN_SELECT_TOOLS, []),
    ]
    expected = (
        f"invoke_agent {AGENT}",
        [(c.SPAN_ITERATION, first_iteration), (c.SPAN_ITERATION, last_iteration)],
    )
    assert expected == tree(roots[0], spans)


# -- configuration ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"layer": object()}, "layer"),
        ({"models": {"x": object()}}, "models['x']"),
        ({"models": ["x"]}, "models"),
        ({"role": 3}, "role"),
        ({"scope": 3}, "scope"),
        ({"max_stored_outputs": 0}, "max_stored_outputs"),
    ],
)
def test_configuration_errors_name_the_argument(
    kwargs: dict[str, Any], field: str, tracer_provider: Any, meter_provider: Any
) -> None:
    options: dict[str, Any] = {"layer": make_layer(tracer_provider, meter_provider)}
    options.update(kwargs)
    with pytest.raises(ValueError, match=re.escape(f"SeamscopeMiddleware.{field}")):
        SeamscopeMiddleware(**options)


def test_the_recall_tool_is_registered_only_with_tool_hooks(
    tracer_provider: Any, meter_provider: Any
) -> None:
    """It is run by LangChain's tools node only when seamscope has tool hooks
    (a watched middleware has them); else it is answered in the model call."""
    from langchain.agents.middleware import ToolRetryMiddleware

    layer = make_layer(tracer_provider, meter_provider)
    assert [] == list(SeamscopeMiddleware(layer).tools)
    assert [] == list(SeamscopeMiddleware(layer, offload=False).tools)
    hooked = SeamscopeMiddleware(layer)
    hooked.watching(ToolRetryMiddleware())
    assert [RECALL_TOOL] == [t.name for t in hooked.tools]
    unhooked = SeamscopeMiddleware(layer, offload=False)
    unhooked.watching(ToolRetryMiddleware())
    assert [] == list(unhooked.tools)


def test_role_and_scope_may_come_from_the_runtime_context(
    tracer_provider: Any, meter_provider: Any
) -> None:
    seen: list[tuple[str | None, dict[str, Any]]] = []

    def spy(ctx: DispatchContext) -> bool:
        seen.append((ctx.role, dict(ctx.scope)))
        return False

    policy = ToolCallPolicy("spy", match=spy, model=ModelConfig(HAIKU))
    layer = make_layer(tracer_provider, meter_provider, policies=(policy,), stages=())
    models, _ = scripted_models([OPUS], [ai(text="done")])
    middleware = SeamscopeMiddleware(
        layer,
        models,
        role=lambda runtime: runtime.context["role"],
        scope=lambda runtime: {"tenant": runtime.context["tenant"]},
    )
    agent = create_agent(models[OPUS], Toolbox().tools(), middleware=[middleware])
    agent.invoke({"messages": [HumanMessage("hi")]}, context={"role": "analyst", "tenant": "acme"})

    assert [("analyst", {"tenant": "acme"})] == seen


def test_openinference_loaded_but_not_instrumented_is_left_alone(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Its span lookup prints a warning when it is not instrumented: seamscope asks
    it for the current span only when it is."""
    pytest.importorskip(
        "openinference.instrumentation.langchain",
        reason="OpenInference's LangChain instrumentation is not installed",
    )

    from seamscope.adapters.langchain._runs import active_parent

    assert (None, "") == (active_parent(), capsys.readouterr().out)


def test_an_offered_recall_cannot_read_another_conversation(
    tracer_provider: Any, meter_provider: Any
) -> None:
    """Conversation b holds a stub of its own, so the recall tool is offered; it
    asks for a's offload by id and is told there is none in this conversation."""
    ids = iter(["off-1", "off-2"])
    layer = make_layer(
        tracer_provider, meter_provider, policies=(), stages=(), offload_id_factory=ids.__next__
    )
    script = [
        ai(("big_report", {"topic": "q3"}, "b1")),
        ai(text="stored"),
        ai(("big_report", {"topic": "q4"}, "b2")),
        ai((RECALL_TOOL, {"offload_id": "off-1"}, "r1")),
        ai(text="done"),
    ]
    models, log = scripted_models([OPUS], script)
    agent = create_agent(
        models[OPUS],
        Toolbox().tools(),
        middleware=[SeamscopeMiddleware(layer, models)],
        checkpointer=InMemorySaver(),
    )
    agent.invoke({"messages": [HumanMessage("a")]}, config={"configurable": {"thread_id": "a"}})
    other = agent.invoke(
        {"messages": [HumanMessage("b")]}, config={"configurable": {"thread_id": "b"}}
    )

    assert RECALL_TOOL in (log[3].tools or [])
    (answer,) = [m for m in other["messages"] if getattr(m, "tool_call_id", None) == "r1"]
    assert "error: no offloaded output 'off-1' in this conversation" == answer.content
