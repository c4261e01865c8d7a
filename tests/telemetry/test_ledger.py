"""OffloadLedger: realized savings and costs per event, settlement, bounded memory."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from seamscope.decisions import ModelUsage, OffloadGate, PricingTable
from seamscope.telemetry import conventions as c
from seamscope.telemetry.ledger import CarriedStub, OffloadLedger, Settlement

from . import _support as s

OPUS = s.DEFAULT_MODEL
HAIKU = s.HAIKU
PRICING = PricingTable(
    {
        HAIKU: {"input": 1, "output": 5, "cache_read": "0.1", "cache_write": "1.25"},
        OPUS: {"input": 5, "output": 25, "cache_read": "0.5", "cache_write": "6.25"},
    },
    use_genai_prices=False,
)
CONV = "conv-ledger"
D = Decimal


def fired(offload_id: str = "off-1", tokens: float = 20_000.0, model: str = HAIKU) -> Any:
    gate = OffloadGate(pricing=PRICING, id_factory=lambda: offload_id)
    decision = gate.evaluate(tokens, model)
    assert decision.fire
    return decision


@pytest.fixture
def ledger(tracer_provider: Any, meter_provider: Any) -> OffloadLedger:
    return OffloadLedger(
        pricing=PRICING, tracer_provider=tracer_provider, meter_provider=meter_provider
    )


def realized(reader: InMemoryMetricReader) -> dict[str, dict[tuple[str, ...], float]]:
    """Realized savings by model, realized costs by (model, kind), recalls by model."""
    points = s.metric_points(reader)

    def by(name: str, *keys: str) -> dict[tuple[str, ...], float]:
        return {tuple(dict(k)[key] for key in keys): v for k, v in points.get(name, {}).items()}

    model = c.ATTR_GEN_AI_REQUEST_MODEL
    return {
        "savings": by(c.METRIC_OFFLOAD_REALIZED_SAVINGS.name, model),
        "costs": by(c.METRIC_OFFLOAD_REALIZED_COSTS.name, model, c.ATTR_OFFLOAD_COST_KIND),
        "recalls": by(c.METRIC_OFFLOAD_RECALLS.name, model),
    }


STUB, RECALL, CACHE = (
    c.OffloadCostKind.STUB_CARRY.value,
    c.OffloadCostKind.RECALL.value,
    c.OffloadCostKind.CACHE_DISRUPTION.value,
)


def test_each_carried_call_saves_at_that_calls_input_rate(
    ledger: OffloadLedger, metric_reader: InMemoryMetricReader
) -> None:
    ledger.record_offload(fired(), conversation_id=CONV)
    ledger.record_model_call(CONV, model=OPUS, usage=ModelUsage(input_tokens=1000))
    ledger.record_model_call(CONV, model=HAIKU, usage=ModelUsage(input_tokens=1000))
    # 20 000 avoided tokens at $5/M then $1/M; the 80-token stub at the same rates
    assert {
        "savings": {(OPUS,): 0.1, (HAIKU,): 0.02},
        "costs": {(OPUS, STUB): 0.0004, (HAIKU, STUB): 0.00008},
        "recalls": {},
    } == realized(metric_reader)
    [settlement] = ledger.end_conversation(CONV)
    assert (D("0.12"), D("0.00048"), 2) == (
        settlement.realized_savings,
        settlement.stub_carry_cost,
        settlement.turns_carried,
    )


def test_only_carried_offloads_accrue(ledger: OffloadLedger) -> None:
    ledger.record_offload(fired("off-1"), conversation_id=CONV)
    ledger.record_offload(fired("off-2", tokens=40_000.0), conversation_id=CONV)
    ledger.record_model_call(CONV, model=HAIKU, usage=ModelUsage(1000), carried=["off-2"])
    ledger.record_model_call(CONV, model=HAIKU, usage=ModelUsage(1000))  # None: every live one
    by_id = {x.offload_id: x for x in ledger.end_conversation(CONV)}
    assert {"off-1": (1, D("0.02")), "off-2": (2, D("0.08"))} == {
        key: (x.turns_carried, x.realized_savings) for key, x in by_id.items()
    }


def test_another_workers_offload_is_counted_where_its_stub_is_carried(
    tracer_provider: Any, meter_provider: Any, metric_reader: InMemoryMetricReader
) -> None:
    """Worker A decided the offload; worker B serves the next turn and only sees the stub."""
    worker_a = OffloadLedger(
        pricing=PRICING, tracer_provider=tracer_provider, meter_provider=meter_provider
    )
    worker_b = OffloadLedger(
        pricing=PRICING, tracer_provider=tracer_provider, meter_provider=meter_provider
    )
    worker_a.record_offload(fired(), conversation_id=CONV)
    stub = CarriedStub("off-1", output_tokens=20_000.0, stub_tokens=80)
    worker_b.record_model_call(CONV, model=OPUS, usage=ModelUsage(1000), carried=[stub])
    # the Prometheus sums are right although no process saw the whole history
    assert {
        "savings": {(OPUS,): 0.1},
        "costs": {(OPUS, STUB): 0.0004},
        "recalls": {},
    } == realized(metric_reader)
    assert ([], ["off-1"]) == (
        worker_b.end_conversation(CONV),
        [x.offload_id for x in worker_a.end_conversation(CONV)],
    )


def test_a_recall_costs_its_real_tokens_at_that_models_rates(
    ledger: OffloadLedger, metric_reader: InMemoryMetricReader
) -> None:
    ledger.record_offload(fired(), conversation_id=CONV)
    ledger.record_recall(CONV, "off-1", model=HAIKU, input_tokens=20_000, output_tokens=300)
    # 20 000 * $1/M + 300 * $5/M
    assert {(HAIKU, RECALL): 0.0215} == realized(metric_reader)["costs"]
    assert {(HAIKU,): 1} == realized(metric_reader)["recalls"]
    [settlement] = ledger.end_conversation(CONV)
    assert (D("0.0215"), 1) == (settlement.recall_cost, settlement.recalls)


def test_cache_disruption_is_priced_against_the_pre_offload_baseline(
    ledger: OffloadLedger, metric_reader: InMemoryMetricReader
) -> None:
    # before the offload: 80 % of the input was read from the cache
    ledger.record_model_call(
        CONV, model=HAIKU, usage=ModelUsage(input_tokens=10_000, cache_read_tokens=8_000)
    )
    ledger.record_offload(fired(), conversation_id=CONV)
    # after: only 2 000 read, 8 000 re-written: 6 000 tokens short of the baseline,
    # paid at the cache-write rate instead of the cache-read rate: 6 000 * (1.25 - 0.1) / 1M
    ledger.record_model_call(
        CONV,
        model=HAIKU,
        usage=ModelUsage(input_tokens=10_000, cache_read_tokens=2_000, cache_write_tokens=8_000),
    )
    # a call that meets the baseline costs nothing extra
    ledger.record_model_call(
        CONV, model=HAIKU, usage=ModelUsage(input_tokens=10_000, cache_read_tokens=8_000)
    )
    # an uncached miss: 8 000 short, paid at the input rate: 8 000 * (1 - 0.1) / 1M
    ledger.record_model_call(CONV, model=HAIKU, usage=ModelUsage(input_tokens=10_000))
    assert (
        pytest.approx(0.0069 + 0.0072, abs=1e-12)
        == realized(metric_reader)["costs"][(HAIKU, CACHE)]
    )
    [settlement] = ledger.end_conversation(CONV)
    assert D("0.0141") == settlement.cache_disruption_cost
    tokens = {
        tuple(dict(k)[a] for a in (c.ATTR_USAGE_CACHE, c.ATTR_OFFLOAD_ACTIVE)): v
        for k, v in s.metric_points(metric_reader)[c.METRIC_MODEL_INPUT_TOKENS.name].items()
    }
    assert {
        ("read", "false"): 8_000,
        ("uncached", "false"): 2_000,
        ("read", "true"): 10_000,
        ("write", "true"): 8_000,
        ("uncached", "true"): 12_000,
    } == tokens


def test_no_baseline_no_disruption_charged(
    ledger: OffloadLedger, metric_reader: InMemoryMetricReader
) -> None:
    ledger.record_offload(fired(), conversation_id=CONV)
    ledger.record_model_call(CONV, model=HAIKU, usage=ModelUsage(input_tokens=10_000))
    assert (HAIKU, CACHE) not in realized(metric_reader)["costs"]


def test_settlement_on_conversation_end(
    ledger: OffloadLedger,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
    captured_logs: list[dict[str, Any]],
) -> None:
    ledger.record_offload(fired(), conversation_id=CONV)
    ledger.record_model_call(CONV, model=HAIKU, usage=ModelUsage(1000))
    settlements = ledger.end_conversation(CONV)
    expected = Settlement(
        offload_id="off-1",
        conversation_id=CONV,
        model=HAIKU,
        trigger=c.SettleTrigger.CONVERSATION_END,
        predicted_net_saving=D("0.092725"),
        realized_savings=D("0.02"),
        stub_carry_cost=D("0.00008"),
        recall_cost=D(0),
        cache_disruption_cost=D(0),
        turns_carried=1,
        recalls=0,
        horizon=5,
        recall_probability=0.5,
    )
    assert [expected] == settlements
    assert (D("0.01992"), c.OffloadOutcome.GAIN) == (
        expected.realized_net_saving,
        expected.outcome,
    )
    assert () == ledger.live_offloads(CONV)
    assert [] == ledger.end_conversation(CONV)
    span = s.one(span_exporter.get_finished_spans(), c.SPAN_OFFLOAD_SETTLE)
    assert {
        c.ATTR_OFFLOAD_ID: "off-1",
        c.ATTR_GEN_AI_CONVERSATION_ID: CONV,
        c.ATTR_GEN_AI_REQUEST_MODEL: HAIKU,
        c.ATTR_OFFLOAD_OUTCOME: "gain",
        c.ATTR_OFFLOAD_SETTLE_TRIGGER: "conversation_end",
        c.ATTR_OFFLOAD_NET_SAVING_USD: 0.092725,
        c.ATTR_OFFLOAD_REALIZED_SAVINGS_USD: 0.02,
        c.ATTR_OFFLOAD_REALIZED_COSTS_USD: 0.00008,
        c.ATTR_OFFLOAD_REALIZED_NET_SAVING_USD: 0.01992,
        c.ATTR_OFFLOAD_CACHE_DELTA_USD: 0.0,
        c.ATTR_OFFLOAD_TURNS_CARRIED: 1,
        c.ATTR_OFFLOAD_RECALLS: 0,
        c.ATTR_OFFLOAD_HORIZON: 5,
        c.ATTR_OFFLOAD_RECALL_PROBABILITY: 0.5,
    } == s.attrs(span)
    assert [(c.EVENT_OFFLOAD_SETTLED, {c.ATTR_OFFLOAD_OUTCOME: "gain"})] == s.events(span)
    settled = s.metric_points(metric_reader)[c.METRIC_OFFLOAD_SETTLED.name]
    assert {
        s.point_key({c.ATTR_GEN_AI_REQUEST_MODEL: HAIKU, c.ATTR_OFFLOAD_OUTCOME: "gain"}): 1
    } == settled
    assert [
        {
            "event": c.LOG_OFFLOAD_SETTLED,
            "log_level": "info",
            "offload_id": "off-1",
            "model": HAIKU,
            "outcome": "gain",
            "trigger": "conversation_end",
            "predicted_net_saving_usd": 0.092725,
            "realized_net_saving_usd": 0.01992,
            "turns_carried": 1,
            "recalls": 0,
        }
    ] == captured_logs


def test_a_loss_settles_as_a_warning(
    ledger: OffloadLedger,
    metric_reader: InMemoryMetricReader,
    captured_logs: list[dict[str, Any]],
) -> None:
    ledger.record_offload(fired(), conversation_id=CONV)
    ledger.record_recall(CONV, "off-1", model=OPUS, input_tokens=20_000, output_tokens=500)
    [settlement] = ledger.settle(CONV)
    assert (c.SettleTrigger.EXPLICIT, c.OffloadOutcome.LOSS, D("-0.1125")) == (
        settlement.trigger,
        settlement.outcome,
        settlement.realized_net_saving,
    )
    assert [("warning", "loss")] == [(e["log_level"], e["outcome"]) for e in captured_logs]
    assert {
        s.point_key({c.ATTR_GEN_AI_REQUEST_MODEL: HAIKU, c.ATTR_OFFLOAD_OUTCOME: "loss"}): 1
    } == s.metric_points(metric_reader)[c.METRIC_OFFLOAD_SETTLED.name]


def test_settlement_after_idle_turns(tracer_provider: Any, meter_provider: Any) -> None:
    ledger = OffloadLedger(
        pricing=PRICING,
        idle_turns=2,
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
    )
    ledger.record_offload(fired(), conversation_id="quiet")
    ledger.record_model_call("busy", model=HAIKU, usage=ModelUsage(100))
    assert ("off-1",) == ledger.live_offloads("quiet")
    ledger.record_model_call("busy", model=HAIKU, usage=ModelUsage(100))
    assert () == ledger.live_offloads("quiet")
    assert [("off-1", c.SettleTrigger.IDLE)] == [
        (x.offload_id, x.trigger) for x in ledger.settlements
    ]


def test_eviction_by_max_conversations(tracer_provider: Any, meter_provider: Any) -> None:
    ledger = OffloadLedger(
        pricing=PRICING,
        max_conversations=2,
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
    )
    for conv in ("a", "b", "c"):
        ledger.record_offload(fired(f"off-{conv}"), conversation_id=conv)
    assert 2 == len(ledger)
    assert [("off-a", "a", c.SettleTrigger.EVICTED)] == [
        (x.offload_id, x.conversation_id, x.trigger) for x in ledger.settlements
    ]
    assert (("off-b",), ("off-c",)) == (ledger.live_offloads("b"), ledger.live_offloads("c"))


def test_eviction_by_max_offloads_per_conversation(
    tracer_provider: Any, meter_provider: Any
) -> None:
    ledger = OffloadLedger(
        pricing=PRICING,
        max_offloads_per_conversation=2,
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
    )
    for offload_id in ("off-1", "off-2", "off-3"):
        ledger.record_offload(fired(offload_id), conversation_id=CONV)
    assert ("off-2", "off-3") == ledger.live_offloads(CONV)
    assert [("off-1", c.SettleTrigger.EVICTED)] == [
        (x.offload_id, x.trigger) for x in ledger.settlements
    ]


def test_memory_is_bounded(captured_logs: list[dict[str, Any]]) -> None:
    ledger = OffloadLedger(
        pricing=PRICING, max_conversations=10, tracer_provider=trace.NoOpTracerProvider()
    )
    decision = fired()
    for i in range(1_200):
        ledger.record_offload(decision, conversation_id=f"conv-{i}")
        ledger.record_model_call(f"conv-{i}", model=HAIKU, usage=ModelUsage(100))
    assert 10 == len(ledger)
    assert 1_000 == len(ledger.settlements)
    assert "conv-1189" == ledger.settlements[-1].conversation_id


def test_a_decision_that_did_not_fire_is_not_followed(ledger: OffloadLedger) -> None:
    below = OffloadGate(pricing=PRICING).evaluate(100.0, HAIKU)
    ledger.record_offload(below, conversation_id=CONV)
    assert (0, ()) == (len(ledger), ledger.live_offloads(CONV))


def test_realized_counters_move_per_event_not_at_settlement(
    tracer_provider: Any, meter_provider: Any, metric_reader: InMemoryMetricReader
) -> None:
    # each event is counted when it happens (two ledgers feeding one meter provider
    # add up), and settling adds nothing to the realized counters
    first = OffloadLedger(
        pricing=PRICING, tracer_provider=tracer_provider, meter_provider=meter_provider
    )
    second = OffloadLedger(
        pricing=PRICING, tracer_provider=tracer_provider, meter_provider=meter_provider
    )
    for worker in (first, second):
        worker.record_offload(fired(), conversation_id=CONV)
    first.record_model_call(CONV, model=HAIKU, usage=ModelUsage(1000))
    assert {(HAIKU,): 0.02} == realized(metric_reader)["savings"]
    second.record_model_call(CONV, model=OPUS, usage=ModelUsage(1000))
    assert {(HAIKU,): 0.02, (OPUS,): 0.1} == realized(metric_reader)["savings"]
    second.record_recall(CONV, "off-1", model=HAIKU, input_tokens=20_000, output_tokens=300)
    before = realized(metric_reader)
    first.end_conversation(CONV)
    second.end_conversation(CONV)
    assert before == realized(metric_reader)


def test_settle_span_is_linked_to_the_gate_span(
    tracer_provider: Any, span_exporter: InMemorySpanExporter
) -> None:
    scenario = s.Scenario()
    layer = s.make_layer(scenario, tracer_provider=tracer_provider)
    s.ReActAgent(
        layer, s.ScriptedChat([scenario.response]), scenario.tools, max_iterations=1
    ).run_turn(s.CONVERSATION, s.USER_TEXT, role=s.ROLE)
    [settlement] = layer.end_conversation(s.CONVERSATION)
    assert ("off-1", c.SettleTrigger.CONVERSATION_END) == (
        settlement.offload_id,
        settlement.trigger,
    )
    spans = span_exporter.get_finished_spans()
    gate = s.named(spans, c.SPAN_OFFLOAD_GATE)[0]
    settle = s.one(spans, c.SPAN_OFFLOAD_SETTLE)
    assert [gate.context] == [link.context for link in settle.links]
    assert gate.attributes[c.ATTR_OFFLOAD_ID] == settle.attributes[c.ATTR_OFFLOAD_ID]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"idle_turns": 0},
        {"max_conversations": 0},
        {"max_offloads_per_conversation": True},
        {"label_cap": "3"},
        {"pricing": {"m": 1}},
    ],
)
def test_bad_configuration_raises_naming_the_field(kwargs: dict[str, Any]) -> None:
    field = next(iter(kwargs))
    with pytest.raises(ValueError, match=field):
        OffloadLedger(**kwargs)
