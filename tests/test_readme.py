"""The README states the public contract: it must not drift from the code."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from seamscope.cli import _parser
from seamscope.telemetry import conventions as c

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")


def test_every_metric_and_its_labels_are_in_the_readme() -> None:
    missing = [spec.prometheus for spec in c.METRICS if f"`{spec.prometheus}" not in README]
    labels = {a.replace(".", "_") for spec in c.METRICS for a in spec.attributes}
    missing += sorted(label for label in labels if f"`{label}`" not in README)
    assert [] == missing


def test_every_span_name_is_in_the_readme() -> None:
    assert [] == [name for name in c.SPANS if name not in README]


def _options(command: str) -> set[str]:
    parser = _parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {
        option
        for action in sub.choices[command]._actions
        for option in action.option_strings
        if option.startswith("--") and option != "--help"
    }


@pytest.mark.parametrize("command", ["demo", "explain"])
def test_every_cli_option_is_in_the_readme_synopsis(command: str) -> None:
    synopsis = re.search(rf"seamscope {command} [^`]*?(?=\nseamscope |\n```)", README)
    assert synopsis is not None
    assert set() == {o for o in _options(command) if o not in synopsis.group(0)}


def test_the_readme_test_command_is_the_one_ci_runs() -> None:
    ci = (Path(__file__).resolve().parents[1] / ".ci" / "run").read_text(encoding="utf-8")
    assert "bash .ci/run" in README.split("---")[0]
    assert ".venv/bin/python -m pytest -q" in README.split("---")[0]
    assert ".venv/bin/python -m pytest -q || rc=$?" in ci
