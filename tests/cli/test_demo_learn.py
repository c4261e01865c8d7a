"""The demo ends with one whatif and one calibrate step on its own trace (then its
summary)."""

from __future__ import annotations

from pathlib import Path

import pytest

from seamscope.cli import main
from seamscope.cli._learn import WHATIF_SET, learn_steps, priors_path_for
from seamscope.decisions._priors import Priors

EXPECTED = [
    f"whatif: seamscope whatif trace.jsonl --set {WHATIF_SET}",
    "  demo-7: realized +$0.0228 → counterfactual +$0.0858 (exact) · difference +$0.0629 · "
    "fires 2 → 1 (−off-52e6b438)",
    "  demo-7-langchain: realized −$0.0264 → counterfactual −$0.0264 (exact) · difference "
    "+$0.0000 · fires 0 → 0",
    "  total (2 conversations, 5 gate calls, 1 compaction; under "
    f"{WHATIF_SET}): realized −$0.0036 → counterfactual +$0.0594 (exact)",
    "  difference: +$0.0629 · fires 2 → 1 (1 no longer, 0 newly)",
    "calibrate: seamscope calibrate trace.jsonl --min-offloads 1 --output PRIORS",
    "  export_report · claude-opus-4-6: 1 offload, 0 recalled · recall p 0.333 (90% "
    "0.025–0.776) · horizon 1 (p10 1, p90 1, mean 1) · used",
    "  get_logs · gpt-4o: 1 offload, 1 recalled · recall p 0.667 (90% 0.224–0.975) · horizon 7 "
    "(p10 7, p90 7, mean 7) · used",
    "  next: seamscope whatif trace.jsonl --priors PRIORS",
]


def test_the_steps_on_the_demo_trace(demo_trace: Path, tmp_path: Path) -> None:
    priors = tmp_path / "p.toml"
    lines = learn_steps(demo_trace, "trace.jsonl", priors)
    assert EXPECTED == [line.replace(str(priors), "PRIORS") for line in lines]
    assert {"get_logs", "export_report"} == {p.tool for p in Priors.load(priors)}


def test_the_demo_prints_them_before_its_summary_and_writes_the_priors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "trace.jsonl"
    assert 0 == main(["demo", "--output", str(out)])
    lines = capsys.readouterr().out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("whatif: "))
    printed = lines[start : start + len(EXPECTED)]
    assert lines[start + len(EXPECTED)].startswith("7 turns · ")  # then the summary
    priors = priors_path_for(out)
    shown = [
        line.replace(str(priors), "PRIORS").replace(str(out), "trace.jsonl") for line in printed
    ]
    assert EXPECTED == shown
    assert priors.exists()
