"""The explain benchmark stays runnable (its numbers are not asserted: timing is
not a test)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_explain.py"


def test_prints_the_ratios_and_the_peak_memory_of_every_run(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--size-mb", "1", "--big-trace-mb", "0.3", "--repeats", "1",
         "--demo-seeds", "2", "--demo-turns", "8", "--keep", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = [row for row in done.stdout.splitlines() if row.startswith("| ") and "---" not in row]
    assert [row.split(" | ")[0] for row in rows] == [
        "| run",
        "| bare json.loads pass, demo output",
        "| explain (text), demo output",
        "| explain --format json, demo output",
        "| explain --trace-id (one trace), demo output",
        "| bare json.loads pass",
        "| explain (text)",
        "| explain --format json",
        "| explain --trace-id (one trace)",
        "| bare json.loads pass, big-trace file",
        "| explain (text), big-trace file",
    ]
    for row in (rows[2], rows[3], rows[6], rows[7]):
        assert "<= 3: " in row
    assert "<= 1: " in rows[4] and "<= 1: " in rows[8]
    assert "demo output: " in done.stdout
    assert (tmp_path / "demo-2x8.jsonl").stat().st_size > 10_000
    assert "big-trace file: " in done.stdout
    assert (tmp_path / "explain-bench.jsonl").stat().st_size > 1_000_000
