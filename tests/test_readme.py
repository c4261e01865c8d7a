"""The README and the pages under docs/ state the public contract: they must
not drift from the code, and every page is one click from the README."""

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
DOCS = ROOT / "docs"
TELEMETRY = (DOCS / "telemetry.md").read_text(encoding="utf-8")
CLI = (DOCS / "cli.md").read_text(encoding="utf-8")
README_MAX_LINES = 250


def test_every_metric_and_its_labels_are_in_the_telemetry_page() -> None:
    missing = [spec.prometheus for spec in c.METRICS if f"`{spec.prometheus}" not in TELEMETRY]
    labels = {a.replace(".", "_") for spec in c.METRICS for a in spec.attributes}
    missing += sorted(label for label in labels if f"`{label}`" not in TELEMETRY)
    assert [] == missing


def test_every_span_name_is_in_the_telemetry_page() -> None:
    assert [] == [name for name in c.SPANS if name not in TELEMETRY]


def test_the_readme_is_short_and_every_docs_page_is_one_click_from_it() -> None:
    linked = set(re.findall(r"\]\((docs/[^)#]+\.md)(?:#[^)]*)?\)", README))
    pages = {p.relative_to(ROOT).as_posix() for p in DOCS.rglob("*.md")}
    assert (True, set()) == (len(README.splitlines()) <= README_MAX_LINES, pages - linked)


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to dashes."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_relative_link_of_the_readme_and_the_docs_resolves() -> None:
    """A link to a file names one that exists; a link to a heading names one that is there."""
    broken = []
    for page in [ROOT / "README.md", *DOCS.rglob("*.md")]:
        text = re.sub(r"```.*?```|`[^`\n]*`", "", page.read_text(encoding="utf-8"), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            where = (page.parent / path).resolve() if path else page
            if not where.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
            elif anchor and where.suffix == ".md":
                headings = re.findall(r"^#+ (.*)$", where.read_text(encoding="utf-8"), re.M)
                if anchor not in {_anchor(h) for h in headings}:
                    broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert [] == broken


HISTORY = re.compile(
    r"\b(now names|as before|same as before|this round|an earlier commit|no longer|used to)\b",
    re.I,
)


def test_no_prose_narrates_the_projects_past() -> None:
    """The pages describe what is, not how it came to be."""
    found = [
        f"{page.relative_to(ROOT)}: {m.group(0)}"
        for page in [ROOT / "README.md", *DOCS.rglob("*.md")]
        for m in HISTORY.finditer(page.read_text(encoding="utf-8"))
    ]
    assert [] == found


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
def test_every_cli_option_is_in_the_cli_page_synopsis(command: str) -> None:
    synopsis = re.search(rf"seamscope {command} [^`]*?(?=\nseamscope |\n```)", CLI)
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
    """From a checkout and from the wheel ``python -m build`` writes; the
    package index is never named (the package is not published)."""
    install = README.split("\n## Install\n", 1)[1].split("\n## ", 1)[0]
    project = _pyproject()["project"]
    wheel = f"dist/{project['name']}-{project['version']}-py3-none-any.whl"
    extras = set(project["optional-dependencies"])
    for extra in sorted(extras - {"test", "dev", "bench", "dashboards"}):
        assert f"`pip install '.[{extra}]'`" in install, extra
        assert f"`pip install '{wheel}[{extra}]'`" in install, extra
    assert "`pip install .`" in install and f"`pip install {wheel}`" in install
    pages = [README, *(p.read_text(encoding="utf-8") for p in DOCS.rglob("*.md"))]
    assert [] == [m for text in pages for m in re.findall(r"pip install '?seamscope\b", text)]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    # the tests' environment (.venv; .venv-frameworks is the frameworks' suites')
    [ci_extras] = re.findall(r"\.venv/bin/pip install -q -e '(\.\[[a-z,-]+\])'", ci)
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
