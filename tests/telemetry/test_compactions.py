"""A framework's compaction in the ledger and in telemetry, priced like an offload.

Context editing that clears a tool result, a summary that replaces history:
each later call that carries the placeholder (or summary) saves the removed
tokens and pays for the kept ones, a re-read of the cleared data is a
recall, a summary's own model call is a realized cost, and every realized
metric says which mechanism took the content out.

Rates (per million tokens) of the test table: haiku input 1, output 5,
cache read 0.1, cache write 1.25; opus input 5, output 25.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from seamscope.adapters import DecisionLayer
from seamscope.decisions import ModelUsage, OffloadGate, OffloadLedger, PricingTable
from seamscope.decisions.records import (
    Compaction,
    MiddlewareDecision,
    MiddlewareDecisionKind,
    OffloadMechanism,
    ToolCall,
)
from seamscope.telemetry import OTelObserver
from seamscope.telemetry import conventions as c

from . import _support as s

HAIKU = s.HAIKU
OPUS = s.DEFAULT_MODEL
PRICING = PricingTable(
    {
        HAIKU: {"input": 1, "output": 5, "cache_read": "0.1", "cache_write": "1.25"},
        OPUS: {"input": 5, "output": 25, "cache_read": "0.5", "cache_write": "6.25"},
    },
    use_genai_prices=False,
)
CONV = "conv-compaction"
D = Decimal
EDITING = OffloadMechanism.CONTEXT_EDITING
SUMMARY = OffloadMechanism.SUMMARIZATION


def ledger_with(tracer_provider: Any, meter_provider: Any) -> OffloadLedger:
    observer = OTelObserver(tracer_provider=tracer_provider, meter_provider=meter_provider)
    return OffloadLedger(pricing=PRICING, observer=observer)


def cleared(compaction_id: str = "context_editing:call-1", **kw: Any) -> Compaction:
    fields: dict[str, Any] = {
        "compaction_id": compaction_id,
        "mechanism": EDITING,
        "model": HAIKU,
        "removed_tokens": 20_000.0,
        "kept_tokens": 10,
        "tool_call_ids": ("call-1",),
    }
    fields.update(kw)
    return Compaction(**fields)


def test_a_context_edit_that_is_re_read_and_disrupts_the_cache_settles_as_a_loss(
    tracer_provider: Any, meter_provider: Any, metric_reader: InMemoryMetricReader
) -> None:
    """Hand computation (haiku):

    * before the edit, one call of 30,000 input tokens reads 27,000 from the
      cache: the conversation's hit ratio is 0.9;
    * the edit clears a 20,000-token result, leaving a 10-token placeholder;
    * call 2 carries the placeholder, 12,000 input tokens of which 2,000 are
      cache reads: saving 20,000 × $1/M = $0.02, stub 10 × $1/M = $0.00001,
      cache disruption (27,000 × 12,000 / 30,000 − 2,000) = 8,800 tokens ×
      ($1 − $0.1)/M = $0.00792;
    * the model re-reads the data: 20,000 input + 100 output tokens =
      $0.02 + $0.0005 = $0.0205;
    * call 3 no longer carries it (its data is back in the prompt): no
      saving; of its 32,000 input tokens 12,000 are cache reads against an
      expected 27,000 × 32,000 / 30,000 = 28,800: the re-read's disruption,
      16,800 × $0.9/M = $0.01512.

    Savings $0.02; costs $0.00001 + $0.00792 + $0.0205 + $0.01512 =
    $0.04355; net −$0.02355: a loss, every amount labelled ``context_editing``.
    """
    ledger = ledger_with(tracer_provider, meter_provider)
    ledger.record_model_call(CONV, model=HAIKU, usage=ModelUsage(30_000, 50, 27_000, 0))
    ledger.record_compaction(cleared(), conversation_id=CONV)
    second = ledger.record_model_call(
        CONV,
        model=HAIKU,
        usage=ModelUsage(12_000, 100, 2_000, 0),
        carried=["context_editing:call-1"],
    )
    recall = ledger.record_recall(
        CONV, "context_editing:call-1", model=HAIKU, input_tokens=20_000, output_tokens=100
    )
    third = ledger.record_model_call(
        CONV, model=HAIKU, usage=ModelUsage(32_000, 80, 12_000, 0), carried=[]
    )
    [settled] = ledger.end_conversation(CONV)

    assert ((EDITING, D("0.02"), D("0.00001"), D("0.00792")),) == second.by_mechanism
    assert (EDITING, D("0.0205")) == (recall.mechanism, recall.cost)
    assert ((EDITING, D(0), D(0), D("0.01512")),) == third.by_mechanism
    assert (EDITING, "loss", D("0.02"), D("0.04355"), D("-0.02355"), 1, 1) == (
        settled.mechanism,
        settled.outcome.value,
        settled.realized_savings,
        settled.realized_costs,
        settled.realized_net_saving,
        settled.turns_carried,
        settled.recalls,
    )
    points = s.metric_points(metric_reader)
    editing = {c.ATTR_GEN_AI_REQUEST_MODEL: HAIKU, c.ATTR_OFFLOAD_MECHANISM: "context_editing"}
    assert {s.point_key(editing): 0.02} == points[c.METRIC_OFFLOAD_REALIZED_SAVINGS.name]
    costs = points[c.METRIC_OFFLOAD_REALIZED_COSTS.name]
    assert {
        s.point_key({**editing, c.ATTR_OFFLOAD_COST_KIND: "stub_carry"}): 0.00001,
        s.point_key({**editing, c.ATTR_OFFLOAD_COST_KIND: "cache_disruption"}): 0.02304,
        s.point_key({**editing, c.ATTR_OFFLOAD_COST_KIND: "recall"}): 0.0205,
    } == {k: round(v, 10) for k, v in costs.items()}
    assert {s.point_key(editing): 1} == points[c.METRIC_OFFLOAD_RECALLS.name]
    assert {s.point_key({**editing, c.ATTR_OFFLOAD_OUTCOME: "loss"}): 1} == points[
        c.METRIC_OFFLOAD_SETTLED.name
    ]


def test_a_summary_pays_its_own_call_and_saves_on_every_later_call(
    tracer_provider: Any, meter_provider: Any, metric_reader: InMemoryMetricReader
) -> None:
    """Hand computation (opus): a summary removes 40,000 tokens of history and
    is 500 tokens long; its own call (on haiku) cost 40,000 × $1/M + 500 ×
    $5/M = $0.0425, a realized ``compaction_call`` cost now. Two later opus
    calls carry it: saving 2 × 40,000 × $5/M = $0.40, stub 2 × 500 × $5/M =
    $0.005. Net $0.40 − $0.005 − $0.0425 = $0.3525: a gain."""
    ledger = ledger_with(tracer_provider, meter_provider)
    summary = Compaction(
        "summarization:s-1",
        SUMMARY,
        OPUS,
        40_000.0,
        500,
        messages_removed=12,
        cost=D("0.0425"),
    )
    ledger.record_compaction(summary, conversation_id=CONV)
    ledger.record_compaction(summary, conversation_id=CONV)  # recorded once
    for _ in range(2):
        ledger.record_model_call(
            CONV, model=OPUS, usage=ModelUsage(3_000, 10), carried=["summarization:s-1"]
        )
    [settled] = ledger.end_conversation(CONV)
    assert (SUMMARY, "gain", D("0.40"), D("0.0475"), D("0.3525"), D("0.0425")) == (
        settled.mechanism,
        settled.outcome.value,
        settled.realized_savings,
        settled.realized_costs,
        settled.realized_net_saving,
        settled.compaction_cost,
    )
    costs = s.metric_points(metric_reader)[c.METRIC_OFFLOAD_REALIZED_COSTS.name]
    summarized = {c.ATTR_GEN_AI_REQUEST_MODEL: OPUS, c.ATTR_OFFLOAD_MECHANISM: "summarization"}
    assert {
        s.point_key({**summarized, c.ATTR_OFFLOAD_COST_KIND: "compaction_call"}): 0.0425,
        s.point_key({**summarized, c.ATTR_OFFLOAD_COST_KIND: "stub_carry"}): 0.005,
    } == {k: round(v, 10) for k, v in costs.items()}


def test_gate_offloads_and_compactions_of_one_call_are_split_by_mechanism(
    tracer_provider: Any, meter_provider: Any, metric_reader: InMemoryMetricReader
) -> None:
    """One haiku call carries a gate stub (20,000 tokens out, 80 in) and a
    cleared result (20,000 out, 10 in): $0.02 saved by each mechanism, stub
    costs $0.00008 and $0.00001."""
    ledger = ledger_with(tracer_provider, meter_provider)
    gate = OffloadGate(pricing=PRICING, id_factory=lambda: "off-1")
    ledger.record_offload(gate.evaluate(20_000.0, HAIKU), conversation_id=CONV)
    ledger.record_compaction(cleared(), conversation_id=CONV)
    account = ledger.record_model_call(
        CONV,
        model=HAIKU,
        usage=ModelUsage(1_000, 10),
        carried=["off-1", "context_editing:call-1"],
    )
    assert (D("0.04"), D("0.00009")) == (account.saving, account.stub_carry_cost)
    assert {
        (OffloadMechanism.SEAMSCOPE_GATE, D("0.02"), D("0.00008"), D(0)),
        (EDITING, D("0.02"), D("0.00001"), D(0)),
    } == set(account.by_mechanism)
    savings = s.metric_points(metric_reader)[c.METRIC_OFFLOAD_REALIZED_SAVINGS.name]
    assert {
        s.point_key({c.ATTR_GEN_AI_REQUEST_MODEL: HAIKU, c.ATTR_OFFLOAD_MECHANISM: m}): 0.02
        for m in ("seamscope_gate", "context_editing")
    } == savings


def test_a_compaction_decision_is_a_span_its_settlement_links_to(
    tracer_provider: Any, meter_provider: Any, span_exporter: InMemorySpanExporter
) -> None:
    """Through the loop facade: the compaction is priced with the gate's formula
    (H=5, p=0.5 on haiku: 5 × 20,000 × $1/M − 5 × 10 × $1/M − 0.5 × (12,500 ×
    $1/M + 250 × $5/M) = $0.1 − $0.00005 − $0.006875 = $0.093075), recorded as
    a ``seamscope.compaction`` span in the iteration, and followed by the
    ledger; its settlement links to that span."""
    layer = DecisionLayer(
        default_model=HAIKU,
        pricing=PRICING,
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        agent_name="analyst",
    )
    with layer.turn(CONV, []) as turn, turn.iteration() as it:
        it.pre_model()
        compaction = it.compaction(
            "context_editing:call-1",
            EDITING,
            removed_tokens=20_000.0,
            kept_tokens=10,
            tool_call_ids=["call-1"],
        )
        it.middleware_decision(
            MiddlewareDecision(
                "ContextEditingMiddleware",
                MiddlewareDecisionKind.COMPACTION,
                "cleared 1 tool result",
                compaction=compaction,
            )
        )
    assert compaction.predicted is not None
    assert D("0.093075") == compaction.predicted.net_saving
    assert ("context_editing:call-1",) == layer.ledger.live_offloads(CONV)
    [settled] = layer.end_conversation(CONV)
    spans = span_exporter.get_finished_spans()
    span = s.one(spans, c.SPAN_COMPACTION)
    iteration = s.one(spans, c.SPAN_ITERATION)
    assert span.parent is not None and span.parent.span_id == iteration.context.span_id
    attrs = s.attrs(span)
    assert {
        c.ATTR_OFFLOAD_ID: "context_editing:call-1",
        c.ATTR_OFFLOAD_MECHANISM: "context_editing",
        c.ATTR_MIDDLEWARE_NAME: "ContextEditingMiddleware",
        c.ATTR_MIDDLEWARE_DECISION: "compaction",
        c.ATTR_COMPACTION_REMOVED_TOKENS: 20_000.0,
        c.ATTR_COMPACTION_KEPT_TOKENS: 10,
        c.ATTR_COMPACTION_TOOL_CALL_IDS: ("call-1",),
        c.ATTR_OFFLOAD_NET_SAVING_USD: 0.093075,
    }.items() <= attrs.items()
    assert c.ATTR_OFFLOAD_FIRE not in attrs  # nothing was gated: the middleware decided
    settle = s.one(spans, c.SPAN_OFFLOAD_SETTLE)
    assert [span.context.span_id] == [link.context.span_id for link in settle.links]
    assert (D("0.093075"), EDITING) == (settled.predicted_net_saving, settled.mechanism)


def test_each_decision_kind_is_a_span_of_its_family_with_the_reason(
    tracer_provider: Any,
    meter_provider: Any,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
    captured_logs: list[dict[str, Any]],
) -> None:
    observer = OTelObserver(tracer_provider=tracer_provider, meter_provider=meter_provider)
    k = MiddlewareDecisionKind
    decisions = [
        MiddlewareDecision(
            "LLMToolSelectorMiddleware",
            k.TOOL_SELECTION,
            "selector chose ['a']; max_tools=1",
            before=("a", "b", "c"),
            after=("a",),
            decision_model="gpt-4o-mini",
        ),
        MiddlewareDecision(
            "ModelFallbackMiddleware",
            k.MODEL_FALLBACK,
            "primary failed",
            model="backup",
            failed=(("primary", "RateLimitError"),),
        ),
        MiddlewareDecision(
            "ToolCallLimitMiddleware",
            k.TOOL_CALL_BLOCKED,
            "run limit 1 reached",
            calls=(ToolCall("c-1", "search", {}), ToolCall("c-2", "search", {})),
        ),
    ]
    for decision in decisions:
        observer.on_middleware_decision(decision)
    spans = span_exporter.get_finished_spans()
    stage = s.one(spans, c.SPAN_STAGE)
    assert {
        c.ATTR_STAGE_NAME: "LLMToolSelectorMiddleware",
        c.ATTR_STAGE_OUTCOME: "select",
        c.ATTR_STAGE_DROPPED: ("b", "c"),
        c.ATTR_SELECTION_OFFERED: ("a", "b", "c"),
        c.ATTR_SELECTION_SELECTED: ("a",),
        c.ATTR_MIDDLEWARE_REASON: "selector chose ['a']; max_tools=1",
        c.ATTR_MIDDLEWARE_DECISION_MODEL: "gpt-4o-mini",
    }.items() <= s.attrs(stage).items()
    pre = s.one(spans, c.SPAN_SEAM_PRE_MODEL)
    assert {
        c.ATTR_SEAM_WINNER_SOURCE: "fallback",
        c.ATTR_SEAM_CHOSEN_MODEL: "backup",
        c.ATTR_MIDDLEWARE_FAILED_MODELS: ("primary",),
        c.ATTR_MIDDLEWARE_ERROR_TYPES: ("RateLimitError",),
    }.items() <= s.attrs(pre).items()
    blocked = s.named(spans, c.SPAN_DISPATCH)
    assert [("c-1", True), ("c-2", True)] == [
        (sp.attributes[c.ATTR_GEN_AI_TOOL_CALL_ID], sp.attributes[c.ATTR_DISPATCH_BLOCKED])
        for sp in blocked
    ]
    counted = s.metric_points(metric_reader)[c.METRIC_MIDDLEWARE_DECISIONS.name]
    assert {
        s.point_key({c.ATTR_MIDDLEWARE_NAME: d.middleware, c.ATTR_MIDDLEWARE_DECISION: d.kind}): 1
        for d in decisions
    } == counted
    assert ["tool_selection", "model_fallback", "tool_call_blocked"] == [
        e["decision"] for e in captured_logs if e["event"] == c.LOG_MIDDLEWARE_DECIDED
    ]


def test_a_wrong_type_is_contained(tracer_provider: Any, meter_provider: Any) -> None:
    observer = OTelObserver(tracer_provider=tracer_provider, meter_provider=meter_provider)
    assert None is observer.on_middleware_decision("not a decision")  # type: ignore[arg-type]
    ledger = OffloadLedger(pricing=PRICING, observer=observer)
    ledger.record_compaction("not a compaction", conversation_id=CONV)  # type: ignore[arg-type]
    assert () == ledger.live_offloads(CONV)
