"""What whatif's text says, read cold: the priors it applied and skipped (and why),
counts that read as English."""

from __future__ import annotations

import contextlib
import io
import json
from decimal import Decimal
from pathlib import Path

import pytest
from tests.cli._support import export_line, span, write_lines

from seamscope.cli import main
from seamscope.cli._render import money
from seamscope.telemetry import conventions as c


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().out


@pytest.fixture(scope="module")
def priors(tmp_path_factory: pytest.TempPathFactory, demo_trace: Path) -> tuple[Path, Path]:
    """calibrate's file for the demo's trace: as written by default (min_offloads 20,
    more than the demo has) and with --min-offloads 1."""
    folder = tmp_path_factory.mktemp("priors")
    strict, loose = folder / "default.toml", folder / "loose.toml"
    with contextlib.redirect_stdout(io.StringIO()):
        assert 0 == main(["calibrate", str(demo_trace), "--output", str(strict)])
        assert 0 == main(
            ["calibrate", str(demo_trace), "--output", str(loose), "--min-offloads", "1"]
        )
    return strict, loose


def test_priors_that_apply_to_nothing_say_why(
    demo_trace: Path, priors: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    strict, _ = priors
    code, out = _run(capsys, "whatif", str(demo_trace), "--priors", str(strict))
    assert 0 == code
    lines = out.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("priors sha256:"))
    assert lines[head].endswith(": 2 entries; applied 0 pairs to 0 gate calls")
    assert lines[head + 1].startswith(
        "  skipped 2 pairs with fewer than 20 offloads (the file's min_offloads: the gate "
        "keeps its own priors for them; calibrate --min-offloads N sets it): "
    )


def test_priors_that_apply_say_to_how_many_gate_calls(
    demo_trace: Path, priors: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    _, loose = priors
    code, out = _run(capsys, "whatif", str(demo_trace), "--priors", str(loose))
    assert 0 == code
    [line] = [x for x in out.splitlines() if x.startswith("priors sha256:")]
    assert line.endswith(": 2 entries; applied 2 pairs to 2 gate calls")
    code, out = _run(capsys, "whatif", str(demo_trace), "--priors", str(loose), "--format", "json")
    use = json.loads(out.splitlines()[-1])["total"]["config"]["priors"]
    assert (2, 1, [], []) == (
        use["entries"],
        use["min_offloads"],
        use["skipped_fewer_offloads"],
        use["skipped_not_in_input"],
    )
    assert 2 == sum(e["gate_calls"] for e in use["applied"])


def test_one_of_each_reads_as_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    conv = {c.ATTR_GEN_AI_CONVERSATION_ID: "conv-1"}
    gate = span("a000000000000001", c.SPAN_OFFLOAD_GATE, start=100, end=101, attrs={
        **conv, c.ATTR_GEN_AI_TOOL_NAME: "get_logs", c.ATTR_GEN_AI_REQUEST_MODEL: "gpt-4o",
        c.ATTR_OFFLOAD_OUTPUT_TOKENS: 900.0, c.ATTR_OFFLOAD_FIRE: False,
        c.ATTR_OFFLOAD_HORIZON: 5, c.ATTR_OFFLOAD_RECALL_PROBABILITY: 0.5,
    })  # fmt: skip
    compaction = span("a000000000000002", c.SPAN_COMPACTION, start=200, end=201, attrs={
        **conv, c.ATTR_OFFLOAD_ID: "cmp-1", c.ATTR_GEN_AI_REQUEST_MODEL: "gpt-4o",
        c.ATTR_COMPACTION_REMOVED_TOKENS: 4_000.0, c.ATTR_COMPACTION_KEPT_TOKENS: 20.0,
    })  # fmt: skip
    path = write_lines(tmp_path / "t.jsonl", [export_line([gate, compaction])])
    code, out = _run(capsys, "whatif", str(path))
    assert 0 == code
    assert "total (1 conversation, 1 gate call, 1 compaction; under " in out


def test_the_counterfactual_total_leads_with_its_range_and_its_parts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A newly fired offload: the line gives the counterfactual's total (exact +
    expected) first, then its range, then the two parts; JSON has the same sums."""
    conv = {c.ATTR_GEN_AI_CONVERSATION_ID: "conv-1"}
    chat = {**conv, c.ATTR_GEN_AI_OPERATION_NAME: "chat", c.ATTR_GEN_AI_REQUEST_MODEL: "gpt-4o",
            c.ATTR_GEN_AI_USAGE_INPUT_TOKENS: 21_000, c.ATTR_GEN_AI_USAGE_OUTPUT_TOKENS: 40,
            c.ATTR_OFFLOAD_CARRIED: []}  # fmt: skip
    gate = span("a000000000000002", c.SPAN_OFFLOAD_GATE, start=200, end=201, attrs={
        **conv, c.ATTR_GEN_AI_TOOL_NAME: "get_logs", c.ATTR_GEN_AI_REQUEST_MODEL: "gpt-4o",
        c.ATTR_OFFLOAD_OUTPUT_TOKENS: 20_000.0, c.ATTR_OFFLOAD_FIRE: False,
        c.ATTR_OFFLOAD_HORIZON: 1, c.ATTR_OFFLOAD_RECALL_PROBABILITY: 0.5,
    })  # fmt: skip
    spans = [gate] + [
        span(f"a00000000000001{n}", "chat gpt-4o", start=300 + n, end=301 + n, attrs=chat)
        for n in range(3)
    ]
    path = write_lines(tmp_path / "t.jsonl", [export_line(spans)])
    code, out = _run(capsys, "whatif", str(path), "--set", "horizon=3")
    assert 0 == code
    [line] = [x for x in out.splitlines() if x.startswith("conv-1: ")]
    code, out = _run(capsys, "whatif", str(path), "--set", "horizon=3", "--format", "json")
    row = json.loads(out.splitlines()[0])
    total, low, high = (
        row["counterfactual_usd"], *row["counterfactual_range_usd"]
    )  # fmt: skip
    assert Decimal(total) == Decimal(row["counterfactual_exact_usd"]) + Decimal(
        row["counterfactual_expected_usd"]
    )
    assert Decimal(low) <= Decimal(total) <= Decimal(high)
    assert line.startswith(
        f"conv-1: realized +$0.0000 → counterfactual {money(Decimal(total), True)} "
        f"[{money(Decimal(low), True)}, {money(Decimal(high), True)}] (exact +$0.0000 + "
        f"expected {money(Decimal(row['counterfactual_expected_usd']), True)}) · difference "
        f"{money(Decimal(row['difference_usd']), True)} · fires 0 → 1 (+get_logs)"
    )
