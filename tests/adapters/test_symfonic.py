"""symfonic-core's SymfonicAgent instrumented by seamscope, driven offline.

symfonic's own ReAct loop runs unmodified: a scripted chat model, a provider
that records the ModelConfig symfonic asks it for, tools that record what
really ran. Each test checks what symfonic really decided and what seamscope
recorded about it, on fresh in-memory providers passed in.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Sequence
from contextlib import nullcontext
from decimal import Decimal
from typing import Any

import pytest
import symfonic.core.tool_offload_gate as tog
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from opentelemetry import trace
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from symfonic.agent.engine import _AgentModelResolver
from symfonic.core.callbacks import BaseCallbackHandler, CallbackManager
from symfonic.core.config import AgentConfig, ModelConfig
from symfonic.core.contracts import ToolCallPolicy

from seamscope.adapters.symfonic import instrument_symfonic, symfonic_pricing
from seamscope.decisions import OffloadLedger
from seamscope.telemetry import OTelObserver, TelemetryConfig
from seamscope.telemetry import conventions as c

from ._symfonic_support import (
    BIG_OUTPUT,
    RecordingProvider,
    Warehouse,
    build_agent,
    call,
    config,
    counters,
    emits,
    events,
    histogram_counts,
    last_user_text,
    memory_id,
    named,
    offload_settings,
    parent_of,
    raising,
    span_tree,
    tool_message,
    with_usage,
)

pytestmark = [
    # symfonic-core 9.12 warns about its own internals on every agent construction.
    pytest.mark.filterwarnings("ignore:ContextBudget is deprecated:DeprecationWarning"),
]

OPUS = "claude-opus-4-6"  # the agent's default model
HAIKU = "claude-haiku-4-5"
GPT4O = "gpt-4o"
AGENT = "analyst"
CONVERSATION = "conv-7"
TURN_1 = "show last month's sales by brand"
TURN_2 = "summarise the dump"
ROUTED = frozenset({"run_block", "fetch_data", "search", "dump_table"})  # not archive_search
STUB_HEADER = "[symfonic.tool_memory v1]"
REACT_LOGGER = "symfonic.core.nodes.react"
SYMFONIC_PRICING = c.PricingSource.SYMFONIC.value  # a decision priced by symfonic's table


# -- the scenario --------------------------------------------------------------


def is_sales(ctx: Any) -> bool:
    return "sales" in last_user_text(ctx).lower()


def policies() -> tuple[ToolCallPolicy, ...]:
    """A raising classifier first, then the sales policy, then a redirect to an unrouted tool."""
    return (
        ToolCallPolicy(
            name="flaky_classifier",
            match=raising(RuntimeError("classifier offline")),
            model=ModelConfig(model_name="gpt-4o-mini"),
            when_tool="run_block",
            redirect_to="search",
        ),
        ToolCallPolicy(
            name="sales_data_read",
            match=is_sales,
            model=ModelConfig(model_name=HAIKU),
            when_tool="run_block",
            redirect_to="fetch_data",
            guard=lambda ctx: True,  # the stored table exists
            args_transform=lambda args, ctx: {"table": "brand_sales"},
        ),
        ToolCallPolicy(
            name="archive_lookup",
            match=lambda ctx: True,
            when_tool="search",
            redirect_to="archive_search",
        ),
    )


def later_hops_on_gpt4o(ctx: Any) -> ModelConfig | None:
    """The role model resolver: the default model on a turn's first hop, gpt-4o after."""
    return ModelConfig(model_name=GPT4O) if ctx.turn_hop_index >= 1 else None


SCRIPT = [
    # turn 1
    emits(
        call("run_block", {"code": "select brand, sum(amount) from sales"}, "c1"),
        call("search", {"q": "sales notes"}, "c2"),
    ),
    emits(call("dump_table", {"table": "sales"}, "c3")),
    AIMessage(content="Sales are up 4%."),
    # turn 2
    emits(call("run_block", {"code": "summary"}, "c4")),
    AIMessage(content="Here is the summary."),
]


def turn_1_history() -> list[BaseMessage]:
    """Turn 1 as the application carries it into turn 2 (as dispatched)."""
    return [
        HumanMessage(content=TURN_1),
        emits(
            call("fetch_data", {"table": "brand_sales"}, "c1"),
            call("search", {"q": "sales notes"}, "c2"),
        ),
        tool_message("rows of brand_sales", "c1", "fetch_data"),
        tool_message("3 notes", "c2", "search"),
        emits(call("dump_table", {"table": "sales"}, "c3")),
        tool_message(BIG_OUTPUT, "c3", "dump_table"),
        AIMessage(content="Sales are up 4%."),
    ]


class SummaryRewriter(BaseCallbackHandler):
    """The adopter's own on_tool_call_dispatch: run_block becomes a stored summary."""

    async def on_tool_call_dispatch(self, event: Any, state: Any) -> dict[str, Any] | None:
        if event.tool_name == "run_block":
            return {"tool_name": "fetch_data", "args": {"table": "dump_summary"}}
        return None


def sales_agent(**update: Any) -> tuple[Any, RecordingProvider, Warehouse]:
    warehouse = Warehouse()
    cfg = config(
        tool_call_policies=policies(),
        role_model_resolver=later_hops_on_gpt4o,
        role_tools={"action": ROUTED},
        **offload_settings(),
        **update,
    )
    agent, provider = build_agent(SCRIPT, cfg, warehouse.tools)
    return agent, provider, warehouse


async def converse(agent: Any, instrumentation: Any = None) -> list[str | None]:
    """Turn 1, then turn 2 with turn 1 as history and the adopter's rewriter."""
    async with agent:
        with instrumentation.conversation(CONVERSATION) if instrumentation else nullcontext():
            first = await agent.run(TURN_1)
            second = await agent.run(
                TURN_2, history=turn_1_history(), callbacks=[SummaryRewriter()]
            )
        # No span was left attached to the caller's context.
        assert not trace.get_current_span().get_span_context().is_valid
    return [first.final_response, second.final_response]


class GateSpy:
    """Sits under seamscope's wrapper: what symfonic's gate really returned."""

    def __init__(self, gate: Any) -> None:
        self.gate = gate
        self.calls: list[tuple[Any, Any]] = []

    def __call__(self, inputs: Any) -> Any:
        decision = self.gate(inputs)
        self.calls.append((inputs, decision))
        return decision


def policy_event(policy: str, seam: str, result: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": c.EVENT_POLICY_EVALUATED,
        c.ATTR_POLICY_NAME: policy,
        c.ATTR_SEAM: seam,
        c.ATTR_POLICY_RESULT: result,
        **extra,
    }


PRE, POST = c.Seam.PRE_MODEL.value, c.Seam.POST_MODEL.value
FLAKY_ERROR_PRE = policy_event(
    "flaky_classifier", PRE, "error", **{c.ATTR_ERROR_TYPE: "RuntimeError"}
)
FLAKY_ERROR_POST = policy_event(
    "flaky_classifier", POST, "error", **{c.ATTR_ERROR_TYPE: "RuntimeError"}
)


POLICY_SUMMARY_KEYS = frozenset(
    {
        c.ATTR_POLICY_EVALUATED_COUNT,
        c.ATTR_POLICY_NOT_MATCHED_COUNT,
        c.ATTR_POLICY_SKIPPED_COUNT,
        c.ATTR_POLICY_PASSED_OVER,
        c.ATTR_POLICY_EVENTS_FOLDED,
    }
)


def policy_summary(
    evaluated: int, not_matched: int = 0, skipped: int = 0, passed_over: tuple[str, ...] = ()
) -> dict[str, Any]:
    """The folded policy attributes of a seam span (passed-over names only when any)."""
    attrs: dict[str, Any] = {
        c.ATTR_POLICY_EVALUATED_COUNT: evaluated,
        c.ATTR_POLICY_NOT_MATCHED_COUNT: not_matched,
        c.ATTR_POLICY_SKIPPED_COUNT: skipped,
    }
    if passed_over:
        attrs[c.ATTR_POLICY_PASSED_OVER] = passed_over
    return attrs


def summary_of(span: Any) -> dict[str, Any]:
    """The policy summary attributes a span really carries."""
    return {k: v for k, v in (span.attributes or {}).items() if k in POLICY_SUMMARY_KEYS}


def dispatch_attrs(
    call_id: str, emitted: str, final: str, summary: dict[str, Any], **decided: Any
) -> dict[str, Any]:
    attrs = {
        c.ATTR_GEN_AI_TOOL_CALL_ID: call_id,
        c.ATTR_DISPATCH_EMITTED_TOOL: emitted,
        c.ATTR_GEN_AI_CONVERSATION_ID: CONVERSATION,
        c.ATTR_GEN_AI_AGENT_NAME: AGENT,
        c.ATTR_DISPATCH_GUARD: "none",
        c.ATTR_DISPATCH_ADOPTER_OVERRIDE: False,
        c.ATTR_DISPATCH_PALETTE_GATE: "kept",
        c.ATTR_DISPATCH_FINAL_TOOL: final,
        c.ATTR_DISPATCH_ARGS_TRANSFORMED: False,
        c.ATTR_SEAM_WINNER_SOURCE: "none",
    }
    attrs.update(summary)
    attrs.update(decided)
    return attrs


# -- the conversation ------------------------------------------------------------


def test_a_two_turn_conversation_records_what_symfonic_decided(
    monkeypatch: pytest.MonkeyPatch,
    tracer_provider: Any,
    meter_provider: Any,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
    captured_logs: list[dict[str, Any]],
) -> None:
    spy = GateSpy(tog.evaluate_offload_gate)
    monkeypatch.setattr(tog, "evaluate_offload_gate", spy)
    global_provider = trace.get_tracer_provider()
    agent, provider, warehouse = sales_agent()
    inst = instrument_symfonic(
        agent,
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        agent_name=AGENT,
        telemetry_config=TelemetryConfig(decision_duration_metric=True),
    )

    finals = asyncio.run(converse(agent, inst))
    inst.uninstrument()
    spans = span_exporter.get_finished_spans()

    # What symfonic really did.
    assert ["Sales are up 4%.", "Here is the summary."] == finals
    assert [HAIKU, HAIKU, HAIKU, OPUS, GPT4O] == provider.requested
    # Turn 1, hop 0 (two calls, run concurrently by the tool node): run_block was
    # redirected by sales_data_read; archive_search is not routed, so search ran.
    # Then dump_table; in turn 2 the adopter rewrote run_block.
    executed = warehouse.executed
    assert [
        ("fetch_data", {"table": "brand_sales"}),
        ("search", {"q": "sales notes"}),
    ] == sorted(executed[:2], key=repr)
    assert [
        ("dump_table", {"table": "sales"}),
        ("fetch_data", {"table": "dump_summary"}),
    ] == executed[2:]
    wire = provider.model.wire
    dumps = [
        next(m for m in call_messages if isinstance(m, ToolMessage) and m.tool_call_id == "c3")
        for call_messages in wire[2:]
    ]
    assert BIG_OUTPUT == dumps[0].content  # turn 1: a current-turn result is never offloaded
    assert [True, True] == [str(m.content).startswith(STUB_HEADER) for m in dumps[1:]]
    assert [
        (OPUS, True, True),  # turn 2, hop 0 (opus) and hop 1 (gpt-4o): priced with hop 0's model
        (OPUS, True, True),
    ] == [(i.model_name, d.fire, d.net_saving_usd > 0) for i, d in spy.calls]

    # The span tree: one invoke_agent per turn, one iteration per react-node call.
    assert [
        (0, f"invoke_agent {AGENT}"),
        (1, c.SPAN_ITERATION),
        (2, c.SPAN_SEAM_PRE_MODEL),
        (2, f"chat {HAIKU}"),
        (2, c.SPAN_SEAM_POST_MODEL),
        (3, c.SPAN_DISPATCH),
        (3, c.SPAN_DISPATCH),
        (2, "execute_tool fetch_data"),
        (2, "execute_tool search"),
        (1, c.SPAN_ITERATION),
        (2, c.SPAN_SEAM_PRE_MODEL),
        (2, f"chat {HAIKU}"),
        (2, c.SPAN_SEAM_POST_MODEL),
        (3, c.SPAN_DISPATCH),
        (2, "execute_tool dump_table"),
        (1, c.SPAN_ITERATION),
        (2, c.SPAN_SEAM_PRE_MODEL),
        (2, f"chat {HAIKU}"),
        (0, f"invoke_agent {AGENT}"),
        (1, c.SPAN_ITERATION),
        (2, c.SPAN_SEAM_PRE_MODEL),
        (2, c.SPAN_OFFLOAD_GATE),
        (2, f"chat {OPUS}"),
        (2, c.SPAN_SEAM_POST_MODEL),
        (3, c.SPAN_DISPATCH),
        (2, "execute_tool fetch_data"),
        (1, c.SPAN_ITERATION),
        (2, c.SPAN_SEAM_PRE_MODEL),
        (2, c.SPAN_OFFLOAD_GATE),
        (2, f"chat {GPT4O}"),
        # the offload fired in turn 2, settled when the conversation block ended
        (0, c.SPAN_OFFLOAD_SETTLE),
    ] == span_tree(spans)
    assert [0, 1, 2, 0, 1] == [
        s.attributes[c.ATTR_ITERATION_INDEX] for s in named(spans, c.SPAN_ITERATION)
    ]
    assert {(CONVERSATION, AGENT)} == {
        (
            s.attributes.get(c.ATTR_GEN_AI_CONVERSATION_ID),
            s.attributes.get(c.ATTR_GEN_AI_AGENT_NAME),
        )
        for s in spans
        # these carry the conversation only
        if not s.name.startswith("execute_tool") and s.name != c.SPAN_OFFLOAD_SETTLE
    }

    # PRE seam: who chose the model, and the model the provider was really asked for.
    pre = named(spans, c.SPAN_SEAM_PRE_MODEL)
    assert [
        ("policy", "sales_data_read", HAIKU),
        ("policy", "sales_data_read", HAIKU),
        ("policy", "sales_data_read", HAIKU),
        ("default", None, OPUS),
        ("resolver", None, GPT4O),
    ] == [
        (
            s.attributes[c.ATTR_SEAM_WINNER_SOURCE],
            s.attributes.get(c.ATTR_POLICY_WINNER),
            s.attributes[c.ATTR_GEN_AI_REQUEST_MODEL],
        )
        for s in pre
    ]
    assert provider.requested == [
        s.attributes[c.ATTR_GEN_AI_REQUEST_MODEL] for s in named_prefix(spans, "chat ")
    ]
    # Events only for the matched and error evaluations; the rest are folded
    # into counts and the passed-over names, in evaluation order.
    turn_1_pre = [FLAKY_ERROR_PRE, policy_event("sales_data_read", PRE, "matched")]
    turn_2_pre = [FLAKY_ERROR_PRE]
    assert [turn_1_pre] * 3 + [turn_2_pre] * 2 == [events(s) for s in pre]
    assert [policy_summary(2)] * 3 + [
        policy_summary(3, 1, 1, ("sales_data_read", "archive_lookup"))
    ] * 2 == [summary_of(s) for s in pre]

    # POST seam: one dispatch per emitted call, from emitted to really dispatched.
    post = named(spans, c.SPAN_SEAM_POST_MODEL)
    assert [(2, 1), (1, 0), (1, 1)] == [
        (s.attributes[c.ATTR_SEAM_TOOL_CALLS], s.attributes[c.ATTR_SEAM_REWRITTEN]) for s in post
    ]
    dispatches = named(spans, c.SPAN_DISPATCH)
    assert [
        dispatch_attrs(
            "c1",
            "run_block",
            "fetch_data",
            policy_summary(2),
            **{
                c.ATTR_POLICY_WINNER: "sales_data_read",
                c.ATTR_DISPATCH_REDIRECT_TO: "fetch_data",
                c.ATTR_DISPATCH_GUARD: "passed",
                c.ATTR_DISPATCH_ARGS_TRANSFORMED: True,
                c.ATTR_SEAM_WINNER_SOURCE: "policy",
            },
        ),
        dispatch_attrs(
            "c2",
            "search",
            "search",
            policy_summary(3, 0, 2, ("flaky_classifier", "sales_data_read")),
            **{
                c.ATTR_POLICY_WINNER: "archive_lookup",
                c.ATTR_DISPATCH_REDIRECT_TO: "archive_search",
                c.ATTR_DISPATCH_PALETTE_GATE: "dropped",
                c.ATTR_SEAM_WINNER_SOURCE: "policy",
            },
        ),
        dispatch_attrs(
            "c3",
            "dump_table",
            "dump_table",
            policy_summary(3, 0, 3, ("flaky_classifier", "sales_data_read", "archive_lookup")),
        ),
        dispatch_attrs(
            "c4",
            "run_block",
            "fetch_data",
            policy_summary(3, 1, 1, ("sales_data_read", "archive_lookup")),
            **{c.ATTR_DISPATCH_ADOPTER_OVERRIDE: True, c.ATTR_SEAM_WINNER_SOURCE: "adopter"},
        ),
    ] == [dict(s.attributes) for s in dispatches]
    assert [
        [
            FLAKY_ERROR_POST,
            policy_event("sales_data_read", POST, "matched", **{c.ATTR_DISPATCH_GUARD: "passed"}),
        ],
        [policy_event("archive_lookup", POST, "matched")],
        [],  # every policy was skipped: counts and names only
        [FLAKY_ERROR_POST],
    ] == [events(s) for s in dispatches]
    assert [post[0]] * 2 + [post[1], post[2]] == [parent_of(s, spans) for s in dispatches]

    # The offload gate: symfonic's own priced decision, once per gate call.
    gates = named(spans, c.SPAN_OFFLOAD_GATE)
    offload_id = gates[0].attributes[c.ATTR_OFFLOAD_ID]
    assert re.fullmatch("[0-9a-f]{16}", str(offload_id))
    assert [
        {
            c.ATTR_GEN_AI_CONVERSATION_ID: CONVERSATION,
            c.ATTR_GEN_AI_AGENT_NAME: AGENT,
            c.ATTR_GEN_AI_TOOL_CALL_ID: "c3",
            c.ATTR_GEN_AI_TOOL_NAME: "dump_table",
            c.ATTR_OFFLOAD_FIRE: decision.fire,
            c.ATTR_OFFLOAD_NET_SAVING_USD: decision.net_saving_usd,
            c.ATTR_OFFLOAD_REPREFILL_SAVING_USD: decision.reprefill_saving_usd,
            c.ATTR_OFFLOAD_STUB_CARRY_COST_USD: decision.stub_carry_cost_usd,
            c.ATTR_OFFLOAD_EXPECTED_RECALL_HOP_COST_USD: decision.expected_recall_hop_cost_usd,
            c.ATTR_OFFLOAD_REASON: decision.reason,
            c.ATTR_OFFLOAD_REASON_CODE: "net_positive",
            c.ATTR_OFFLOAD_OUTPUT_TOKENS: 25_000.0,
            c.ATTR_OFFLOAD_HORIZON: 5,
            c.ATTR_OFFLOAD_RECALL_PROBABILITY: 0.5,
            c.ATTR_OFFLOAD_PRICING_SOURCE: SYMFONIC_PRICING,
            c.ATTR_GEN_AI_REQUEST_MODEL: OPUS,
            c.ATTR_OFFLOAD_ID: offload_id,
            c.ATTR_OFFLOAD_STUB_TOKENS: 80,
            c.ATTR_OFFLOAD_THRESHOLD_TOKENS: 15_000,
            c.ATTR_OFFLOAD_RECALL_INPUT_TOKENS: 12_500,
            c.ATTR_OFFLOAD_RECALL_OUTPUT_TOKENS: 250,
            c.ATTR_OFFLOAD_PRIOR_SOURCE: c.PriorSource.DEFAULT.value,
        }
        for _, decision in spy.calls
    ] == [dict(s.attributes) for s in gates]
    assert pytest.approx(0.588625) == gates[0].attributes[c.ATTR_OFFLOAD_NET_SAVING_USD]
    iterations = named(spans, c.SPAN_ITERATION)
    assert iterations[3:] == [parent_of(s, spans) for s in gates]

    # Metrics, from the same decisions.
    points = counters(metric_reader)
    expected = {
        (c.METRIC_OFFLOAD_DECISIONS.name, attrs(OPUS, "true", "net_positive")): 2,
        (c.METRIC_POLICY_EVALUATIONS.name, evaluation(PRE, "flaky_classifier", "error")): 5,
        (c.METRIC_POLICY_EVALUATIONS.name, evaluation(POST, "flaky_classifier", "error")): 2,
        (c.METRIC_POLICY_WINS.name, win(PRE, "policy", "sales_data_read")): 3,
        (c.METRIC_POLICY_WINS.name, win(PRE, "resolver", "none")): 1,
        (c.METRIC_REDIRECTS.name, redirect("sales_data_read", "kept")): 1,
        (c.METRIC_REDIRECTS.name, redirect("archive_lookup", "dropped")): 1,
        (c.METRIC_REDIRECTS.name, redirect("none", "kept")): 1,
    }
    assert expected == {key: points.get(key) for key in expected}
    # One duration per decision: each PRE and POST seam, each gate call (symfonic
    # runs no seamscope tool selection, and dispatches are not timed on their own).
    assert {
        kind(c.DecisionKind.PRE_MODEL): 5,
        kind(c.DecisionKind.POST_MODEL): 3,
        kind(c.DecisionKind.OFFLOAD_GATE): 2,
    } == histogram_counts(metric_reader, c.METRIC_DECISION_DURATION.name)
    assert [{"policy": "archive_lookup", "emitted_tool": "search", "target": "archive_search"}] == [
        {k: e[k] for k in ("policy", "emitted_tool", "target")}
        for e in captured_logs
        if e["event"] == c.LOG_PALETTE_GATE_DROP
    ]

    # symfonic's own OTel layer stayed off and no global provider was set.
    assert agent._config.otel_enabled is False
    assert global_provider is trace.get_tracer_provider()


def named_prefix(spans: Sequence[Any], prefix: str) -> list[Any]:
    return sorted((s for s in spans if s.name.startswith(prefix)), key=lambda s: s.start_time)


def attrs(model: str, fire: str, reason_code: str) -> frozenset[Any]:
    return frozenset(
        {
            c.ATTR_GEN_AI_REQUEST_MODEL: model,
            c.ATTR_OFFLOAD_FIRE: fire,
            c.ATTR_OFFLOAD_REASON_CODE: reason_code,
        }.items()
    )


def evaluation(seam: str, policy: str, result: str) -> frozenset[Any]:
    return frozenset(
        {c.ATTR_SEAM: seam, c.ATTR_POLICY_NAME: policy, c.ATTR_POLICY_RESULT: result}.items()
    )


def win(seam: str, source: str, policy: str) -> frozenset[Any]:
    return frozenset(
        {c.ATTR_SEAM: seam, c.ATTR_SEAM_WINNER_SOURCE: source, c.ATTR_POLICY_NAME: policy}.items()
    )


def kind(decision: c.DecisionKind) -> frozenset[Any]:
    return frozenset({c.ATTR_DECISION_KIND: decision.value}.items())


def redirect(policy: str, verdict: str) -> frozenset[Any]:
    return frozenset({c.ATTR_POLICY_NAME: policy, c.ATTR_DISPATCH_PALETTE_GATE: verdict}.items())


# -- the offload ledger ---------------------------------------------------------------

DUMP_CALL = "c_dump"
RECALL_CALL = "c_recall"
TURN_3 = "which brand leads?"
RECALLED_CHARS = 50_000  # symfonic caps what recall_tool_result returns


def ledger_script() -> list[AIMessage]:
    """Three turns; the usage each call reports (input tokens include cache reads/writes)."""
    recall = call(
        "recall_tool_result", {"mem_id": memory_id(DUMP_CALL), "format": "full"}, RECALL_CALL
    )
    return [
        # turn 1: the dump enters the conversation (the prompt is written to the cache)
        with_usage(
            emits(call("dump_table", {"table": "sales"}, DUMP_CALL)), 4_000, 40, cache_write=4_000
        ),
        with_usage(AIMessage(content="Dumped."), 26_000, 10, cache_read=3_000),
        # turn 2: symfonic offloads the dump; the model answers from its stub
        with_usage(AIMessage(content="Sales are up."), 4_100, 20, cache_read=3_000),
        # turn 3: the stub again; the model recalls the dump, then answers
        with_usage(emits(recall), 4_200, 50, cache_read=4_000),
        with_usage(AIMessage(content="Brand A leads."), 16_800, 30),
    ]


def dump_turn() -> list[BaseMessage]:
    """Turn 1 of the ledger script as the application carries it into turn 2."""
    return [
        HumanMessage(content=TURN_1),
        emits(call("dump_table", {"table": "sales"}, DUMP_CALL)),
        tool_message(BIG_OUTPUT, DUMP_CALL, "dump_table"),
        AIMessage(content="Dumped."),
    ]


def answer_turn() -> list[BaseMessage]:
    """Turn 2 of the ledger script as the application carries it into turn 3."""
    return [HumanMessage(content=TURN_2), AIMessage(content="Sales are up.")]


async def three_turns(agent: Any, inst: Any, conversation: str | None) -> list[str | None]:
    """Turn 1, then turns 2 and 3 with the earlier turns as history, in one block."""
    turn_1, turn_2 = dump_turn(), answer_turn()
    async with agent:
        with inst.conversation(conversation) if inst else nullcontext():
            first = await agent.run(TURN_1)
            second = await agent.run(TURN_2, history=turn_1)
            third = await agent.run(TURN_3, history=turn_1 + turn_2)
    return [first.final_response, second.final_response, third.final_response]


def cost(kind: str) -> frozenset[Any]:
    return frozenset(
        {
            c.ATTR_GEN_AI_REQUEST_MODEL: OPUS,
            c.ATTR_OFFLOAD_COST_KIND: kind,
            c.ATTR_OFFLOAD_MECHANISM: "seamscope_gate",
        }.items()
    )


def input_tokens(kind: str, active: str) -> frozenset[Any]:
    return frozenset(
        {
            c.ATTR_GEN_AI_REQUEST_MODEL: OPUS,
            c.ATTR_USAGE_CACHE: kind,
            c.ATTR_OFFLOAD_ACTIVE: active,
        }.items()
    )


def test_an_offload_symfonic_fires_and_recalls_is_settled_in_the_ledger(
    tracer_provider: Any,
    meter_provider: Any,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
) -> None:
    warehouse = Warehouse()
    agent, provider = build_agent(ledger_script(), config(**offload_settings()), warehouse.tools)
    inst = instrument_symfonic(
        agent, tracer_provider=tracer_provider, meter_provider=meter_provider, agent_name=AGENT
    )

    finals = asyncio.run(three_turns(agent, inst, CONVERSATION))
    inst.uninstrument()
    spans = span_exporter.get_finished_spans()

    # What symfonic did: the dump went on the wire whole in turn 1, as its stub
    # from turn 2 on; in turn 3 the model recalled it (capped at 50 000 chars)
    # and the next call carried the stub and the recalled text.
    assert ["Dumped.", "Sales are up.", "Brand A leads."] == finals
    assert [("dump_table", {"table": "sales"})] == warehouse.executed
    assert [OPUS] * 5 == provider.requested
    wire = provider.model.wire
    dumps = [next(m for m in w if getattr(m, "tool_call_id", None) == DUMP_CALL) for w in wire[1:]]
    assert [False, True, True, True] == [str(m.content).startswith(STUB_HEADER) for m in dumps]
    assert f"mem={memory_id(DUMP_CALL)}" in str(dumps[1].content)
    [recalled] = [m for m in wire[4] if getattr(m, "tool_call_id", None) == RECALL_CALL]
    assert RECALLED_CHARS == len(str(recalled.content))

    # symfonic decided the offload three times (every iteration re-decides it):
    # one offload id, its predicted saving counted once.
    gates = named(spans, c.SPAN_OFFLOAD_GATE)
    [offload_id] = {s.attributes[c.ATTR_OFFLOAD_ID] for s in gates}
    assert [True] * 3 == [s.attributes[c.ATTR_OFFLOAD_FIRE] for s in gates]

    # Realized economics, per event at symfonic's opus prices ($5/M input,
    # $25/M output, $0.50/M cache read): the stub was carried by two calls
    # (turn 2, turn 3 before the recall), each saving 25 000 tokens and paying
    # for the stub really sent (its characters / 4: not the gate's assumed 80
    # tokens); the call after the recall still shows the stub,
    # but the recalled output is back in its prompt, so it counts neither a
    # saving nor a stub cost; the recall cost its 12 500 recalled tokens plus
    # the 50 output tokens of the call that asked for it; the call after the
    # recall read nothing from the cache where the conversation's pre-offload
    # ratio (3 000 / 30 000) expected 1 680 tokens.
    points = counters(metric_reader)
    model = frozenset({c.ATTR_GEN_AI_REQUEST_MODEL: OPUS}.items())
    gated = frozenset(
        {c.ATTR_GEN_AI_REQUEST_MODEL: OPUS, c.ATTR_OFFLOAD_MECHANISM: "seamscope_gate"}.items()
    )
    expected = {
        (c.METRIC_OFFLOAD_DECISIONS.name, attrs(OPUS, "true", "net_positive")): 3,
        (c.METRIC_OFFLOAD_PREDICTED_NET_SAVING.name, model): pytest.approx(0.588625),
        (c.METRIC_OFFLOAD_REALIZED_SAVINGS.name, gated): pytest.approx(2 * 25_000 * 5e-6),
        (c.METRIC_OFFLOAD_REALIZED_COSTS.name, cost("stub_carry")): pytest.approx(
            2 * stub_sent(provider) * 5e-6
        ),
        (c.METRIC_OFFLOAD_REALIZED_COSTS.name, cost("recall")): pytest.approx(
            12_500 * 5e-6 + 50 * 25e-6
        ),
        (c.METRIC_OFFLOAD_REALIZED_COSTS.name, cost("cache_disruption")): pytest.approx(
            1_680 * (5e-6 - 0.5e-6)
        ),
        (c.METRIC_OFFLOAD_RECALLS.name, gated): 1,
        (
            c.METRIC_OFFLOAD_SETTLED.name,
            frozenset(
                {
                    c.ATTR_GEN_AI_REQUEST_MODEL: OPUS,
                    c.ATTR_OFFLOAD_OUTCOME: "gain",
                    c.ATTR_OFFLOAD_MECHANISM: "seamscope_gate",
                }.items()
            ),
        ): 1,
        # the cache reads and writes symfonic reported, before and after the offload
        (c.METRIC_MODEL_INPUT_TOKENS.name, input_tokens("write", "false")): 4_000,
        (c.METRIC_MODEL_INPUT_TOKENS.name, input_tokens("read", "false")): 3_000,
        (c.METRIC_MODEL_INPUT_TOKENS.name, input_tokens("uncached", "false")): 23_000,
        (c.METRIC_MODEL_INPUT_TOKENS.name, input_tokens("read", "true")): 7_000,
        (c.METRIC_MODEL_INPUT_TOKENS.name, input_tokens("uncached", "true")): 1_100 + 200 + 16_800,
    }
    assert expected == {key: points.get(key) for key in expected}

    # The settlement, when the conversation block ended: a gain, linked to the
    # span of the decision that started the offload.
    [settlement] = inst.ledger.settlements
    assert (
        offload_id,
        CONVERSATION,
        OPUS,
        c.SettleTrigger.CONVERSATION_END,
        2,
        1,
        c.OffloadOutcome.GAIN,
    ) == (
        settlement.offload_id,
        settlement.conversation_id,
        settlement.model,
        settlement.trigger,
        settlement.turns_carried,
        settlement.recalls,
        settlement.outcome,
    )
    # costs: the stub sent twice, the recall $0.06375, the cache disruption $0.00756
    costs = 2 * Decimal(str(stub_sent(provider))) * Decimal("5e-6") + Decimal("0.07131")
    assert (Decimal("0.588625"), Decimal("0.25"), costs, Decimal("0.25") - costs) == (
        settlement.predicted_net_saving.quantize(Decimal("0.000001")),
        settlement.realized_savings,
        settlement.realized_costs,
        settlement.realized_net_saving,
    )
    [settle] = named(spans, c.SPAN_OFFLOAD_SETTLE)
    assert {
        c.ATTR_OFFLOAD_ID: offload_id,
        c.ATTR_GEN_AI_CONVERSATION_ID: CONVERSATION,
        c.ATTR_OFFLOAD_OUTCOME: "gain",
        c.ATTR_OFFLOAD_SETTLE_TRIGGER: "conversation_end",
        c.ATTR_OFFLOAD_TURNS_CARRIED: 2,
        c.ATTR_OFFLOAD_RECALLS: 1,
    } == {
        k: settle.attributes.get(k)
        for k in (
            c.ATTR_OFFLOAD_ID,
            c.ATTR_GEN_AI_CONVERSATION_ID,
            c.ATTR_OFFLOAD_OUTCOME,
            c.ATTR_OFFLOAD_SETTLE_TRIGGER,
            c.ATTR_OFFLOAD_TURNS_CARRIED,
            c.ATTR_OFFLOAD_RECALLS,
        )
    }
    assert [gates[0].context] == [link.context for link in settle.links]
    assert 0 == len(inst.ledger)  # the conversation was settled and forgotten

    # The chat spans carry the usage symfonic reported, cache tokens included.
    # (cache writes under today's name and, for one release, the old one too)
    assert [
        (4_000, 40, None, 4_000, 4_000),
        (26_000, 10, 3_000, None, None),
        (4_100, 20, 3_000, None, None),
    ] == [
        (
            s.attributes[c.ATTR_GEN_AI_USAGE_INPUT_TOKENS],
            s.attributes[c.ATTR_GEN_AI_USAGE_OUTPUT_TOKENS],
            s.attributes.get(c.ATTR_GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS),
            s.attributes.get(c.ATTR_GEN_AI_USAGE_CACHE_WRITE_INPUT_TOKENS),
            s.attributes.get(c.ATTR_GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS),
        )
        for s in named_prefix(spans, "chat ")[:3]
    ]


def stub_sent(provider: Any) -> float:
    """The size of the stub symfonic really sent for the dump (characters / 4),
    read from what the model received."""
    for wire in provider.model.wire:
        for message in wire:
            content = str(getattr(message, "content", ""))
            if getattr(message, "tool_call_id", None) == DUMP_CALL and content.startswith(
                STUB_HEADER
            ):
                return len(content) / 4
    raise AssertionError("no stub was sent")


def test_each_outermost_conversation_block_settles_on_its_own(
    tracer_provider: Any, meter_provider: Any, span_exporter: InMemorySpanExporter
) -> None:
    agent, provider = build_agent(ledger_script(), config(**offload_settings()), Warehouse().tools)
    inst = instrument_symfonic(
        agent, tracer_provider=tracer_provider, meter_provider=meter_provider
    )
    turn_1, turn_2 = dump_turn(), answer_turn()

    async def scenario() -> None:
        async with agent:
            with inst.conversation(CONVERSATION):
                await agent.run(TURN_1)
                with inst.conversation(CONVERSATION):  # nested: the outer block ends it
                    await agent.run(TURN_2, history=turn_1)
                assert 1 == len(inst.ledger)
            with inst.conversation(CONVERSATION):
                await agent.run(TURN_3, history=turn_1 + turn_2)

    asyncio.run(scenario())
    inst.uninstrument()

    # Each block is a conversation: the output symfonic offloads again in the
    # second block is a new offload there (no pre-offload calls: no cache
    # baseline, so no cache disruption is charged).
    first, second = inst.ledger.settlements
    assert first.offload_id != second.offload_id
    stub_cost = Decimal(str(stub_sent(provider))) * Decimal("5e-6")  # the stub really sent
    assert [
        (1, 0, Decimal("0.125"), stub_cost),
        (1, 1, Decimal("0.125"), Decimal("0.06375") + stub_cost),
    ] == [
        (s.turns_carried, s.recalls, s.realized_savings, s.realized_costs) for s in (first, second)
    ]
    gates = named(span_exporter.get_finished_spans(), c.SPAN_OFFLOAD_GATE)
    assert [first.offload_id, second.offload_id, second.offload_id] == [
        g.attributes[c.ATTR_OFFLOAD_ID] for g in gates
    ]


def test_an_offload_the_ledger_already_settled_still_counts_what_it_saves(
    tracer_provider: Any, meter_provider: Any, metric_reader: InMemoryMetricReader
) -> None:
    agent, provider = build_agent(ledger_script(), config(**offload_settings()), Warehouse().tools)
    inst = instrument_symfonic(
        agent, tracer_provider=tracer_provider, meter_provider=meter_provider
    )
    turn_1, turn_2 = dump_turn(), answer_turn()

    async def scenario() -> None:
        async with agent:
            with inst.conversation(CONVERSATION):
                await agent.run(TURN_1)
                await agent.run(TURN_2, history=turn_1)
                inst.ledger.settle(CONVERSATION)  # e.g. settled as idle by a busy ledger
                await agent.run(TURN_3, history=turn_1 + turn_2)

    asyncio.run(scenario())
    inst.uninstrument()

    # The settlement holds what the ledger saw until then; the realized
    # counters still count turn 3's carried stub and recall.
    [settlement] = inst.ledger.settlements
    assert (c.SettleTrigger.EXPLICIT, 1, 0) == (
        settlement.trigger,
        settlement.turns_carried,
        settlement.recalls,
    )
    points = counters(metric_reader)
    gated = frozenset(
        {c.ATTR_GEN_AI_REQUEST_MODEL: OPUS, c.ATTR_OFFLOAD_MECHANISM: "seamscope_gate"}.items()
    )
    stub_cost = 2 * stub_sent(provider) * 5e-6  # two calls carried the stub really sent
    assert [pytest.approx(0.25), pytest.approx(stub_cost), pytest.approx(0.06375), 1] == [
        points.get((c.METRIC_OFFLOAD_REALIZED_SAVINGS.name, gated)),
        points.get((c.METRIC_OFFLOAD_REALIZED_COSTS.name, cost("stub_carry"))),
        points.get((c.METRIC_OFFLOAD_REALIZED_COSTS.name, cost("recall"))),
        points.get((c.METRIC_OFFLOAD_RECALLS.name, gated)),
    ]


def test_without_a_conversation_id_the_ledger_is_not_fed(
    tracer_provider: Any,
    meter_provider: Any,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
) -> None:
    agent, _ = build_agent(ledger_script(), config(**offload_settings()), Warehouse().tools)
    inst = instrument_symfonic(
        agent, tracer_provider=tracer_provider, meter_provider=meter_provider
    )

    finals = asyncio.run(three_turns(agent, inst, None))
    inst.uninstrument()

    assert ["Dumped.", "Sales are up.", "Brand A leads."] == finals
    spans = span_exporter.get_finished_spans()
    assert 3 == len(named(spans, c.SPAN_OFFLOAD_GATE))  # the decisions are still recorded
    assert [] == named(spans, c.SPAN_OFFLOAD_SETTLE)
    assert ([], 0) == (inst.ledger.settlements, len(inst.ledger))
    ledger_metrics = {
        c.METRIC_OFFLOAD_REALIZED_SAVINGS.name,
        c.METRIC_OFFLOAD_REALIZED_COSTS.name,
        c.METRIC_OFFLOAD_RECALLS.name,
        c.METRIC_MODEL_INPUT_TOKENS.name,
    }
    assert [] == [key for key in counters(metric_reader) if key[0] in ledger_metrics]


def test_the_default_ledger_prices_with_symfonic_table(tracer_provider: Any) -> None:
    agent, _ = build_agent([AIMessage(content="ok")], config(), Warehouse().tools)
    with instrument_symfonic(agent, tracer_provider=tracer_provider) as inst:
        ledger = inst.ledger
        quote = ledger._pricing.lookup(OPUS)
    assert quote is not None
    assert (Decimal("5.0"), Decimal("25.0"), Decimal("0.5"), Decimal("6.25")) == (
        quote.price.input_per_mtok,
        quote.price.output_per_mtok,
        quote.price.cache_read_per_mtok,
        quote.price.cache_write_per_mtok,
    )
    assert len(tog.MODEL_PRICING) == len(
        [m for m in tog.MODEL_PRICING if symfonic_pricing(use_genai_prices=False).lookup(m)]
    )

    # A ledger of the adopter's own reports to the instrumentation's observer.
    observer = OTelObserver(tracer_provider=tracer_provider)
    own = OffloadLedger(pricing=symfonic_pricing(), observer=observer)
    with instrument_symfonic(
        agent, tracer_provider=tracer_provider, observer=observer, ledger=own
    ) as inst:
        assert own is inst.ledger
        assert observer is inst.observer
    with pytest.raises(TypeError, match="OffloadLedger"):
        instrument_symfonic(agent, tracer_provider=tracer_provider, ledger=object())  # type: ignore[arg-type]


class _RaisingLedger(OffloadLedger):
    def record_offload(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("ledger broken")

    def record_model_call(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("ledger broken")

    def record_recall(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("ledger broken")

    def end_conversation(self, *args: Any, **kwargs: Any) -> list[Any]:
        raise RuntimeError("ledger broken")


def test_a_failing_ledger_never_changes_what_symfonic_decides(
    tracer_provider: Any, captured_logs: list[dict[str, Any]]
) -> None:
    baseline_agent, baseline_provider = build_agent(
        ledger_script(), config(**offload_settings()), Warehouse().tools
    )
    baseline = asyncio.run(three_turns(baseline_agent, None, None))

    agent, provider = build_agent(ledger_script(), config(**offload_settings()), Warehouse().tools)
    inst = instrument_symfonic(agent, tracer_provider=tracer_provider, ledger=_RaisingLedger())
    finals = asyncio.run(three_turns(agent, inst, CONVERSATION))
    inst.uninstrument()

    assert baseline == finals
    assert baseline_provider.requested == provider.requested
    assert [[str(m.content) for m in w] for w in baseline_provider.model.wire] == [
        [str(m.content) for m in w] for w in provider.model.wire
    ]
    assert {
        "symfonic._start_following",
        "symfonic._llm_end",
        "symfonic._tool_result",
        "symfonic._close_conversation",
    } == {e["hook"] for e in captured_logs if e["event"] == c.LOG_TELEMETRY_ERROR}


# -- install and uninstall ----------------------------------------------------------


def test_uninstrument_restores_every_replaced_object(
    tracer_provider: Any, meter_provider: Any, span_exporter: InMemorySpanExporter
) -> None:
    seen: list[str] = []

    def sales(ctx: Any) -> bool:
        seen.append(last_user_text(ctx))
        return True

    policy = ToolCallPolicy(
        name="sales_data_read",
        match=sales,
        model=ModelConfig(model_name=HAIKU),
        when_tool="run_block",
        redirect_to="fetch_data",
    )
    warehouse = Warehouse()
    agent, provider = build_agent(
        [emits(call("run_block", {"code": "x"}, "c1")), AIMessage(content="ok")],
        config(tool_call_policies=(policy,), role_model_resolver=later_hops_on_gpt4o),
        warehouse.tools,
    )
    gate = tog.evaluate_offload_gate
    agent_config = agent._config
    model_resolver = agent._deps.get(_AgentModelResolver)
    pre_policies = model_resolver._tool_call_policies
    role_resolver = model_resolver._resolver
    manager = agent._deps.get(CallbackManager)
    handlers = list(manager._handlers)
    react_log_handlers = list(logging.getLogger(REACT_LOGGER).handlers)
    resolver_attrs = dict(vars(model_resolver))

    async def turn() -> None:
        await agent.run("sales please")

    async def scenario() -> None:
        async with agent:
            await turn()  # before instrumenting: the hooks also work on a used agent
            inst = instrument_symfonic(
                agent, tracer_provider=tracer_provider, meter_provider=meter_provider
            )
            assert tog.evaluate_offload_gate is not gate
            assert agent._config is not agent_config
            wrapped = agent._config.tool_call_policies[0]
            assert isinstance(wrapped, ToolCallPolicy)
            assert (wrapped.name, wrapped.model, wrapped.redirect_to) == (
                policy.name,
                policy.model,
                policy.redirect_to,
            )
            assert wrapped is model_resolver._tool_call_policies[0]
            await turn()
            inst.uninstrument()
            inst.uninstrument()  # idempotent
            assert inst.installed is False
            await turn()

    recorded_before = len(span_exporter.get_finished_spans())
    asyncio.run(scenario())
    spans = span_exporter.get_finished_spans()

    assert gate is tog.evaluate_offload_gate
    assert agent_config is agent._config
    assert (policy,) == agent._config.tool_call_policies
    assert policy is agent._config.tool_call_policies[0]
    assert pre_policies is model_resolver._tool_call_policies
    assert role_resolver is model_resolver._resolver
    assert "resolve" not in vars(model_resolver)
    assert resolver_attrs.keys() == vars(model_resolver).keys()
    assert all(resolver_attrs[k] is v for k, v in vars(model_resolver).items())
    assert manager is agent._deps.get(CallbackManager)
    assert handlers == manager._handlers
    assert react_log_handlers == logging.getLogger(REACT_LOGGER).handlers
    # The three turns decided alike; only the instrumented one was recorded.
    assert [HAIKU, HAIKU] * 3 == provider.requested  # the policy wins: no resolver call
    assert [("fetch_data", {"table": ""})] * 3 == warehouse.executed
    assert ["sales please"] * 9 == seen  # PRE hop 0, POST hop 0, PRE hop 1, per turn
    assert 0 == recorded_before
    assert [(0, "invoke_agent"), (1, c.SPAN_ITERATION)] == span_tree(spans)[:2]
    assert 1 == len(named(spans, "invoke_agent"))


def test_the_gate_wrapper_is_shared_and_put_back_by_the_last_instrumentation(
    tracer_provider: Any,
) -> None:
    gate = tog.evaluate_offload_gate
    first, _ = build_agent([AIMessage(content="ok")], config(), Warehouse().tools)
    second, _ = build_agent([AIMessage(content="ok")], config(), Warehouse().tools)

    with instrument_symfonic(first, tracer_provider=tracer_provider) as one:
        wrapped = tog.evaluate_offload_gate
        assert wrapped is not gate
        assert gate is wrapped.__wrapped__
        with pytest.raises(RuntimeError, match="already instrumented"):
            instrument_symfonic(first, tracer_provider=tracer_provider)
        two = instrument_symfonic(second, tracer_provider=tracer_provider)
        assert wrapped is tog.evaluate_offload_gate
        one.uninstrument()
        assert wrapped is tog.evaluate_offload_gate  # the second agent still uses it
        two.uninstrument()
        assert gate is tog.evaluate_offload_gate

    with pytest.raises(TypeError, match="build the agent first"):
        instrument_symfonic(config(), tracer_provider=tracer_provider)
    assert gate is tog.evaluate_offload_gate


# -- where symfonic differs from the seed ------------------------------------------


def test_an_adopter_rewrite_symfonic_drops_dispatches_the_policy_rewrite(
    tracer_provider: Any, span_exporter: InMemorySpanExporter
) -> None:
    class ToArchive(BaseCallbackHandler):
        async def on_tool_call_dispatch(self, event: Any, state: Any) -> dict[str, Any]:
            return {"tool_name": "archive_search", "args": {"q": "brand"}}

    warehouse = Warehouse()
    policy = ToolCallPolicy(
        name="sales_data_read",
        match=lambda ctx: True,
        when_tool="run_block",
        redirect_to="fetch_data",
    )
    agent, _ = build_agent(
        [emits(call("run_block", {"code": "x"}, "c1")), AIMessage(content="ok")],
        config(tool_call_policies=(policy,), role_tools={"action": ROUTED}),
        warehouse.tools,
    )
    inst = instrument_symfonic(agent, tracer_provider=tracer_provider, agent_name=AGENT)

    async def scenario() -> None:
        async with agent:
            await agent.run("brand sales", callbacks=[ToArchive()])

    asyncio.run(scenario())
    inst.uninstrument()

    # symfonic's dispatch gate falls back to the policy's rewrite, not to the emitted call.
    assert [("fetch_data", {"table": ""})] == warehouse.executed
    [dispatch] = named(span_exporter.get_finished_spans(), c.SPAN_DISPATCH)
    assert {
        c.ATTR_DISPATCH_EMITTED_TOOL: "run_block",
        c.ATTR_POLICY_WINNER: "sales_data_read",
        c.ATTR_DISPATCH_REDIRECT_TO: "fetch_data",
        c.ATTR_DISPATCH_ADOPTER_OVERRIDE: True,
        c.ATTR_DISPATCH_PALETTE_GATE: "dropped",
        c.ATTR_DISPATCH_FINAL_TOOL: "fetch_data",
        c.ATTR_SEAM_WINNER_SOURCE: "adopter",
    } == {
        k: dispatch.attributes.get(k)
        for k in (
            c.ATTR_DISPATCH_EMITTED_TOOL,
            c.ATTR_POLICY_WINNER,
            c.ATTR_DISPATCH_REDIRECT_TO,
            c.ATTR_DISPATCH_ADOPTER_OVERRIDE,
            c.ATTR_DISPATCH_PALETTE_GATE,
            c.ATTR_DISPATCH_FINAL_TOOL,
            c.ATTR_SEAM_WINNER_SOURCE,
        )
    }


def test_symfonic_post_seam_context_lacks_the_emitted_message(tracer_provider: Any) -> None:
    contexts: list[list[str]] = []

    def classify(ctx: Any) -> bool:
        contexts.append([type(m).__name__ for m in ctx.messages])
        return True

    policy = ToolCallPolicy(
        name="sales_data_read",
        match=classify,
        model=ModelConfig(model_name=HAIKU),
        when_tool="run_block",
        redirect_to="fetch_data",
    )
    agent, _ = build_agent(
        [emits(call("run_block", {"code": "x"}, "c1")), AIMessage(content="ok")],
        config(tool_call_policies=(policy,)),
        Warehouse().tools,
    )
    inst = instrument_symfonic(agent, tracer_provider=tracer_provider)

    async def scenario() -> None:
        async with agent:
            await agent.run("sales")

    asyncio.run(scenario())
    inst.uninstrument()

    # PRE hop 0, POST hop 0 (the seed would end it with the emitted AIMessage), PRE hop 1.
    assert [
        ["HumanMessage"],
        ["HumanMessage"],
        ["HumanMessage", "AIMessage", "ToolMessage"],
    ] == contexts


def test_a_raising_role_resolver_is_recorded_and_symfonic_uses_the_default(
    tracer_provider: Any, span_exporter: InMemorySpanExporter
) -> None:
    agent, provider = build_agent(
        [AIMessage(content="ok")],
        config(role_model_resolver=raising(ValueError("resolver exploded"))),
        Warehouse().tools,
    )
    inst = instrument_symfonic(agent, tracer_provider=tracer_provider)

    async def scenario() -> None:
        async with agent:
            await agent.run("hello")

    asyncio.run(scenario())
    inst.uninstrument()

    assert [OPUS] == provider.requested
    [pre] = named(span_exporter.get_finished_spans(), c.SPAN_SEAM_PRE_MODEL)
    assert ("default", OPUS) == (
        pre.attributes[c.ATTR_SEAM_WINNER_SOURCE],
        pre.attributes[c.ATTR_GEN_AI_REQUEST_MODEL],
    )
    assert [
        {
            "name": c.EVENT_ADOPTER_ERROR,
            c.ATTR_ADOPTER_SOURCE: "resolver",
            c.ATTR_ERROR_TYPE: "ValueError",
        }
    ] == events(pre)


def test_an_unpriced_model_is_recorded_unpriced_and_nothing_is_offloaded(
    tracer_provider: Any, span_exporter: InMemorySpanExporter
) -> None:
    local = "my-local-model"
    agent, provider = build_agent(
        [AIMessage(content="summary")],
        config(**offload_settings(), agent=AgentConfig(model=ModelConfig(model_name=local))),
        Warehouse().tools,
    )
    inst = instrument_symfonic(agent, tracer_provider=tracer_provider)

    async def scenario() -> None:
        async with agent:
            await agent.run(TURN_2, history=turn_1_history())

    asyncio.run(scenario())
    inst.uninstrument()

    [dump] = [
        m for m in provider.model.wire[0] if isinstance(m, ToolMessage) and m.tool_call_id == "c3"
    ]
    assert BIG_OUTPUT == dump.content  # symfonic kept the full output on the wire
    [gate] = named(span_exporter.get_finished_spans(), c.SPAN_OFFLOAD_GATE)
    assert {
        c.ATTR_OFFLOAD_FIRE: False,
        c.ATTR_OFFLOAD_NET_SAVING_USD: 0.0,
        c.ATTR_OFFLOAD_REASON: f"no MODEL_PRICING row for {local!r}",
        c.ATTR_OFFLOAD_REASON_CODE: "unpriced_model",
        c.ATTR_OFFLOAD_PRICING_SOURCE: "none",
        c.ATTR_GEN_AI_REQUEST_MODEL: local,
        c.ATTR_GEN_AI_TOOL_CALL_ID: "c3",
    } == {
        k: gate.attributes.get(k)
        for k in (
            c.ATTR_OFFLOAD_FIRE,
            c.ATTR_OFFLOAD_NET_SAVING_USD,
            c.ATTR_OFFLOAD_REASON,
            c.ATTR_OFFLOAD_REASON_CODE,
            c.ATTR_OFFLOAD_PRICING_SOURCE,
            c.ATTR_GEN_AI_REQUEST_MODEL,
            c.ATTR_GEN_AI_TOOL_CALL_ID,
        )
    }
    assert c.ATTR_OFFLOAD_ID not in gate.attributes


# -- telemetry never changes the agent --------------------------------------------


class _BrokenTracer(trace.Tracer):
    def start_span(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("tracer broken")

    def start_as_current_span(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("tracer broken")


class _BrokenTracerProvider(trace.TracerProvider):
    def get_tracer(self, *args: Any, **kwargs: Any) -> trace.Tracer:
        return _BrokenTracer()


class _RaisingProcessor(SpanProcessor):
    def __init__(self, hook: str) -> None:
        self.hook = hook

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        if self.hook == "on_start":
            raise RuntimeError("processor broken")

    def on_end(self, span: Any) -> None:
        if self.hook == "on_end":
            raise RuntimeError("processor broken")


def _raising_processor_provider(hook: str) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(_RaisingProcessor(hook))
    return provider


@pytest.mark.parametrize(
    "make_provider",
    [
        _BrokenTracerProvider,
        lambda: _raising_processor_provider("on_start"),
        lambda: _raising_processor_provider("on_end"),
    ],
    ids=["tracer raises", "span processor raises on start", "span processor raises on end"],
)
def test_failing_telemetry_never_changes_what_symfonic_decides(
    make_provider: Any, meter_provider: Any
) -> None:
    baseline_agent, baseline_provider, baseline_tools = sales_agent()
    baseline = asyncio.run(converse(baseline_agent))

    agent, provider, warehouse = sales_agent()
    inst = instrument_symfonic(
        agent, tracer_provider=make_provider(), meter_provider=meter_provider
    )
    finals = asyncio.run(converse(agent, inst))
    inst.uninstrument()

    assert baseline == finals
    assert baseline_provider.requested == provider.requested
    assert sorted(baseline_tools.executed, key=repr) == sorted(warehouse.executed, key=repr)
    assert [HAIKU, HAIKU, HAIKU, OPUS, GPT4O] == provider.requested
