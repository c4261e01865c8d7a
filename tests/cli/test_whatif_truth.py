"""whatif's range for offloads that would newly fire bounds what really happens: a
corpus recorded with a gate that never fires is re-priced under a lower threshold,
then run again, for real, under that threshold; each conversation's realized net
lies within the range whatif gave it (a recall ends the carrying, costs the
output's real size, and the stub is the one the loop really sends)."""

from __future__ import annotations

import contextlib
import io
import json
import random
from decimal import Decimal
from typing import Any

import pytest
from benchmarks.bench_calibrate import Conversation, play
from opentelemetry import metrics, trace

from seamscope.adapters import DecisionLayer
from seamscope.cli import main
from seamscope.telemetry import configure

THRESHOLD = 1_000


def _corpus(n: int, seed: int) -> list[Conversation]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        remaining = rng.randint(0, 8)
        recall = rng.randint(1, remaining) if remaining and rng.random() < 0.5 else None
        tokens = round(rng.uniform(1_500, 40_000), 2)
        model = rng.choice(("gpt-4o", "claude-haiku-4-5"))
        out.append(Conversation(f"truth-{i}", f"tool_{i % 4}", model, tokens, remaining, recall))
    return out


def _layer(threshold: int, **more: Any) -> DecisionLayer:
    return DecisionLayer(default_model="gpt-4o", offload_threshold_tokens=threshold, **more)


@pytest.fixture(scope="module")
def whatif_rows(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """whatif's rows for the corpus recorded with a gate that never fires."""
    path = tmp_path_factory.mktemp("truth") / "never.jsonl"
    handle = configure(
        service_name="truth", trace_file=path, set_global=False, register_atexit=False,
        environ={},
    )  # fmt: skip
    try:
        layer = _layer(10**9, telemetry=handle)
        for conv in _corpus(40, seed=5):
            play(layer, conv)
        handle.flush()
    finally:
        handle.shutdown()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        argv = ["whatif", str(path), "--set", f"threshold_tokens={THRESHOLD}", "--format", "json"]
        assert 0 == main(argv)
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    return {r["conversation_id"]: r for r in rows if "conversation_id" in r}


def test_every_conversation_rerun_under_the_change_lies_in_its_range(
    whatif_rows: dict[str, dict[str, Any]],
) -> None:
    layer = _layer(
        THRESHOLD,
        tracer_provider=trace.NoOpTracerProvider(),
        meter_provider=metrics.NoOpMeterProvider(),
    )
    fired = recalled = 0
    for conv in _corpus(40, seed=5):
        truth = play(layer, conv)  # the same conversation, for real, under the change
        row = whatif_rows[conv.conversation_id]
        low, high = (Decimal(v) for v in row["counterfactual_range_usd"])
        expected = Decimal(row["counterfactual_usd"])
        assert low <= expected <= high, row
        assert low <= truth <= high, (conv, truth, row)
        fired += bool(row["newly_fired"])
        recalled += bool(row["newly_fired"]) and conv.recall_after is not None
    assert fired >= 20 and recalled >= 8  # the corpus exercises both ends of the range
