"""The synthetic-conversation generator of benchmarks/bench_calibrate.py, small and
seeded, in a process of its own: known recall probabilities and horizons through the
real gate and ledger, recorded as OTLP-JSON, calibrated back, and three gates compared
on a fresh corpus.

It runs the script as a user does. An earlier in-process version once came back
without evidence after the demo had run in the same process; that did not happen
again in one process after the demo, after the CLI and telemetry suites, nor after
the adapters and core suites, on the code of that time or on today's (the one
global state the demo left behind then, structlog configured with its printing
defaults, has since been restored by the demo and does not touch spans). The last
test below holds a corpus recorded after the demo in the same process to its
evidence.

The interval coverage is statistical (90% intervals): on 9 pairs one seed can miss
the 85% target by chance (seed 2 covers 7 of 9). This test holds seed 1 to every
target; the benchmark measures them on 36 pairs and 10,000 conversations.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from benchmarks.bench_calibrate import calibrated, corpus, recorded, truths

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


def test_a_corpus_recorded_after_the_demo_in_the_same_process_keeps_its_evidence(
    tmp_path: Path,
) -> None:
    import contextlib
    import io

    from seamscope.cli import main

    with contextlib.redirect_stdout(io.StringIO()):
        assert 0 == main(["demo", "--output", str(tmp_path / "demo.jsonl")])
    path = tmp_path / "corpus.jsonl"
    convs = corpus(truths(3, 1), 90, 2, "cal")
    recorded(convs, path)
    rows, _ = calibrated(path)
    # every (tool, model) pair comes back, with every offload the gate fired
    assert 9 == len(rows)
    assert sum(r["offloads"] for r in rows) == path.read_text().count('"seamscope.offload.settle"')
