"""whatif re-settles the realized side at the rates the loop priced with, as its gate
and settle spans record them: a model the user priced (a negotiated price, a local
model genai-prices does not know) reproduces the live ledger to the Decimal."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from benchmarks.bench_calibrate import Conversation, play

from seamscope.adapters import DecisionLayer
from seamscope.cli import main
from seamscope.decisions._pricing import DEFAULT_PRICING, PricingTable
from seamscope.telemetry import configure
from seamscope.telemetry import conventions as c

MODEL = "acme-local-7b"  # unknown to genai-prices: only the user's table prices it
RATES = {"input": "3.7", "output": "11.1", "cache_read": "0.37"}


def _conversations() -> list[Conversation]:
    """Offloads that are recalled, that are not, and outputs below the threshold."""
    out = []
    for i in range(12):
        tokens = (800.0, 5_000.0, 20_000.0, 41_234.5)[i % 4]
        recall = (None, 2, None, 1)[i % 4] if i % 3 else None
        out.append(Conversation(f"priced-{i}", f"tool_{i % 3}", MODEL, tokens, 3 + i % 4, recall))
    return out


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Decimal, int]:
    """(the trace of a loop priced by the user's table, its live realized net, offloads)."""
    assert DEFAULT_PRICING.lookup(MODEL) is None
    path = tmp_path_factory.mktemp("rates") / "trace.jsonl"
    handle = configure(
        service_name="whatif-rates", trace_file=path, set_global=False,
        register_atexit=False, environ={},
    )  # fmt: skip
    count = iter(range(1, 1 << 30))
    try:
        layer = DecisionLayer(
            default_model=MODEL,
            telemetry=handle,
            offload_threshold_tokens=1_000,
            pricing=PricingTable({MODEL: RATES}),
            offload_id_factory=lambda: f"off-{next(count)}",
        )
        live = sum((play(layer, conv) for conv in _conversations()), Decimal(0))
        handle.flush()
    finally:
        handle.shutdown()
    return path, live, next(count) - 1


def _whatif(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert 0 == main(["whatif", *argv, "--format", "json"])
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    return rows[-1]["total"]  # type: ignore[no-any-return]


def _spans(path: Path, name: str) -> list[dict[str, Any]]:
    found = []
    for line in path.read_text(encoding="utf-8").splitlines():
        for rs in json.loads(line)["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for sp in ss["spans"]:
                    if sp["name"] == name:
                        found.append({a["key"]: a["value"] for a in sp["attributes"]})
    return found


def test_gate_and_settle_spans_record_the_rates_the_loop_priced_with(
    recorded: tuple[Path, Decimal, int],
) -> None:
    path, _, offloads = recorded
    expected = {
        c.ATTR_OFFLOAD_INPUT_USD_PER_MTOK: {"doubleValue": 3.7},
        c.ATTR_OFFLOAD_OUTPUT_USD_PER_MTOK: {"doubleValue": 11.1},
        c.ATTR_OFFLOAD_CACHE_READ_USD_PER_MTOK: {"doubleValue": 0.37},
    }
    gates = [g for g in _spans(path, c.SPAN_OFFLOAD_GATE) if c.ATTR_OFFLOAD_ID in g]
    settles = _spans(path, c.SPAN_OFFLOAD_SETTLE)
    assert offloads == len(gates) == len(settles) >= 4
    for attrs in gates + settles:
        assert expected == {k: attrs.get(k) for k in expected}
        assert c.ATTR_OFFLOAD_CACHE_WRITE_USD_PER_MTOK not in attrs  # the table has none
    below = [g for g in _spans(path, c.SPAN_OFFLOAD_GATE) if c.ATTR_OFFLOAD_ID not in g]
    assert below and all(c.ATTR_OFFLOAD_INPUT_USD_PER_MTOK not in g for g in below)


def test_the_recorded_config_reproduces_the_live_ledger_to_the_decimal(
    recorded: tuple[Path, Decimal, int], capsys: pytest.CaptureFixture[str]
) -> None:
    path, live, offloads = recorded
    total = _whatif(capsys, str(path))
    assert live != 0
    assert (str(live.normalize()), "0") == (total["realized_usd"], total["difference_exact_usd"])
    assert (offloads, offloads, 0) == (
        total["recorded_fires"],
        total["counterfactual_fires"],
        total["mismatched_settlements"],
    )


def test_a_price_set_to_the_recorded_rate_changes_nothing_and_another_only_the_counterfactual(
    recorded: tuple[Path, Decimal, int], capsys: pytest.CaptureFixture[str]
) -> None:
    path, live, offloads = recorded
    same = _whatif(capsys, str(path), "--set", f"price.{MODEL}.input=3.7")
    assert (str(live.normalize()), "0") == (same["realized_usd"], same["difference_exact_usd"])
    assert offloads == same["counterfactual_fires"]
    dearer = _whatif(capsys, str(path), "--set", f"price.{MODEL}.input=7.4")
    assert str(live.normalize()) == dearer["realized_usd"]  # the realized side stays
    assert Decimal(dearer["difference_exact_usd"]) > 0  # twice the input rate: twice the saving
