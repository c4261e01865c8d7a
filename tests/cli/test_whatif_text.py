"""What whatif's text says, read cold: the priors it applied and skipped (and why),
counts that read as English."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest
from tests.cli._support import export_line, span, write_lines

from seamscope.cli import main
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
