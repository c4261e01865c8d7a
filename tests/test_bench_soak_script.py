"""benchmarks/bench_soak.py stays runnable: its cheap mode prints the RSS curve and the
verdict (the numbers are not asserted: timing and memory are not tests here). A
subprocess, since it configures structlog as the application it plays."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_soak.py"


def test_quick_run_prints_the_curve_and_the_verdict() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    rows = [line for line in done.stdout.splitlines() if re.match(r"\| \d+ \|", line)]
    assert [int(row.split("|")[1]) for row in rows] == [500, 1000, 1500]
    # the ledger follows every conversation (300, below its bound), the sink received data
    assert all(row.split("|")[6].strip() == "300" for row in rows)
    assert float(rows[-1].split("|")[9]) > 0
    verdict = next(line for line in done.stdout.splitlines() if line.startswith("- RSS"))
    assert verdict.endswith(("met", "MISSED"))
    assert "- 1500 of 1500 iterations" in done.stdout
