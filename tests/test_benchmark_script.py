"""The benchmark script stays runnable (its numbers are not asserted: timing is
not a test). It runs in a subprocess because it configures structlog, as the
application it plays."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_decision_layer.py"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_prints_every_configuration_and_the_ratios() -> None:
    done = _run("--iterations", "20", "--repeats", "2", "--warmup", "5")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    # the floor's plan is one observer iteration, captured as a single span tree
    assert "= 13 spans" in out
    rows = [line for line in out.splitlines() if line.startswith("| (")]
    assert [row.split(")")[0] for row in rows] == ["| (a", "| (b", "| (c", "| (c'", "| (d", "| (d0"]
    assert "× (a) | <= 1.5 |" in rows[1]
    assert "× (d) | <= 1.3 |" in rows[2]
    assert rows[1].rstrip(" |").endswith(("pass", "FAIL"))
    assert "(d)/(d0) = " in out
    assert "(c)/((a)+(d0)) = " in out


def test_run_only_runs_one_configuration_untimed() -> None:
    done = _run("--run-only", "c", "--iterations", "10")
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""


def test_rejects_an_unknown_configuration() -> None:
    done = _run("--run-only", "e")
    assert done.returncode == 2
    assert "invalid choice: 'e'" in done.stderr
