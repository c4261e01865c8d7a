"""A demo file shared by the explain tests, and explain run through main()."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable
from pathlib import Path

import pytest

from seamscope.cli import main

Explain = Callable[..., tuple[int, str, str]]


@pytest.fixture(scope="session")
def demo_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The OTLP-JSON file of ``seamscope demo`` (4 reference turns and 3 LangChain turns,
    seed 7), written once."""
    out = tmp_path_factory.mktemp("demo") / "trace.jsonl"
    with contextlib.redirect_stdout(io.StringIO()):
        assert 0 == main(["demo", "--quiet", "--output", str(out)])
    return out


@pytest.fixture
def explain(capsys: pytest.CaptureFixture[str]) -> Explain:
    """``explain(*argv)`` runs ``seamscope explain``: (exit code, stdout, stderr)."""

    def run(*argv: str) -> tuple[int, str, str]:
        code = main(["explain", *argv])
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return run
