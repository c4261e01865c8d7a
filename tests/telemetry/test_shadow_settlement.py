"""The live ledger settles a shadow configuration's counterfactual on the course
the conversation really took, as ``seamscope whatif`` does offline: the same
figures, to the Decimal where they are exact."""

from __future__ import annotations

import contextlib
import io
import json
import random
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests.telemetry import _support as ts
from tests.telemetry._support import metric_points

from seamscope.adapters import DecisionLayer, ReActAgent
from seamscope.cli import main
from seamscope.cli._demo import _seeded_ids
from seamscope.cli._scenario import AGENT_NAME, DEFAULT_MODEL, build_scenario
from seamscope.decisions import ModelUsage, OffloadGate, OffloadLedger, PricingTable
from seamscope.decisions.records import GateCall, SettleTrigger, ShadowSettlement
from seamscope.telemetry import OTelObserver, TelemetryConfig, configure
from seamscope.telemetry import conventions as c

# The shadow: get_logs outputs stay in the prompt (its calibrated horizon is 0),
# and small outputs are offloaded too (a threshold of 5 tokens, a 1-token stub and
# a 1-token recall hop): the live gate offloads get_logs and export_report only.
PRIORS = (
    'format = 1\nversion = "v1"\nmin_offloads = 1\n[[priors]]\ntool = "get_logs"\n'
    'model = "gpt-4o"\nhorizon = 0\nrecall_probability = 1.0\noffloads = 40\n'
)
SHADOW = {
    "threshold_tokens": 5,
    "stub_tokens": 1,
    "recall_input_tokens": 1,
    "recall_output_tokens": 1,
    "horizon": 6,
    "recall_probability": 0.25,
}


def _shadow_gate(priors: Path) -> OffloadGate:
    return OffloadGate(
        large_offload_threshold_tokens=SHADOW["threshold_tokens"],
        stub_tokens=SHADOW["stub_tokens"],
        recall_input_tokens=SHADOW["recall_input_tokens"],
        recall_output_tokens=SHADOW["recall_output_tokens"],
        horizon=SHADOW["horizon"],
        recall_probability=SHADOW["recall_probability"],
        priors=priors,
    )


def _run_scenario(out: Path, shadow: OffloadGate, conversations: int) -> OffloadLedger:
    """The demo's reference loop (real gate, ledger and telemetry) with a shadow gate."""
    handle = configure(
        service_name="shadow-settlement",
        trace_file=out,
        id_generator=_seeded_ids(7),
        set_global=False,
        register_atexit=False,
        environ={},
    )
    try:
        scenario = build_scenario()
        ids = random.Random(7)
        layer = DecisionLayer(
            default_model=DEFAULT_MODEL,
            policies=scenario.policies,
            role_model_resolver=scenario.role_model_resolver,
            stages=scenario.stages,
            catalog=scenario.catalog,
            agent_name=AGENT_NAME,
            provider_name="scripted",
            tracer_provider=handle.tracer_provider,
            meter_provider=handle.meter_provider,
            telemetry_config=TelemetryConfig.create(),
            offload_id_factory=lambda: f"off-{ids.getrandbits(32):08x}",
            offload_shadow=shadow,
        )
        agent = ReActAgent(layer, scenario.chat, scenario.tools)
        for n in range(conversations):
            history: list[Any] = []
            for script in scenario.turns:
                tier = {} if script.tier is None else {"tier": script.tier}
                agent.run_turn(
                    f"conv-{n}",
                    script.user,
                    messages=history,
                    role=scenario.role,
                    scope={**scenario.scope, **tier},
                )
            layer.end_conversation(f"conv-{n}")
        handle.flush()
    finally:
        handle.shutdown()
    return layer.ledger


def test_live_shadow_settlement_is_whatif_under_the_shadows_config(tmp_path: Path) -> None:
    priors = tmp_path / "priors.toml"
    priors.write_text(PRIORS, encoding="utf-8")
    trace = tmp_path / "trace.jsonl"
    ledger = _run_scenario(trace, _shadow_gate(priors), conversations=2)
    argv = ["whatif", str(trace), "--priors", str(priors), "--format", "json"]
    for key, value in SHADOW.items():
        argv += ["--set", f"{key}={value}"]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert 0 == main(argv)
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    offline = {r["conversation_id"]: r for r in rows if "conversation_id" in r}
    live = {s.conversation_id: s for s in ledger.shadow_settlements}
    assert ["conv-0", "conv-1"] == sorted(live) == sorted(offline)
    for conversation, s in live.items():
        row = offline[conversation]
        low, high = s.expected_range
        assert (
            Decimal(row["realized_usd"]),
            Decimal(row["counterfactual_exact_usd"]),
            Decimal(row["counterfactual_expected_usd"]),
            [Decimal(v) for v in row["counterfactual_expected_range_usd"]],
            row["no_longer_fired"],
            row["newly_fired"],
        ) == (
            s.realized_net_saving,
            s.exact_net_saving,
            s.expected_net_saving,
            [low, high],
            list(s.no_longer_fired),
            [o.tool_name for o in s.offloads],
        )
    # both ways of disagreeing happen: the logs offload no longer fires, two small
    # outputs newly fire (expected), the export fires either way (exact)
    first = live["conv-0"]
    assert 1 == len(first.no_longer_fired)
    assert ["hydrate_context", "fetch_data"] == [o.tool_name for o in first.offloads]
    assert ["export_report"] == [x.tool_name for x in first.settlements]
    assert first.exact_net_saving != first.realized_net_saving
    # the small outputs would lose: the stub the loop sends is longer than they are
    low, high = first.expected_range
    assert low <= first.expected_net_saving <= high < 0


PRICING = PricingTable({"m": {"input": 1, "output": 5}})


class _Recorder:
    def __init__(self) -> None:
        self.shadows: list[ShadowSettlement] = []

    def on_shadow_settled(self, settlement: ShadowSettlement) -> None:
        self.shadows.append(settlement)


def test_an_offload_only_the_shadow_fires_is_expected_from_its_recall_probability() -> None:
    # live: threshold 15 000 tokens, a 10 000-token output stays; shadow: threshold 1 000
    shadow = OffloadGate(
        pricing=PRICING, large_offload_threshold_tokens=1000, recall_probability=0.2
    )
    gate = OffloadGate(pricing=PRICING, shadow=shadow)
    recorder = _Recorder()
    ledger = OffloadLedger(pricing=PRICING, observer=recorder)
    decision = gate.evaluate(10_000.0, "m", GateCall("conv", tool_name="search"))
    assert (False, True) == (decision.fire, decision.shadow and decision.shadow.fire)
    ledger.record_offload(decision, conversation_id="conv")
    for _ in range(3):
        ledger.record_model_call("conv", model="m", usage=ModelUsage(30_000))
    assert [] == ledger.end_conversation("conv")  # nothing live to settle
    (s,) = recorder.shadows
    assert s == ledger.shadow_settlements[0]
    (new,) = s.offloads
    rate = Decimal(1) / 1_000_000
    hop = 10_000 * rate + 250 * 5 * rate  # a recall brings the whole output back
    assert ("search", 3, 3 * 10_000 * rate, 3 * 80 * rate, hop) == (
        new.tool_name,
        new.turns,
        new.savings,
        new.stub_carry_cost,
        new.recall_hop_cost,
    )
    no_recall = 3 * (10_000 - 80) * rate
    assert (Decimal(0), Decimal(0), no_recall - Decimal("0.2") * hop) == (
        s.realized_net_saving,
        s.exact_net_saving,
        s.expected_net_saving,
    )
    # recalled by the first later call at worst (then it carries no more), never at best
    assert ((10_000 - 80) * rate - hop, no_recall) == s.expected_range
    assert SettleTrigger.CONVERSATION_END is s.trigger


def test_an_offload_only_live_fires_leaves_the_shadow_its_output_in_the_prompt() -> None:
    shadow = OffloadGate(pricing=PRICING, large_offload_threshold_tokens=50_000)
    gate = OffloadGate(pricing=PRICING, shadow=shadow, id_factory=lambda: "off-1")
    ledger = OffloadLedger(pricing=PRICING)
    decision = gate.evaluate(20_000.0, "m", GateCall("conv", tool_name="search"))
    assert (True, False) == (decision.fire, decision.shadow and decision.shadow.fire)
    ledger.record_offload(decision, conversation_id="conv")
    ledger.record_model_call("conv", model="m", usage=ModelUsage(30_000))
    ledger.record_recall("conv", "off-1", model="m", input_tokens=20_000, output_tokens=10)
    (live,) = ledger.end_conversation("conv")
    (s,) = ledger.shadow_settlements
    assert ("search", 1) == (live.tool_name, live.remaining_turns)
    assert (live.realized_net_saving, Decimal(0), ("off-1",), (), ()) == (
        s.realized_net_saving,
        s.exact_net_saving,
        s.no_longer_fired,
        s.settlements,
        s.offloads,
    )


def test_the_shadows_savings_and_costs_are_counted_by_model_tool_and_basis(
    tracer_provider: Any, meter_provider: Any, metric_reader: InMemoryMetricReader
) -> None:
    shadow = OffloadGate(pricing=PRICING, large_offload_threshold_tokens=1000)
    gate = OffloadGate(pricing=PRICING, shadow=shadow, id_factory=lambda: "off-1")
    observer = OTelObserver(tracer_provider=tracer_provider, meter_provider=meter_provider)
    ledger = OffloadLedger(pricing=PRICING, observer=observer)
    for tool, tokens in (("search", 10_000.0), ("fetch", 20_000.0)):  # shadow only; both
        decision = gate.evaluate(tokens, "m", GateCall("conv", tool_name=tool))
        ledger.record_offload(decision, conversation_id="conv", tool_name=tool)
    ledger.record_model_call("conv", model="m", usage=ModelUsage(30_000))
    ledger.end_conversation("conv")
    (s,) = ledger.shadow_settlements
    (exact,) = s.settlements
    (expected,) = s.offloads
    points = metric_points(metric_reader)

    def key(tool: str, basis: c.ShadowBasis) -> frozenset[Any]:
        return frozenset(
            {
                c.ATTR_GEN_AI_REQUEST_MODEL: "m",
                c.ATTR_GEN_AI_TOOL_NAME: tool,
                c.ATTR_OFFLOAD_SHADOW_BASIS: basis.value,
            }.items()
        )

    assert {
        key("fetch", c.ShadowBasis.EXACT): float(exact.realized_savings),
        key("search", c.ShadowBasis.EXPECTED): float(expected.savings),
    } == points[c.METRIC_OFFLOAD_SHADOW_SAVINGS.name]
    assert {
        key("fetch", c.ShadowBasis.EXACT): float(exact.realized_costs),
        key("search", c.ShadowBasis.EXPECTED): float(
            expected.savings - expected.expected_net_saving
        ),
    } == points[c.METRIC_OFFLOAD_SHADOW_COSTS.name]


def test_a_shadow_settlement_is_a_span_beside_the_live_settlement(
    tracer_provider: Any, span_exporter: InMemorySpanExporter
) -> None:
    # fetch fires either way (exact), search only in the shadow (expected)
    shadow = OffloadGate(pricing=PRICING, large_offload_threshold_tokens=1000)
    gate = OffloadGate(pricing=PRICING, shadow=shadow, id_factory=lambda: "off-1")
    observer = OTelObserver(tracer_provider=tracer_provider)
    ledger = OffloadLedger(pricing=PRICING, observer=observer)
    tracer = tracer_provider.get_tracer("test")
    with tracer.start_as_current_span("turn") as turn:
        for tool, tokens in (("search", 10_000.0), ("fetch", 20_000.0)):
            with tracer.start_as_current_span("gate") as gate_span:
                decision = gate.evaluate(tokens, "m", GateCall("conv", tool_name=tool))
            ledger.record_offload(
                decision, conversation_id="conv", tool_name=tool, link=gate_span.get_span_context()
            )
        ledger.record_model_call("conv", model="m", usage=ModelUsage(30_000))
        ledger.record_model_call("conv", model="m", usage=ModelUsage(30_000))
        ledger.end_conversation("conv")
    (s,) = ledger.shadow_settlements
    low, high = s.expected_range
    spans = span_exporter.get_finished_spans()
    live = ts.one(spans, c.SPAN_OFFLOAD_SETTLE)
    span = ts.one(spans, c.SPAN_OFFLOAD_SHADOW_SETTLE)
    assert trace.SpanKind.INTERNAL is span.kind
    assert span.parent is not None and live.parent is not None
    assert (turn.get_span_context().span_id, live.context.trace_id) == (
        span.parent.span_id,
        span.context.trace_id,
    )
    # linked to the gate span of the offload that fires either way, as the live one is
    assert [link.context for link in live.links] == [link.context for link in span.links]
    assert {
        c.ATTR_GEN_AI_CONVERSATION_ID: "conv",
        c.ATTR_OFFLOAD_SETTLE_TRIGGER: "conversation_end",
        c.ATTR_OFFLOAD_REALIZED_NET_SAVING_USD: float(s.realized_net_saving),
        c.ATTR_OFFLOAD_SHADOW_EXACT_NET_SAVING_USD: float(s.exact_net_saving),
        c.ATTR_OFFLOAD_SHADOW_EXPECTED_NET_SAVING_USD: float(s.expected_net_saving),
        c.ATTR_OFFLOAD_SHADOW_EXPECTED_LOW_USD: float(low),
        c.ATTR_OFFLOAD_SHADOW_EXPECTED_HIGH_USD: float(high),
        c.ATTR_OFFLOAD_SHADOW_BASIS: ("exact", "expected"),
        c.ATTR_OFFLOAD_SHADOW_NO_LONGER_FIRED: (),
        c.ATTR_OFFLOAD_SHADOW_NEWLY_FIRED: ("search",),
    } == ts.attrs(span)
    # live and shadow disagree: the shadow's search offload is expected to save more
    assert s.expected_net_saving > 0 and low < s.expected_net_saving < high
    assert s.exact_net_saving + s.expected_net_saving != s.realized_net_saving


def _explain(trace: Path, *args: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert 0 == main(["explain", str(trace), *args])
    return out.getvalue()


def test_explain_shows_each_conversations_shadow_settlement(tmp_path: Path) -> None:
    priors = tmp_path / "priors.toml"
    priors.write_text(PRIORS, encoding="utf-8")
    trace = tmp_path / "trace.jsonl"
    ledger = _run_scenario(trace, _shadow_gate(priors), conversations=2)
    live = {s.conversation_id: s for s in ledger.shadow_settlements}
    # the shadow's settle span sits where the conversation's live settle spans do
    spans = [
        span
        for line in trace.read_text(encoding="utf-8").splitlines()
        for resource in json.loads(line).get("resourceSpans", [])
        for scope in resource["scopeSpans"]
        for span in scope["spans"]
    ]
    shadow_spans = [sp for sp in spans if sp["name"] == c.SPAN_OFFLOAD_SHADOW_SETTLE]
    settle_spans = [sp for sp in spans if sp["name"] == c.SPAN_OFFLOAD_SETTLE]
    assert 2 == len(shadow_spans) and settle_spans
    assert {sp.get("parentSpanId") or None for sp in shadow_spans} == {
        sp.get("parentSpanId") or None for sp in settle_spans
    }
    text = _explain(trace).splitlines()
    first, second = live["conv-0"], live["conv-1"]
    assert first.exact_net_saving != first.realized_net_saving  # they disagree
    # the summary closes with one line per conversation: realized vs shadow
    assert [
        "shadow conv-0: realized +$0.0228 vs shadow exact +$0.0858 + expected −$0.0011 "
        "[−$0.0011, −$0.0001]",
        "shadow conv-1: realized +$0.0228 vs shadow exact +$0.0858 + expected −$0.0011 "
        "[−$0.0011, −$0.0001]",
    ] == [line for line in text if line.startswith("shadow ")]
    assert any(line.startswith("offload economics: predicted vs realized") for line in text)
    assert text[-2].startswith("shadow conv-0:") and text[-1].startswith("shadow conv-1:")
    doc = json.loads(_explain(trace, "--format", "json"))
    assert [
        {
            "conversation_id": conversation,
            "trigger": "conversation_end",
            "realized_net_saving_usd": float(s.realized_net_saving),
            "shadow_exact_net_saving_usd": float(s.exact_net_saving),
            "shadow_expected_net_saving_usd": float(s.expected_net_saving),
            "shadow_expected_range_usd": [float(v) for v in s.expected_range],
            "basis": ["exact", "expected"],
            "no_longer_fired": list(s.no_longer_fired),
            "newly_fired": ["hydrate_context", "fetch_data"],
        }
        for conversation, s in (("conv-0", first), ("conv-1", second))
    ] == doc["shadow_settlements"]
    assert 0 == doc["traces_without_decisions"]["count"]
    # one conversation: its line alone
    only = _explain(trace, "--conversation", "conv-1").splitlines()
    assert ["shadow conv-1"] == [line[:13] for line in only if line.startswith("shadow ")]


@pytest.mark.parametrize(
    ("kwargs", "trigger"),
    [({"idle_turns": 2}, SettleTrigger.IDLE), ({"max_conversations": 1}, SettleTrigger.EVICTED)],
    ids=["idle", "evicted"],
)
def test_a_shadow_settlement_forced_by_another_conversation_is_a_root_span(
    tracer_provider: Any,
    span_exporter: InMemorySpanExporter,
    kwargs: dict[str, Any],
    trigger: SettleTrigger,
) -> None:
    shadow = OffloadGate(pricing=PRICING, large_offload_threshold_tokens=1000)
    observer = OTelObserver(tracer_provider=tracer_provider)
    gate = OffloadGate(
        pricing=PRICING, shadow=shadow, observer=observer, id_factory=lambda: "off-1"
    )
    ledger = OffloadLedger(pricing=PRICING, observer=observer, **kwargs)
    tracer = tracer_provider.get_tracer("test")
    with tracer.start_as_current_span("turn A"):
        decision, link = gate.evaluate_linked(20_000.0, "m", GateCall("A", tool_name="fetch"))
        ledger.record_offload(decision, conversation_id="A", link=link, tool_name="fetch")
    with tracer.start_as_current_span("turn B") as turn_b:
        for _ in range(4):  # two rounds of the two conversations
            ledger.record_model_call("B", model="m", usage=ModelUsage(100))
    (settled,) = ledger.shadow_settlements
    assert ("A", trigger) == (settled.conversation_id, settled.trigger)
    spans = span_exporter.get_finished_spans()
    gate_span = ts.one(spans, c.SPAN_OFFLOAD_GATE)
    live = ts.one(spans, c.SPAN_OFFLOAD_SETTLE)
    span = ts.one(spans, c.SPAN_OFFLOAD_SHADOW_SETTLE)
    # as A's live settlement: no parent, neither B's trace nor A's, linked to A's gate
    assert (None, None) == (span.parent, live.parent)
    assert span.context.trace_id not in {
        turn_b.get_span_context().trace_id,
        gate_span.context.trace_id,
    }
    assert [gate_span.context] == [x.context for x in span.links]
    assert ("A", trigger.value, ("exact",)) == (
        span.attributes[c.ATTR_GEN_AI_CONVERSATION_ID],
        span.attributes[c.ATTR_OFFLOAD_SETTLE_TRIGGER],
        tuple(span.attributes[c.ATTR_OFFLOAD_SHADOW_BASIS]),
    )
