"""Pricing: the override table first, then genai-prices offline; unknown is unpriced."""

from __future__ import annotations

import socket
from decimal import Decimal
from typing import Any

import pytest

from seamscope.decisions import ModelPrice, OffloadGateInputs, PricingTable, evaluate_offload_gate
from seamscope.decisions._pricing import PriceQuote, _genai_prices_lookup, to_decimal
from seamscope.decisions.records import PricingSource

OPUS = "claude-opus-4-6"
OPUS_LIST = ModelPrice(Decimal(5), Decimal(25), Decimal("0.5"), Decimal("6.25"))


def test_genai_prices_prices_a_known_model() -> None:
    assert PriceQuote(OPUS, OPUS_LIST, PricingSource.GENAI_PRICES) == PricingTable().lookup(OPUS)


def test_an_override_comes_before_genai_prices() -> None:
    table = PricingTable({OPUS: {"input": "4.5", "output": 20}})
    assert PriceQuote(
        OPUS, ModelPrice(Decimal("4.5"), Decimal(20)), PricingSource.OVERRIDE
    ) == table.lookup(OPUS)


def test_models_without_an_override_still_reach_genai_prices() -> None:
    table = PricingTable({"in-house-llm": ModelPrice(Decimal(1), Decimal(2))})
    assert (PricingSource.OVERRIDE, PricingSource.GENAI_PRICES) == (
        table.lookup("in-house-llm").source,  # type: ignore[union-attr]
        table.lookup(OPUS).source,  # type: ignore[union-attr]
    )


@pytest.mark.parametrize("model", ["acme-llm-7", ""])
def test_an_unknown_model_is_unpriced(model: str) -> None:
    assert None is PricingTable().lookup(model)


def test_genai_prices_can_be_switched_off() -> None:
    in_house = ModelPrice(Decimal(1), Decimal(2))
    table = PricingTable({"in-house-llm": in_house}, use_genai_prices=False)
    assert (None, PricingSource.OVERRIDE) == (
        table.lookup(OPUS),
        table.lookup("in-house-llm").source,  # type: ignore[union-attr]
    )


def test_genai_prices_is_used_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_network(*args: Any, **kwargs: Any) -> None:
        raise OSError("network access in an offline lookup")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    assert OPUS_LIST == _genai_prices_lookup.__wrapped__(OPUS)


def test_the_gate_records_which_source_priced_it() -> None:
    inputs = OffloadGateInputs(20_000, 5, 0.5, OPUS)
    assert [PricingSource.GENAI_PRICES, PricingSource.OVERRIDE, PricingSource.NONE] == [
        evaluate_offload_gate(inputs).pricing_source,
        evaluate_offload_gate(
            inputs, pricing=PricingTable({OPUS: {"input": 5, "output": 25}})
        ).pricing_source,
        evaluate_offload_gate(inputs, pricing=PricingTable(use_genai_prices=False)).pricing_source,
    ]


def test_rates_are_exact_per_token_decimals() -> None:
    price = ModelPrice(5, 25, cache_read_per_mtok="0.5")  # type: ignore[arg-type]
    assert (
        Decimal("0.000005"),
        Decimal("0.000025"),
        Decimal("0.0000005"),
        Decimal("0.000005"),
    ) == (price.input_rate, price.output_rate, price.cache_read_rate, price.cache_write_rate)


def test_float_prices_are_read_by_their_shortest_repr() -> None:
    from_float = ModelPrice(0.3, 1)  # type: ignore[arg-type]
    assert (Decimal("0.1"), Decimal("0.3")) == (to_decimal(0.1), from_float.input_per_mtok)


@pytest.mark.parametrize(
    ("overrides", "needle"),
    [
        ({"": {"input": 1, "output": 1}}, "model names"),
        ({"m": {"input": 1}}, "'input' and 'output'"),
        ({"m": {"input": 1, "output": 1, "batch": 1}}, "batch"),
        ({"m": (1, 2)}, "ModelPrice"),
        ({"m": {"input": -1, "output": 1}}, "input_per_mtok"),
        ({"m": {"input": True, "output": 1}}, "input_per_mtok"),
        ({"m": {"input": "cheap", "output": 1}}, "input_per_mtok"),
    ],
    ids=["empty-name", "missing-output", "unknown-key", "not-a-price", "negative", "bool", "text"],
)
def test_bad_overrides_are_rejected(overrides: dict[str, Any], needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        PricingTable(overrides)
