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
         "--keep", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = [row for row in done.stdout.splitlines() if row.startswith("| ") and "---" not in row]
    assert [row.split(" | ")[0] for row in rows] == [
        "| run",
        "| bare json.loads pass",
        "| explain (text)",
        "| explain --format json",
        "| explain --trace-id (one trace)",
        "| bare json.loads pass, big-trace file",
        "| explain (text), big-trace file",
    ]
    assert "<= 5: " in rows[2] and "<= 3: " in rows[3] and "<= 2: " in rows[4]
    assert "big-trace file: " in done.stdout
    assert (tmp_path / "explain-bench.jsonl").stat().st_size > 1_000_000
