"""The synthetic-conversation generator of benchmarks/bench_calibrate.py, small and
seeded, in a process of its own: known recall probabilities and horizons through the
real gate and ledger, recorded as OTLP-JSON, calibrated back, and three gates compared
on a fresh corpus.

The interval coverage is statistical (90% intervals): on 9 pairs one seed can miss
the 85% target by chance (seed 2 covers 7 of 9). This test holds seed 1 to every
target; the benchmark measures them on 36 pairs and 10,000 conversations.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from benchmarks.bench_calibrate import truths

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_calibrate.py"


def test_a_seeded_corpus_calibrates_back_to_its_ground_truth(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--tools", "3", "--conversations", "900", "--fresh",
         "600", "--gate-calls", "0", "--seed", "1", "--keep", str(tmp_path)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert 0 == done.returncode, done.stderr
    rows = [r for r in done.stdout.splitlines() if r.startswith("| ") and "---" not in r][1:]
    assert 5 == len(rows)
    assert "of 9 |" in rows[0]  # 3 tools x 3 models, each with >= 50 offloads
    assert [] == [r for r in rows if r.endswith("| no |")]
    assert 4 == sum(r.endswith("| yes |") for r in rows)


def test_the_ground_truth_spans_the_stated_ranges() -> None:
    found = truths(200, 5)
    assert 0.02 <= min(t.recall_probability for t in found)
    assert max(t.recall_probability for t in found) <= 0.6
    assert (2, 30) == (min(t.horizon for t in found), max(t.horizon for t in found))
