"""OffloadLedger: realized savings and costs per event, settlement, bounded memory.

The ledger is pure accounting (``seamscope.decisions``): it hands its records
to the observer, and the OTelObserver turns them into the realized metrics,
the ``seamscope.offload.settle`` span and the settlement log.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from seamscope.decisions import ModelUsage, OffloadGate, OffloadLedger, PricingTable
from seamscope.decisions.records import (
    CarriedStub,
    GateCall,
    ModelCallAccount,
    RecallAccount,
    Settlement,
)
from seamscope.telemetry import OTelObserver
from seamscope.telemetry import conventions as c

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


def otel(tracer_provider: Any, meter_provider: Any) -> OTelObserver:
    return OTelObserver(tracer_provider=tracer_provider, meter_provider=meter_provider)


def make_ledger(tracer_provider: Any, meter_provider: Any, **kwargs: Any) -> OffloadLedger:
    return OffloadLedger(pricing=PRICING, observer=otel(tracer_provider, meter_provider), **kwargs)


@pytest.fixture
def ledger(tracer_provider: Any, meter_provider: Any) -> OffloadLedger:
    return make_ledger(tracer_provider, meter_provider)


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
    usage = ModelUsage(input_tokens=1000)
    accounts = [
        ledger.record_model_call(CONV, model=OPUS, usage=usage),
        ledger.record_model_call(CONV, model=HAIKU, usage=usage),
    ]
    # 20 000 avoided tokens at $5/M then $1/M; the 80-token stub at the same rates
    assert [
        ModelCallAccount(CONV, OPUS, usage, True, D("0.1"), D("0.0004"), D(0)),
        ModelCallAccount(CONV, HAIKU, usage, True, D("0.02"), D("0.00008"), D(0)),
    ] == accounts
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
    worker_a = make_ledger(tracer_provider, meter_provider)
    worker_b = make_ledger(tracer_provider, meter_provider)
    worker_a.record_offload(fired(), conversation_id=CONV)
    stub = CarriedStub("off-1", output_tokens=20_000.0, stub_tokens=80)
    account = worker_b.record_model_call(CONV, model=OPUS, usage=ModelUsage(1000), carried=[stub])
    # worker B follows no offload: the call was made with none active there
    assert ModelCallAccount(CONV, OPUS, ModelUsage(1000), False, D("0.1"), D("0.0004")) == account
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
    account = ledger.record_recall(
        CONV, "off-1", model=HAIKU, input_tokens=20_000, output_tokens=300
    )
    # 20 000 * $1/M + 300 * $5/M
    assert RecallAccount(CONV, "off-1", HAIKU, 20_000, 300, D("0.0215")) == account
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
        remaining_turns=1,
        rates=(D(1), D(5), D("0.1"), D("1.25")),  # the ledger's rates for the model
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
        c.ATTR_OFFLOAD_MECHANISM: "seamscope_gate",
        c.ATTR_OFFLOAD_INPUT_USD_PER_MTOK: 1.0,
        c.ATTR_OFFLOAD_OUTPUT_USD_PER_MTOK: 5.0,
        c.ATTR_OFFLOAD_CACHE_READ_USD_PER_MTOK: 0.1,
        c.ATTR_OFFLOAD_CACHE_WRITE_USD_PER_MTOK: 1.25,
    } == s.attrs(span)
    assert [(c.EVENT_OFFLOAD_SETTLED, {c.ATTR_OFFLOAD_OUTCOME: "gain"})] == s.events(span)
    settled = s.metric_points(metric_reader)[c.METRIC_OFFLOAD_SETTLED.name]
    assert {
        s.point_key(
            {
                c.ATTR_GEN_AI_REQUEST_MODEL: HAIKU,
                c.ATTR_OFFLOAD_OUTCOME: "gain",
                c.ATTR_OFFLOAD_MECHANISM: "seamscope_gate",
            }
        ): 1
    } == settled
    assert [
        {
            "event": c.LOG_OFFLOAD_SETTLED,
            "log_level": "info",
            "offload_id": "off-1",
            "model": HAIKU,
            "outcome": "gain",
            "trigger": "conversation_end",
            "mechanism": "seamscope_gate",
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
        s.point_key(
            {
                c.ATTR_GEN_AI_REQUEST_MODEL: HAIKU,
                c.ATTR_OFFLOAD_OUTCOME: "loss",
                c.ATTR_OFFLOAD_MECHANISM: "seamscope_gate",
            }
        ): 1
    } == s.metric_points(metric_reader)[c.METRIC_OFFLOAD_SETTLED.name]


def test_settlement_after_idle_turns(tracer_provider: Any, meter_provider: Any) -> None:
    """Idle = missed ``idle_turns`` rounds of the live conversations: with two
    conversations, two rounds are four model calls of the ledger."""
    ledger = make_ledger(tracer_provider, meter_provider, idle_turns=2)
    ledger.record_offload(fired(), conversation_id="quiet")
    for _ in range(3):
        ledger.record_model_call("busy", model=HAIKU, usage=ModelUsage(100))
    assert ("off-1",) == ledger.live_offloads("quiet")
    ledger.record_model_call("busy", model=HAIKU, usage=ModelUsage(100))
    assert () == ledger.live_offloads("quiet")
    assert [("off-1", c.SettleTrigger.IDLE)] == [
        (x.offload_id, x.trigger) for x in ledger.settlements
    ]


def test_eviction_by_max_conversations(tracer_provider: Any, meter_provider: Any) -> None:
    ledger = make_ledger(tracer_provider, meter_provider, max_conversations=2)
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
    ledger = make_ledger(tracer_provider, meter_provider, max_offloads_per_conversation=2)
    for offload_id in ("off-1", "off-2", "off-3"):
        ledger.record_offload(fired(offload_id), conversation_id=CONV)
    assert ("off-2", "off-3") == ledger.live_offloads(CONV)
    assert [("off-1", c.SettleTrigger.EVICTED)] == [
        (x.offload_id, x.trigger) for x in ledger.settlements
    ]


def test_memory_is_bounded(captured_logs: list[dict[str, Any]]) -> None:
    ledger = make_ledger(
        trace.NoOpTracerProvider(), metrics.NoOpMeterProvider(), max_conversations=10
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
    first = make_ledger(tracer_provider, meter_provider)
    second = make_ledger(tracer_provider, meter_provider)
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
        {"idle_turns": "3"},
        {"pricing": {"m": 1}},
    ],
)
def test_bad_configuration_raises_naming_the_field(kwargs: dict[str, Any]) -> None:
    field = next(iter(kwargs))
    with pytest.raises(ValueError, match=field):
        OffloadLedger(**kwargs)


@pytest.mark.parametrize("setting", ["tracer_provider", "meter_provider", "label_cap"])
def test_the_ledger_takes_no_telemetry_settings(setting: str) -> None:
    # pure accounting: telemetry is the observer's (and its TelemetryConfig's)
    with pytest.raises(TypeError, match=setting):
        OffloadLedger(**{setting: None})


# -- outcomes ---------------------------------------------------------------------


def test_an_exactly_zero_realized_net_saving_breaks_even(
    ledger: OffloadLedger,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
    captured_logs: list[dict[str, Any]],
) -> None:
    ledger.record_offload(fired(), conversation_id=CONV)
    # one carried call saves 20 000 * $1/M and pays the stub 80 * $1/M: $0.01992 ...
    ledger.record_model_call(CONV, model=HAIKU, usage=ModelUsage(1000))
    # ... and a recall of exactly 19 920 input tokens at $1/M costs it back
    ledger.record_recall(CONV, "off-1", model=HAIKU, input_tokens=19_920, output_tokens=0)
    [settlement] = ledger.settle(CONV)
    assert (D("0.02"), D("0.00008"), D("0.01992"), D(0), c.OffloadOutcome.BREAK_EVEN) == (
        settlement.realized_savings,
        settlement.stub_carry_cost,
        settlement.recall_cost,
        settlement.realized_net_saving,
        settlement.outcome,
    )
    span = s.one(span_exporter.get_finished_spans(), c.SPAN_OFFLOAD_SETTLE)
    assert (c.OffloadOutcome.BREAK_EVEN.value, 0.0) == (
        span.attributes[c.ATTR_OFFLOAD_OUTCOME],
        span.attributes[c.ATTR_OFFLOAD_REALIZED_NET_SAVING_USD],
    )
    assert [(c.EVENT_OFFLOAD_SETTLED, {c.ATTR_OFFLOAD_OUTCOME: "break_even"})] == s.events(span)
    assert {
        s.point_key(
            {
                c.ATTR_GEN_AI_REQUEST_MODEL: HAIKU,
                c.ATTR_OFFLOAD_OUTCOME: "break_even",
                c.ATTR_OFFLOAD_MECHANISM: "seamscope_gate",
            }
        ): 1
    } == s.metric_points(metric_reader)[c.METRIC_OFFLOAD_SETTLED.name]
    # no loss: logged at info
    assert [("info", "break_even", 0.0)] == [
        (e["log_level"], e["outcome"], e["realized_net_saving_usd"])
        for e in captured_logs
        if e["event"] == c.LOG_OFFLOAD_SETTLED
    ]


def test_a_recalled_offload_is_no_longer_carried(
    ledger: OffloadLedger, metric_reader: InMemoryMetricReader
) -> None:
    ledger.record_offload(fired(), conversation_id=CONV)
    usage = ModelUsage(1000)
    carried = ledger.record_model_call(CONV, model=HAIKU, usage=usage)
    ledger.record_recall(CONV, "off-1", model=HAIKU, input_tokens=20_000, output_tokens=300)
    # its output is back in the prompt: no saving, no stub cost for it any more
    after = [ledger.record_model_call(CONV, model=HAIKU, usage=usage) for _ in range(2)]
    assert ModelCallAccount(CONV, HAIKU, usage, True, D("0.02"), D("0.00008")) == carried
    assert [ModelCallAccount(CONV, HAIKU, usage, True)] * 2 == after
    assert {
        "savings": {(HAIKU,): 0.02},
        "costs": {(HAIKU, STUB): 0.00008, (HAIKU, RECALL): 0.0215},
        "recalls": {(HAIKU,): 1},
    } == realized(metric_reader)
    # still followed (it settles), and a call that names it carries it again
    assert ("off-1",) == ledger.live_offloads(CONV)
    named = ledger.record_model_call(CONV, model=HAIKU, usage=usage, carried=["off-1"])
    assert ModelCallAccount(CONV, HAIKU, usage, True, D("0.02"), D("0.00008")) == named
    [settlement] = ledger.end_conversation(CONV)
    assert (2, D("0.04"), D("0.00016"), D("0.0215"), 1) == (
        settlement.turns_carried,
        settlement.realized_savings,
        settlement.stub_carry_cost,
        settlement.recall_cost,
        settlement.recalls,
    )


def test_a_recall_puts_the_cache_disruption_on_the_recalled_offload(
    ledger: OffloadLedger,
) -> None:
    # baseline: 80 % cache reads before any offload
    ledger.record_model_call(
        CONV, model=HAIKU, usage=ModelUsage(input_tokens=10_000, cache_read_tokens=8_000)
    )
    ledger.record_offload(fired("off-1"), conversation_id=CONV)
    ledger.record_offload(fired("off-2"), conversation_id=CONV)
    ledger.record_recall(CONV, "off-1", model=HAIKU, input_tokens=100, output_tokens=0)
    # an uncached miss right after the recall: 8 000 * (1 - 0.1) / 1M, all off-1's;
    # only off-2 is carried
    account = ledger.record_model_call(CONV, model=HAIKU, usage=ModelUsage(input_tokens=10_000))
    assert (D("0.02"), D("0.00008"), D("0.0072")) == (
        account.saving,
        account.stub_carry_cost,
        account.cache_disruption_cost,
    )
    by_id = {x.offload_id: x for x in ledger.end_conversation(CONV)}
    assert {"off-1": (0, D("0.0072")), "off-2": (1, D(0))} == {
        key: (x.turns_carried, x.cache_disruption_cost) for key, x in by_id.items()
    }


# -- the settle span: its trace and its link --------------------------------------


def gate_and_ledger(
    tracer_provider: Any, meter_provider: Any, **kwargs: Any
) -> tuple[OffloadGate, OffloadLedger]:
    """A gate and a ledger reporting to one OTelObserver; ids off-1, off-2, ..."""
    observer = otel(tracer_provider, meter_provider)
    ids = iter(f"off-{i}" for i in range(1, 100))
    gate = OffloadGate(pricing=PRICING, observer=observer, id_factory=lambda: next(ids))
    return gate, OffloadLedger(pricing=PRICING, observer=observer, **kwargs)


def test_evaluate_linked_gives_the_gate_span_and_the_settle_span_links_to_it(
    tracer_provider: Any, meter_provider: Any, span_exporter: InMemorySpanExporter
) -> None:
    gate, ledger = gate_and_ledger(tracer_provider, meter_provider)
    links = []
    for tool_call_id in ("call_1", "call_2"):
        decision, link = gate.evaluate_linked(
            20_000.0, HAIKU, GateCall(CONV, None, "f", tool_call_id)
        )
        ledger.record_offload(decision, conversation_id=CONV, link=link)
        links.append(link)
    gates = s.named(span_exporter.get_finished_spans(), c.SPAN_OFFLOAD_GATE)
    # the link is the observer's: the context of the gate span that decided
    assert [g.context for g in gates] == links
    assert ["off-1", "off-2"] == [g.attributes[c.ATTR_OFFLOAD_ID] for g in gates]
    settlements = ledger.end_conversation(CONV)
    assert links == [x.link for x in settlements]
    settles = s.named(span_exporter.get_finished_spans(), c.SPAN_OFFLOAD_SETTLE)
    # each settlement links to exactly its own gate span
    assert [("off-1", [gates[0].context]), ("off-2", [gates[1].context])] == [
        (span.attributes[c.ATTR_OFFLOAD_ID], [link.context for link in span.links])
        for span in settles
    ]


def test_an_offload_recorded_without_a_link_settles_unlinked(
    ledger: OffloadLedger, span_exporter: InMemorySpanExporter
) -> None:
    ledger.record_offload(fired(), conversation_id=CONV)
    [settlement] = ledger.end_conversation(CONV)
    assert settlement.link is None
    assert () == tuple(s.one(span_exporter.get_finished_spans(), c.SPAN_OFFLOAD_SETTLE).links)


@pytest.mark.parametrize(
    ("kwargs", "trigger"),
    [
        ({"idle_turns": 2}, c.SettleTrigger.IDLE),
        ({"max_conversations": 1}, c.SettleTrigger.EVICTED),
    ],
    ids=["idle", "evicted"],
)
def test_a_settlement_forced_by_another_conversation_is_a_root_span(
    tracer_provider: Any,
    meter_provider: Any,
    span_exporter: InMemorySpanExporter,
    kwargs: dict[str, Any],
    trigger: c.SettleTrigger,
) -> None:
    gate, ledger = gate_and_ledger(tracer_provider, meter_provider, **kwargs)
    tracer = tracer_provider.get_tracer("test")
    with tracer.start_as_current_span("turn A"):
        decision, link = gate.evaluate_linked(20_000.0, HAIKU, GateCall("A"))
        ledger.record_offload(decision, conversation_id="A", link=link)
    with tracer.start_as_current_span("turn B") as turn_b:
        for _ in range(4):  # two rounds of the two conversations
            ledger.record_model_call("B", model=HAIKU, usage=ModelUsage(100))
    assert [("off-1", "A", trigger)] == [
        (x.offload_id, x.conversation_id, x.trigger) for x in ledger.settlements
    ]
    spans = span_exporter.get_finished_spans()
    gate_span = s.one(spans, c.SPAN_OFFLOAD_GATE)
    settle = s.one(spans, c.SPAN_OFFLOAD_SETTLE)
    # A's settlement: no parent, a trace of its own (neither B's nor A's), linked to A's gate
    assert settle.parent is None
    assert settle.context.trace_id not in {
        turn_b.get_span_context().trace_id,
        gate_span.context.trace_id,
    }
    assert [gate_span.context] == [link.context for link in settle.links]
    assert ("A", trigger.value) == (
        settle.attributes[c.ATTR_GEN_AI_CONVERSATION_ID],
        settle.attributes[c.ATTR_OFFLOAD_SETTLE_TRIGGER],
    )


def test_a_settlement_of_the_current_conversation_joins_the_current_span(
    tracer_provider: Any, meter_provider: Any, span_exporter: InMemorySpanExporter
) -> None:
    gate, ledger = gate_and_ledger(tracer_provider, meter_provider)
    decision, link = gate.evaluate_linked(20_000.0, HAIKU, GateCall(CONV))
    ledger.record_offload(decision, conversation_id=CONV, link=link)
    with tracer_provider.get_tracer("test").start_as_current_span("end of turn") as current:
        ledger.end_conversation(CONV)
    settle = s.one(span_exporter.get_finished_spans(), c.SPAN_OFFLOAD_SETTLE)
    assert settle.parent is not None
    assert (current.get_span_context().trace_id, current.get_span_context().span_id) == (
        settle.context.trace_id,
        settle.parent.span_id,
    )
    assert [link] == [x.context for x in settle.links]


def test_interleaved_conversations_never_settle_one_another_early(
    tracer_provider: Any, meter_provider: Any
) -> None:
    """64 conversations taking turns (one model call each per round) are never
    idle however long they go on; one that stops is settled after missing
    ``idle_turns`` rounds, and its recall before that is in its settlement."""
    ledger = make_ledger(tracer_provider, meter_provider, idle_turns=2)
    convs = [f"c{i}" for i in range(64)]
    for i, conv in enumerate(convs):
        ledger.record_offload(fired(offload_id=f"off-{i}"), conversation_id=conv)
    rounds = [*convs[1:], convs[0]]  # c0 takes its turn last in each round
    for _ in range(10):
        for conv in rounds:
            ledger.record_model_call(conv, model=HAIKU, usage=ModelUsage(100))
    ledger.record_recall("c0", "off-0", model=HAIKU, input_tokens=5_000, output_tokens=10)
    assert [] == ledger.settlements
    # c0 stops; the other 63 go on: c0 is settled once the ledger has recorded
    # two rounds (2 x 64 model calls) without it, not before
    for _ in range(2):
        for conv in convs[1:]:
            ledger.record_model_call(conv, model=HAIKU, usage=ModelUsage(100))
    assert [] == ledger.settlements
    for conv in convs[1:3]:
        ledger.record_model_call(conv, model=HAIKU, usage=ModelUsage(100))
    assert [("c0", c.SettleTrigger.IDLE, 10, 1)] == [
        (x.conversation_id, x.trigger, x.turns_carried, x.recalls) for x in ledger.settlements
    ]
