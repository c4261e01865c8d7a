"""The frameworks' own released tests as the judge: adding seamscope changes nothing.

Runs ``frameworks/run_suites.py`` (LangChain's agent unit tests without seamscope, with
it, and with its built-in middlewares watched; the Agents SDK's runner tests and Strands
Agents' agent-loop tests without and with it) in the frameworks' environment,
``.venv-frameworks`` (``bash .ci/run`` makes it and fetches the suites;
``SEAMSCOPE_FRAMEWORKS_PYTHON`` names another interpreter). Every test that passes without
seamscope must pass with it, but the ones ``frameworks/expected_differences.toml`` lists,
each with why.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ENV_VAR = "SEAMSCOPE_FRAMEWORKS_PYTHON"
HINT = (
    "bash .ci/run makes it; by hand: python3 -m venv .venv-frameworks && "
    ".venv-frameworks/bin/pip install -e '.[langchain,openai-agents,strands]' pytest "
    "-r frameworks/requirements.txt && .venv-frameworks/bin/pip install --no-deps "
    "strands-agents==1.62.0 opentelemetry-instrumentation-threading==0.66b1"
)
TIMEOUT = 1500.0


def _python() -> str:
    chosen = os.environ.get(ENV_VAR) or str(ROOT / ".venv-frameworks" / "bin" / "python")
    if os.access(chosen, os.X_OK):
        return chosen
    message = f"the frameworks' environment is missing ({chosen}): {HINT}"
    if os.environ.get("CI"):
        pytest.fail(f"{message}; CI is set, so the frameworks' suites must run", pytrace=False)
    pytest.skip(message)


def test_every_test_that_passes_without_seamscope_passes_with_it(tmp_path: Path) -> None:
    python = _python()
    cache = Path(os.environ.get("SEAMSCOPE_CI_CACHE") or Path.home() / ".cache" / "seamscope-ci")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_"))}
    done = subprocess.run(
        [
            python,
            str(ROOT / "frameworks" / "run_suites.py"),
            "--jobs",
            "2",
            "--keep",
            str(tmp_path),
            "--baseline-cache",
            str(cache / "framework-baselines"),
        ],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    report = done.stdout[-8000:] + done.stderr[-4000:]
    sys.stdout.write(report)  # shown with -rA or on failure
    assert 0 == done.returncode, report
    assert "OK: every test that passes without seamscope passes with it" in done.stdout
    for suite in ("langchain", "openai-agents", "strands"):
        # each suite really ran, with seamscope added
        assert f"-- {suite} on:" in done.stdout, report
    assert "-- langchain watched:" in done.stdout, report
