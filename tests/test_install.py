"""The install a user does: the built wheel, with every extra, in a fresh venv.

``bash .ci/run`` builds the sdist and the wheel (``python -m build``, the
wheel built from the sdist) and passes the wheel in ``SEAMSCOPE_WHEEL``; run
alone, this test builds them itself from a copy of the checkout. One fresh
venv holds every adapter extra at once (one install instead of five keeps CI
short; the extras do not conflict, and each adapter is imported from it).
From that venv, in an empty folder: the demo, the README's quickstart as
written, and ``seamscope explain`` giving the README's answer.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

from test_readme_snippets import QUICKSTART, README, _explain_block, snippet

ROOT = Path(__file__).resolve().parents[1]
ADAPTER_EXTRAS = (
    "langchain", "symfonic", "openai-agents", "pydantic-ai", "google-adk", "strands", "grpc"
)
ADAPTER_MODULES = (
    "seamscope.adapters.langchain",
    "seamscope.adapters.symfonic",
    "seamscope.adapters.openai_agents",
    "seamscope.adapters.pydantic_ai",
    "seamscope.adapters.google_adk",
    "seamscope.adapters.strands",
    "opentelemetry.exporter.otlp.proto.grpc.trace_exporter",
)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "SEAMSCOPE_"))}
    env.pop("PYTHONPATH", None)  # the venv's own seamscope, not a checkout's
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def _run(argv: list[str], cwd: Path, timeout: int = 900) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        argv, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout,
        stdin=subprocess.DEVNULL, check=False,
    )
    assert 0 == done.returncode, f"{argv}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done


def _wheel(tmp_path: Path) -> Path:
    given = os.environ.get("SEAMSCOPE_WHEEL")
    if given:
        return Path(given).resolve()
    checkout = tmp_path / "checkout"
    shutil.copytree(
        ROOT, checkout,
        ignore=shutil.ignore_patterns(
            ".git", ".venv*", "*.egg-info", "__pycache__", ".mypy_cache", ".ruff_cache",
            ".pytest_cache", ".hypothesis", "build", "dist", "tests", "benchmarks",
        ),
    )
    _run([sys.executable, "-m", "build", "--outdir", str(tmp_path / "dist"), "."], checkout)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    stem = f"{project['name']}-{project['version']}"
    assert (tmp_path / "dist" / f"{stem}.tar.gz").is_file()
    return tmp_path / "dist" / f"{stem}-py3-none-any.whl"


def test_the_built_wheel_runs_the_demo_and_the_quickstart(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path)
    names = zipfile.ZipFile(wheel).namelist()
    assert ("seamscope/py.typed" in names, [n for n in names if n.startswith("tests/")]) == (
        True, []
    )
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], tmp_path)
    python, seamscope = venv / "bin" / "python", venv / "bin" / "seamscope"
    _run([str(python), "-m", "pip", "install", "-q", f"{wheel}[{','.join(ADAPTER_EXTRAS)}]"],
         tmp_path)
    # as the README's install table says: ADK itself without its OpenTelemetry cap
    _run([str(python), "-m", "pip", "install", "-q", "--no-deps", "google-adk==2.13.0"], tmp_path)
    _run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", "strands-agents==1.62.0",
         "opentelemetry-instrumentation-threading==0.66b1"],
        tmp_path,
    )
    work = tmp_path / "work"
    work.mkdir()
    where = _run([str(python), "-c", "import seamscope; print(seamscope.__file__)"], work)
    assert where.stdout.startswith(str(venv))
    _run([str(python), "-c", "; ".join(f"import {m}" for m in ADAPTER_MODULES)], work)

    demo = _run([str(seamscope), "demo", "--quiet"], work)
    assert re.search(r"^7 turns · 7 traces · ", demo.stdout, re.M), demo.stdout

    (work / "quickstart.py").write_text(snippet(QUICKSTART.page, QUICKSTART.heading))
    _run([str(python), "quickstart.py"], work)
    argv, expected = _explain_block(README.read_text(encoding="utf-8"))
    answer = _run([str(seamscope), *argv], work)
    hide = re.compile(r"trace [0-9a-f]{8}…")
    assert [hide.sub("trace …", line) for line in expected] == [
        hide.sub("trace …", line) for line in answer.stdout.rstrip("\n").splitlines()
    ]
