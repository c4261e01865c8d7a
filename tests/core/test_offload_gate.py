"""The offload gate: the seed's formula, its guards, and worked examples.

Every worked example is computed by hand in its docstring. Rates are USD per
1M tokens; per token, $5/M is $0.000005 and $25/M is $0.000025.
"""

from __future__ import annotations

import re
from dataclasses import FrozenInstanceError, replace
from decimal import Decimal
from typing import Any

import pytest

from seamscope.decisions import (
    OffloadGate,
    OffloadGateDecision,
    OffloadGateInputs,
    PricingTable,
    evaluate_offload_gate,
)
from seamscope.decisions.records import (
    DEFAULT_LARGE_OFFLOAD_THRESHOLD_TOKENS,
    DEFAULT_RECALL_INPUT_TOKENS,
    DEFAULT_RECALL_OUTPUT_TOKENS,
    DEFAULT_STUB_TOKENS,
    OffloadReasonCode,
    PricingSource,
)

OPUS = "claude-opus-4-6"
# the same $5/M input, $25/M output, from the user's override table
AT_LIST = PricingTable({"opus-at-list": {"input": 5, "output": 25}})

WORKED_A = OffloadGateDecision(
    fire=True,
    net_saving_usd=0.463625,
    reprefill_saving_usd=0.5,
    stub_carry_cost_usd=0.002,
    expected_recall_hop_cost_usd=0.034375,
    reason=(
        "net=$0.4636 (saving=$0.5000 − stub=$0.0020 − recall=$0.0344); "
        "H=5 p_recall=0.50 model=claude-opus-4-6"
    ),
    reason_code=OffloadReasonCode.NET_POSITIVE,
    pricing_source=PricingSource.GENAI_PRICES,
    model_name=OPUS,
    output_tokens=20_000.0,
    horizon=5,
    recall_probability=0.5,
    stub_tokens=80,
    net_saving=Decimal("0.463625"),
    rates=(Decimal(5), Decimal(25), Decimal("0.5"), Decimal("6.25")),  # genai-prices' row
)


def test_defaults_are_the_seeds() -> None:
    inputs = OffloadGateInputs(output_tokens=1.0, horizon=1, recall_probability=0.0, model_name="m")
    assert (80, 12_500, 250, 15_000, 80, 12_500, 250, 15_000) == (
        DEFAULT_STUB_TOKENS,
        DEFAULT_RECALL_INPUT_TOKENS,
        DEFAULT_RECALL_OUTPUT_TOKENS,
        DEFAULT_LARGE_OFFLOAD_THRESHOLD_TOKENS,
        inputs.stub_tokens,
        inputs.recall_input_tokens,
        inputs.recall_output_tokens,
        inputs.large_offload_threshold_tokens,
    )


def test_worked_example_a_fires() -> None:
    """claude-opus-4-6 ($5/M in, $25/M out), 20,000 tokens, H=5, p=0.5.

    saving = 20,000 × $0.000005 × 5                          = $0.500000
    stub   =     80 × $0.000005 × 5                          = $0.002000
    recall = 0.5 × (12,500 × $0.000005 + 250 × $0.000025)
           = 0.5 × ($0.062500 + $0.006250)                   = $0.034375
    net    = 0.500000 − (0.002000 + 0.034375)                = $0.463625 > 0 → fire
    """
    decision = evaluate_offload_gate(
        OffloadGateInputs(output_tokens=20_000, horizon=5, recall_probability=0.5, model_name=OPUS)
    )
    assert WORKED_A == decision
    assert Decimal("0.463625") == decision.net_saving


def test_worked_example_a_priced_by_an_override_says_so() -> None:
    """The same figures as example A, with the rates from the override table."""
    decision = evaluate_offload_gate(
        OffloadGateInputs(20_000, 5, 0.5, OPUS),
        pricing=PricingTable({OPUS: {"input": 5, "output": 25}}),
    )
    rates = (Decimal(5), Decimal(25), None, None)  # the rates it was priced with
    assert replace(WORKED_A, pricing_source=PricingSource.OVERRIDE, rates=rates) == decision


def test_below_threshold_never_fires() -> None:
    """14,999 tokens < the 15,000-token threshold: the pre-filter answers, no pricing.

    (Priced, it would have fired: 14,999 × $0.000005 × 5 = $0.374975 of saving.)
    """
    assert OffloadGateDecision(
        fire=False,
        net_saving_usd=0.0,
        reprefill_saving_usd=0.0,
        stub_carry_cost_usd=0.0,
        expected_recall_hop_cost_usd=0.0,
        reason="below large_offload_threshold (14999 < 15000 tokens)",
        reason_code=OffloadReasonCode.BELOW_THRESHOLD,
        pricing_source=PricingSource.NONE,
        model_name=OPUS,
        output_tokens=14_999.0,
        horizon=5,
        recall_probability=0.5,
    ) == evaluate_offload_gate(OffloadGateInputs(14_999, 5, 0.5, OPUS))


def test_exactly_at_the_threshold_the_formula_decides() -> None:
    """15,000 tokens is not below 15,000; H=5, p=0.5 on opus:

    saving = 15,000 × $0.000005 × 5 = $0.375; net = 0.375 − 0.002 − 0.034375 = $0.338625
    """
    decision = evaluate_offload_gate(OffloadGateInputs(15_000, 5, 0.5, OPUS))
    assert (True, OffloadReasonCode.NET_POSITIVE, Decimal("0.338625")) == (
        decision.fire,
        decision.reason_code,
        decision.net_saving,
    )


def test_an_unpriced_model_never_fires() -> None:
    """No price, no provable saving: even 1M tokens over 50 turns does not fire."""
    assert OffloadGateDecision(
        fire=False,
        net_saving_usd=0.0,
        reprefill_saving_usd=0.0,
        stub_carry_cost_usd=0.0,
        expected_recall_hop_cost_usd=0.0,
        reason="no pricing row for 'acme-llm-7'",
        reason_code=OffloadReasonCode.UNPRICED_MODEL,
        pricing_source=PricingSource.NONE,
        model_name="acme-llm-7",
        output_tokens=1_000_000.0,
        horizon=50,
        recall_probability=0.0,
    ) == evaluate_offload_gate(OffloadGateInputs(1_000_000, 50, 0.0, "acme-llm-7"))


def test_a_net_negative_offload_does_not_fire() -> None:
    """Threshold lowered to 10,000; 12,000 tokens, H=1, p=1, opus rates.

    saving = 12,000 × $0.000005 × 1                  = $0.060000
    stub   =     80 × $0.000005 × 1                  = $0.000400
    recall = 1 × ($0.062500 + $0.006250)             = $0.068750
    net    = 0.060000 − (0.000400 + 0.068750)        = −$0.009150 → no fire
    """
    assert OffloadGateDecision(
        fire=False,
        net_saving_usd=-0.00915,
        reprefill_saving_usd=0.06,
        stub_carry_cost_usd=0.0004,
        expected_recall_hop_cost_usd=0.06875,
        reason=(
            "net=$-0.0092 (saving=$0.0600 − stub=$0.0004 − recall=$0.0688); "
            "H=1 p_recall=1.00 model=claude-opus-4-6"
        ),
        reason_code=OffloadReasonCode.NET_NOT_POSITIVE,
        pricing_source=PricingSource.GENAI_PRICES,
        model_name=OPUS,
        output_tokens=12_000.0,
        horizon=1,
        recall_probability=1.0,
        stub_tokens=80,
        net_saving=Decimal("-0.00915"),
        threshold_tokens=10_000,  # the inputs it was priced with
        rates=WORKED_A.rates,
    ) == evaluate_offload_gate(
        OffloadGateInputs(12_000, 1, 1.0, OPUS, large_offload_threshold_tokens=10_000)
    )


def test_a_net_of_exactly_zero_does_not_fire() -> None:
    """$5/M in, $25/M out (override), threshold 10,000, 13,830 tokens, H=1, p=1.

    In units of $0.000005 the gate compares output_tokens × H with
    80 × H + p × (12,500 + 250 × 5) = 80 + 13,750 = 13,830 — equal:

    saving = 13,830 × $0.000005 = $0.069150
    stub   =     80 × $0.000005 = $0.000400
    recall = $0.062500 + $0.006250 = $0.068750
    net    = 0.069150 − 0.069150 = $0 exactly → fire only when net > 0: no fire
    """
    decision = evaluate_offload_gate(
        OffloadGateInputs(13_830, 1, 1.0, "opus-at-list", large_offload_threshold_tokens=10_000),
        pricing=AT_LIST,
    )
    assert (False, OffloadReasonCode.NET_NOT_POSITIVE, Decimal(0), 0.0, PricingSource.OVERRIDE) == (
        decision.fire,
        decision.reason_code,
        decision.net_saving,
        decision.net_saving_usd,
        decision.pricing_source,
    )


def test_a_zero_net_that_float_rounding_would_make_positive_does_not_fire() -> None:
    """8,330 tokens, H=1, p=0.6, opus rates, threshold 8,000.

    Exactly: 8,330 = 80 + 0.6 × 13,750 = 80 + 8,250, so net = $0. Summed in
    binary floating point the same terms leave about +7e-18, which would fire.
    """
    naive = 8_330 * 5e-6 * 1 - (80 * 5e-6 * 1 + 0.6 * (12_500 * 5e-6 + 250 * 25e-6))
    assert naive > 0.0  # the hazard this example exists for
    decision = evaluate_offload_gate(
        OffloadGateInputs(8_330, 1, 0.6, "opus-at-list", large_offload_threshold_tokens=8_000),
        pricing=AT_LIST,
    )
    assert (False, Decimal(0)) == (decision.fire, decision.net_saving)


def test_a_negative_horizon_clamps_to_zero_and_a_probability_above_one_to_one() -> None:
    """20,000 tokens on opus with H=−3 → 0 and p=1.7 → 1.

    saving = stub = 0 (no turns carried); recall = 1 × $0.068750
    net    = −$0.068750 → no fire
    """
    decision = evaluate_offload_gate(OffloadGateInputs(20_000, -3, 1.7, OPUS))
    assert (
        False,
        0,
        1.0,
        (0.0, 0.0, 0.06875, -0.06875),
        "net=$-0.0688 (saving=$0.0000 − stub=$0.0000 − recall=$0.0688); "
        "H=0 p_recall=1.00 model=claude-opus-4-6",
    ) == (
        decision.fire,
        decision.horizon,
        decision.recall_probability,
        (
            decision.reprefill_saving_usd,
            decision.stub_carry_cost_usd,
            decision.expected_recall_hop_cost_usd,
            decision.net_saving_usd,
        ),
        decision.reason,
    )


def test_a_negative_probability_clamps_to_zero() -> None:
    """20,000 tokens, H=5, p=−0.5 → 0: net = $0.5 − $0.002 − 0 = $0.498 → fire."""
    decision = evaluate_offload_gate(OffloadGateInputs(20_000, 5, -0.5, OPUS))
    assert (True, 0.0, 0.0, Decimal("0.498")) == (
        decision.fire,
        decision.recall_probability,
        decision.expected_recall_hop_cost_usd,
        decision.net_saving,
    )


def test_the_reason_carries_every_priced_term() -> None:
    decision = evaluate_offload_gate(OffloadGateInputs(20_000, 5, 0.5, OPUS))
    terms = re.fullmatch(
        r"net=\$(\S+) \(saving=\$(\S+) − stub=\$(\S+) − recall=\$(\S+)\); "
        r"H=(\d+) p_recall=(\S+) model=(\S+)",
        decision.reason,
    )
    assert terms is not None
    assert ("0.4636", "0.5000", "0.0020", "0.0344", "5", "0.50", OPUS) == terms.groups()


def test_the_gate_is_pure() -> None:
    inputs = OffloadGateInputs(20_000, 5, 0.5, OPUS)
    first = evaluate_offload_gate(inputs)
    second = evaluate_offload_gate(inputs)
    assert (first, OffloadGateInputs(20_000, 5, 0.5, OPUS)) == (second, inputs)
    with pytest.raises(FrozenInstanceError):
        inputs.horizon = 3  # type: ignore[misc]


def test_the_horizon_is_the_prior_and_scales_the_saving() -> None:
    """Each extra turn adds 20,000 × $0.000005 = $0.10 of saving and $0.0004 of stub."""
    nets = [
        evaluate_offload_gate(OffloadGateInputs(20_000, h, 0.5, OPUS)).net_saving for h in (0, 1, 2)
    ]
    assert [Decimal("-0.034375"), Decimal("0.065225"), Decimal("0.164825")] == nets


# -- OffloadGate, the configured class ------------------------------------------------------


def test_offload_gate_evaluates_with_its_priors_and_ids_a_fired_decision() -> None:
    ids = iter(["off-1", "off-2"])
    gate = OffloadGate(horizon=5, recall_probability=0.5, id_factory=lambda: next(ids))
    assert (
        replace(WORKED_A, offload_id="off-1"),
        "off-2",
    ) == (gate.evaluate(20_000, OPUS), gate.evaluate(30_000, OPUS).offload_id)


def test_offload_gate_does_not_id_a_decision_that_did_not_fire() -> None:
    gate = OffloadGate(id_factory=lambda: "never")
    assert [None, None] == [
        gate.evaluate(100, OPUS).offload_id,
        gate.evaluate(50_000, "x").offload_id,
    ]


def test_offload_gate_default_ids_are_distinct_hex() -> None:
    gate = OffloadGate()
    ids = [gate.evaluate(20_000, OPUS).offload_id for _ in range(3)]
    assert [True, True, True, 3] == [
        *(isinstance(i, str) and re.fullmatch(r"[0-9a-f]{16}", i) is not None for i in ids),
        len(set(ids)),
    ]


def test_offload_gate_builds_inputs_from_its_configuration() -> None:
    gate = OffloadGate(
        horizon=3,
        recall_probability=0.25,
        large_offload_threshold_tokens=9_000,
        stub_tokens=40,
        recall_input_tokens=1_000,
        recall_output_tokens=100,
        pricing=AT_LIST,
    )
    assert (
        OffloadGateInputs(12_000.0, 3, 0.25, "opus-at-list", 9_000, 40, 1_000, 100),
        (40, 9_000, AT_LIST),
        PricingSource.OVERRIDE,
    ) == (
        gate.inputs(12_000, "opus-at-list"),
        (gate.stub_tokens, gate.threshold_tokens, gate.pricing),
        gate.evaluate(12_000, "opus-at-list").pricing_source,
    )


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"horizon": -1}, "horizon"),
        ({"horizon": 2.5}, "horizon"),
        ({"horizon": True}, "horizon"),
        ({"recall_probability": -0.1}, "recall_probability"),
        ({"recall_probability": 1.01}, "recall_probability"),
        ({"recall_probability": float("nan")}, "recall_probability"),
        ({"recall_probability": "0.5"}, "recall_probability"),
        ({"recall_probability": True}, "recall_probability"),
        ({"large_offload_threshold_tokens": -1}, "large_offload_threshold_tokens"),
        ({"stub_tokens": -80}, "stub_tokens"),
        ({"recall_input_tokens": 1.5}, "recall_input_tokens"),
        ({"recall_output_tokens": None}, "recall_output_tokens"),
        ({"pricing": {"m": {"input": 1, "output": 1}}}, "pricing"),
        ({"id_factory": "uuid"}, "id_factory"),
    ],
    ids=lambda v: repr(v) if not isinstance(v, str) else v,
)
def test_offload_gate_validates_its_priors(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(ValueError, match=rf"\b{field}\b"):
        OffloadGate(**kwargs)


def test_offload_gate_accepts_the_edges_of_its_priors() -> None:
    gate = OffloadGate(horizon=0, recall_probability=1)
    assert (0, 1.0) == (gate.horizon, gate.recall_probability)


@pytest.mark.parametrize("size", [float("nan"), float("inf"), float("-inf")])
def test_an_output_size_that_is_not_finite_never_fires(size: float) -> None:
    """A NaN or infinite size cannot be priced: no fire, never an exception."""
    decision = evaluate_offload_gate(OffloadGateInputs(size, 5, 0.5, OPUS))
    assert (False, OffloadReasonCode.BELOW_THRESHOLD, 0.0) == (
        decision.fire,
        decision.reason_code,
        decision.net_saving_usd,
    )


def test_a_nan_recall_probability_is_priced_as_certain_recall() -> None:
    """p = NaN counts as 1: recall = 12 500 × $5/M + 250 × $25/M = $0.06875."""
    decision = evaluate_offload_gate(OffloadGateInputs(20_000, 5, float("nan"), OPUS))
    assert (1.0, 0.06875) == (
        decision.recall_probability,
        decision.expected_recall_hop_cost_usd,
    )
