"""benchmarks/bench_peers.py stays runnable and prints every row (its timings are
not asserted: timing is not a test). It runs in a subprocess because it
configures structlog and switches process-wide instrumentations on and off, as
the application it plays."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_peers.py"
NEEDED = (
    "openinference.instrumentation.langchain",
    "opentelemetry.instrumentation.langchain",
    "langchain.agents",
    "symfonic.agent",
    "agents",
    "openinference.instrumentation.openai_agents",
    "opentelemetry.instrumentation.openai_agents",
    "pydantic_ai",
    "openinference.instrumentation.pydantic_ai",
)


def _missing() -> list[str]:
    missing = []
    for name in NEEDED:
        try:
            found = importlib.util.find_spec(name) is not None
        except ImportError:
            found = False
        if not found:
            missing.append(name)
    return missing


pytestmark = pytest.mark.skipif(
    bool(_missing()),
    reason=(
        f"the bench extra is not installed (missing {', '.join(_missing())}): "
        "pip install -e '.[dev,bench]'"
    ),
)

FACTS = (
    "offered",
    "selected",
    "dropped with reason",
    "model winner",
    "winner source with evaluations",
    "redirect",
    "guard",
    "palette verdict",
    "offload priced terms",
)
LANGCHAIN_KEYS = ["lc-a", "lc-a-mw", "lc-b", "lc-b0", "lc-c", "lc-d", "lc-e"]
SYMFONIC_KEYS = [
    "sym-off",
    "sym-own",
    "sym-seamscope",
    "sym-both",
    "sym-gate-off",
    "sym-gate-own",
    "sym-gate-seamscope",
]
OPENAI_AGENTS_KEYS = [
    "oa-a",
    "oa-a-narrow",
    "oa-a-pass",
    "oa-b-own",
    "oa-c",
    "oa-d",
    "oa-d0",
    "oa-e",
    "oa-f",
]
PYDANTIC_AI_KEYS = ["pai-a", "pai-a-cap", "pai-b", "pai-c", "pai-d", "pai-d0", "pai-e"]
NONE = ["–"] * 9
ALL = ["yes"] * 9


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def _section(out: str, title: str) -> list[str]:
    """The lines of one ``## `` section."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"## {title}"))
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    return lines[start:end]


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _facts_rows(section: list[str]) -> dict[tuple[str, str], list[str]]:
    """(configuration, providers) -> the nine fact cells, from the section's facts table."""
    header = "| configuration | providers | " + " | ".join(FACTS) + " |"
    assert header in section
    start = section.index(header) + 2
    rows = {}
    for line in section[start:]:
        if not line.startswith("|"):
            break
        cells = _cells(line)
        rows[(cells[0], cells[1])] = cells[2:]
    return rows


def _keys(section: list[str], prefix: str) -> list[str]:
    return re.findall(rf"\| `({prefix}-[a-z0-9-]+)` \|", "\n".join(section))


def test_quick_run_prints_every_row_and_the_facts(tmp_path: Path) -> None:
    results = tmp_path / "peers.json"
    done = _run("--quick", "--json", str(results))
    assert done.returncode == 0, done.stderr[-4000:]
    out = done.stdout

    langchain = _section(out, "Part 1")
    assert _keys(langchain, "lc") == LANGCHAIN_KEYS
    assert _facts_rows(langchain) == {
        ("(a) no instrumentation", "–"): NONE,
        ("(a') a pass-through middleware (reference)", "–"): NONE,
        ("(b) seamscope middleware", "otlp"): ALL,
        ("(b0) seamscope's decisions and adapter alone (no telemetry: reference)", "–"): NONE,
        ("(c) OpenInference", "otlp"): NONE,
        ("(d) OpenLLMetry", "otlp"): NONE,
        ("(e) seamscope + OpenInference", "otlp"): ALL,
    }

    symfonic = _section(out, "Part 2")
    assert _keys(symfonic, "sym") == SYMFONIC_KEYS
    # symfonic has no selection stages; its offload gate runs only in the (gate) scenario
    no_stages = ["n/a"] * 3
    assert _facts_rows(symfonic) == {
        ("off", "–"): NONE,
        ("symfonic's own OTel layer", "own"): NONE,
        ("seamscope instrument_symfonic", "otlp"): [*no_stages, *["yes"] * 5, "n/a"],
        ("seamscope + symfonic's own layer", "otlp"): [*no_stages, *["yes"] * 5, "n/a"],
        ("off (gate)", "–"): NONE,
        ("symfonic's own OTel layer (gate)", "own"): NONE,
        ("seamscope instrument_symfonic (gate)", "otlp"): [*no_stages, *["yes"] * 6],
    }

    core = _section(out, "Part 3")
    grid = [
        (int(cells[0]), int(cells[1]))
        for cells in map(_cells, core)
        if len(cells) > 2 and cells[0].isdigit()
    ]
    assert grid == [(p, t) for p in (1, 10, 100, 1000) for t in (10, 100, 500)]

    openai_agents = _section(out, "Part 4")
    assert _keys(openai_agents, "oa") == OPENAI_AGENTS_KEYS
    assert _facts_rows(openai_agents) == {
        ("(a) no instrumentation (SDK tracing off)", "–"): NONE,
        ("(a') no instrumentation, only the tools seamscope selects (reference)", "–"): NONE,
        ("(a'') a pass-through adapter of seamscope's shape (reference)", "–"): NONE,
        ("(b) the SDK's own tracing (its exporter, to the sink)", "own"): NONE,
        ("(c) OpenInference", "otlp"): NONE,
        ("(d) seamscope SeamscopeRunner", "otlp"): ALL,
        ("(d0) seamscope's decisions and adapter alone (no telemetry: reference)", "–"): NONE,
        ("(e) seamscope + OpenInference", "otlp"): ALL,
        ("(f) OpenLLMetry", "otlp"): NONE,
    }

    pydantic_ai = _section(out, "Part 5")
    assert _keys(pydantic_ai, "pai") == PYDANTIC_AI_KEYS
    assert _facts_rows(pydantic_ai) == {
        ("(a) no instrumentation", "–"): NONE,
        ("(a') a pass-through capability with seamscope's hooks (reference)", "–"): NONE,
        ("(b) pydantic-ai's Instrumentation", "otlp"): NONE,
        ("(c) OpenInference (its span processor on (b))", "otlp"): NONE,
        ("(d) seamscope SeamscopeCapability", "otlp"): ALL,
        ("(d0) seamscope's decisions and adapter alone (no telemetry: reference)", "–"): NONE,
        ("(e) seamscope beside pydantic-ai's Instrumentation", "otlp"): ALL,
    }

    targets = [line for line in _section(out, "Targets") if line.startswith("- ")]
    assert len(targets) == 13
    judged = [line for line in targets if "target <=" in line]
    assert len(judged) == 7
    for line in judged:
        assert line.endswith(
            ("met", "MISSED", "not judged (the denominator's overhead is not > 0)")
        )

    data = json.loads(results.read_text())
    assert [row["key"] for row in data["langchain"]] == LANGCHAIN_KEYS
    assert [row["key"] for row in data["symfonic"]] == SYMFONIC_KEYS
    assert len(data["core"]) == 12
    assert [row["key"] for row in data["openai_agents"]] == OPENAI_AGENTS_KEYS
    assert [row["key"] for row in data["pydantic_ai"]] == PYDANTIC_AI_KEYS
    # every instrumented row recorded spans (the SDK's own ones for oa-b-own), and what
    # exported them reached the loopback sink
    for part in ("langchain", "symfonic", "openai_agents", "pydantic_ai"):
        for row in data[part]:
            assert (row["spans"] > 0) == bool(row["kind"]), row["key"]
    assert data["sink_bytes"] > 0


@pytest.mark.parametrize("keys", ["lc-b", "oa-e,oa-f", "pai-c"])
def test_run_only_is_silent(keys: str) -> None:
    done = _run("--run-only", keys, "--iterations", "1")
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout == ""


def test_run_only_rejects_an_unknown_configuration() -> None:
    done = _run("--run-only", "lc-z", "--iterations", "1")
    assert done.returncode == 2
    assert "unknown configuration 'lc-z'" in done.stderr
