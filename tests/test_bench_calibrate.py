"""The synthetic-conversation generator of benchmarks/bench_calibrate.py, small and
seeded: known recall probabilities and horizons through the real gate and ledger,
recorded as OTLP-JSON, calibrated back, and three gates compared on a fresh corpus.

The interval coverage is statistical (90% intervals): on 9 pairs one seed can miss
the 85% target by chance (seed 2 covers 7 of 9). This test holds seed 1 to every
target; the benchmark measures them on 36 pairs and 10,000 conversations.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

from benchmarks.bench_calibrate import MIN_EVIDENCE, evaluate, truths


def test_a_seeded_corpus_calibrates_back_to_its_ground_truth(tmp_path: Path) -> None:
    result = evaluate(3, 900, 600, 1, tmp_path)
    assert 9 == result["pairs_judged"]  # 3 tools x 3 models, each with >= MIN_EVIDENCE offloads
    assert result["coverage"] >= 0.85
    assert 1.0 == result["horizon_within_1"]
    net = result["net"]
    assert net["calibrated"] >= net["default"]
    assert net["calibrated"] >= Decimal("0.95") * net["oracle"]
    assert MIN_EVIDENCE == 50


def test_the_ground_truth_spans_the_stated_ranges() -> None:
    found = truths(200, 5)
    assert 0.02 <= min(t.recall_probability for t in found)
    assert max(t.recall_probability for t in found) <= 0.6
    assert (2, 30) == (min(t.horizon for t in found), max(t.horizon for t in found))
