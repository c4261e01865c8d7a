"""The demo read cold: it says what it writes and what it stages, hides no internal
path in its trees, explains the gap between predicted and realized, and points at a
glossary that ships with the package."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from seamscope.cli import main
from seamscope.cli._glossary import GLOSSARY

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    folder = tmp_path_factory.mktemp("demo-cwd")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert 0 == main(["demo"])
    return out.getvalue(), folder


def test_the_demo_says_first_which_files_it_writes(demo: tuple[str, Path]) -> None:
    out, folder = demo
    files = ("seamscope-trace.jsonl", "seamscope-trace.log.jsonl", "seamscope-trace.priors.toml")
    assert (
        f"demo: writes {files[0]} (spans), {files[1]} (logs) and {files[2]} (priors from "
        "calibrate), replacing them if they exist"
    ) == out.splitlines()[0]
    assert sorted(files) == sorted(p.name for p in folder.iterdir())


def test_the_demo_says_what_it_stages_before_its_trees_and_hides_internal_paths(
    demo: tuple[str, Path],
) -> None:
    out, _ = demo
    lines = out.splitlines()
    staged = next(i for i, line in enumerate(lines) if line.startswith("staged on purpose"))
    first_tree = next(i for i, line in enumerate(lines) if line.startswith("turn 1 "))
    assert staged < first_tree
    assert "'vip_customer'" in lines[staged] and "ClassifierTimeout" in lines[staged]
    assert "stage raised demo.ClassifierTimeout" in out
    assert "seamscope.cli" not in out and "_scenario" not in out


def test_the_gap_between_predicted_and_realized_is_explained(demo: tuple[str, Path]) -> None:
    out, _ = demo
    lines = out.splitlines()
    total = next(i for i, line in enumerate(lines) if " turns · " in line and "predicted" in line)
    assert lines[total + 1].startswith(
        "  predicted: what each gate expected at its priors (H turns carried, recall chance p); "
        "realized: what the turns then did"
    )


def test_the_legend_points_at_a_glossary_the_package_ships(
    demo: tuple[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    out, _ = demo
    [legend] = [line for line in out.splitlines() if line.startswith("legend:")]
    assert legend.endswith("· words: seamscope explain --glossary")
    assert "docs/" not in legend
    assert 0 == main(["explain", "--glossary"])
    printed = capsys.readouterr().out
    assert GLOSSARY == printed
    for word in ("**abstain**", "**degraded**", "**contained**", "**predicted / realized**"):
        assert word in printed


def test_docs_glossary_is_the_packaged_text() -> None:
    """docs/glossary.md is written by ``python -m seamscope.cli._glossary``."""
    assert GLOSSARY == (ROOT / "docs" / "glossary.md").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["explain", "--glossary", "x.jsonl"], "error: --glossary takes no FILE"),
        (["explain"], "error: give FILE (an OTLP-JSON trace file, - for standard input)"),
    ],
)
def test_explain_without_a_file_or_with_both_is_a_usage_error(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert 2 == main(argv)
    assert message == capsys.readouterr().err.strip()
