"""The README states the public contract: it must not drift from the code."""

from __future__ import annotations

import argparse
import os
import re
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from seamscope.cli import _parser
from seamscope.telemetry import conventions as c

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


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


@pytest.mark.parametrize("command", ["demo", "explain", "whatif", "calibrate"])
def test_every_cli_option_is_in_the_readme_synopsis(command: str) -> None:
    synopsis = re.search(rf"seamscope {command} [^`]*?(?=\nseamscope |\n```)", README)
    assert synopsis is not None
    assert set() == {o for o in _options(command) if o not in synopsis.group(0)}


def test_the_readme_test_command_is_the_one_ci_runs() -> None:
    ci = (Path(__file__).resolve().parents[1] / ".ci" / "run").read_text(encoding="utf-8")
    assert "bash .ci/run" in README.split("---")[0]
    assert ".venv/bin/python -m pytest -q" in README.split("---")[0]
    assert ".venv/bin/python -m pytest -q || rc=$?" in ci


def _pyproject() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_the_readme_states_the_tested_python_and_ci_runs_it() -> None:
    """The Install section names the Python versions the classifiers list; the
    interpreter running the tests is one of them (so CI on another version
    fails until it is listed)."""
    project = _pyproject()["project"]
    tested = sorted(
        classifier.rsplit(" :: ", 1)[1]
        for classifier in project["classifiers"]
        if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", classifier)
    )
    assert ">=" + tested[0] == project["requires-python"]
    install = README.split("\n## Install\n", 1)[1].split("\n## ", 1)[0]
    assert f"Python {', '.join(tested)} (tested in CI)" in install
    assert "{}.{}".format(*sys.version_info[:2]) in tested


def test_every_extra_has_both_install_lines() -> None:
    install = README.split("\n## Install\n", 1)[1].split("\n## ", 1)[0]
    extras = set(_pyproject()["project"]["optional-dependencies"])
    for extra in sorted(extras - {"test", "dev", "bench", "dashboards"}):
        assert f"`pip install '.[{extra}]'`" in install, extra
        assert f"`pip install 'seamscope[{extra}]'`" in install, extra
    assert "`pip install .`" in install and "`pip install seamscope`" in install
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    [ci_extras] = re.findall(r"pip install -q -e '(\.\[[a-z,-]+\])'", ci)
    assert f"`pip install -e '{ci_extras}'`" in install


def test_the_readme_first_command_installs_and_runs_the_demo(tmp_path: Path) -> None:
    """The first screen's first command, as written, in a copy of the checkout:
    a fresh venv, ``pip install '.[langchain]'`` and ``seamscope demo`` (no server):
    the reference loop's turns and the LangChain turns."""
    import shutil
    import subprocess

    line = next(
        ln for ln in README.splitlines() if ln.startswith("python3 -m venv .venv") and "demo" in ln
    )
    checkout = tmp_path / "checkout"
    shutil.copytree(
        ROOT,
        checkout,
        ignore=shutil.ignore_patterns(
            ".git", ".venv*", "*.egg-info", "__pycache__", ".mypy_cache", ".ruff_cache",
            ".pytest_cache", ".hypothesis", "build", "dist",
        ),
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "SEAMSCOPE_"))}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    done = subprocess.run(
        ["bash", "-c", line],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        stdin=subprocess.DEVNULL,
    )
    shown = (
        "turn 1 · conversation demo-7 · agent analyst" in done.stdout,
        "turn 1 · conversation demo-7-langchain · agent triage" in done.stdout,
        "LangChain turns not run" in done.stdout,
    )
    assert (0, (True, True, False)) == (done.returncode, shown), done.stderr[-3000:]
