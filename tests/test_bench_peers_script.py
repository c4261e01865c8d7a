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
LANGCHAIN_KEYS = ["lc-a", "lc-a-mw"] + [f"lc-{c}-{p}" for p in ("sdk", "cfg") for c in "bcde"]
SYMFONIC_KEYS = [
    "sym-off",
    "sym-own",
    *(f"sym-{kind}-{p}" for p in ("sdk", "cfg") for kind in ("seamscope", "both")),
    "sym-gate-off",
    "sym-gate-own",
    *(f"sym-gate-seamscope-{p}" for p in ("sdk", "cfg")),
]
OPENAI_AGENTS_KEYS = ["oa-a", "oa-b-own", "oa-c-sdk", "oa-d-sdk", "oa-e-sdk"]
PYDANTIC_AI_KEYS = ["pai-a", *(f"pai-{c}-sdk" for c in "bcde")]


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


def test_quick_run_prints_every_row_and_the_facts(tmp_path: Path) -> None:
    results = tmp_path / "peers.json"
    done = _run("--quick", "--json", str(results))
    assert done.returncode == 0, done.stderr[-4000:]
    out = done.stdout

    langchain = _section(out, "Part 1")
    keys = re.findall(r"\| `(lc-[a-z-]+)` \|", "\n".join(langchain))
    assert keys == LANGCHAIN_KEYS
    facts = _facts_rows(langchain)
    assert len(facts) == len(LANGCHAIN_KEYS)
    for providers in ("sdk", "cfg"):
        assert facts[("(b) seamscope middleware", providers)] == ["yes"] * 9
        assert facts[("(e) seamscope + OpenInference", providers)] == ["yes"] * 9
        assert facts[("(c) OpenInference", providers)] == ["–"] * 9
        assert facts[("(d) OpenLLMetry", providers)] == ["–"] * 9
    assert facts[("(a) no instrumentation", "–")] == ["–"] * 9
    assert facts[("(a') a pass-through middleware (reference)", "–")] == ["–"] * 9

    symfonic = _section(out, "Part 2")
    keys = re.findall(r"\| `(sym-[a-z-]+)` \|", "\n".join(symfonic))
    assert keys == SYMFONIC_KEYS
    facts = _facts_rows(symfonic)
    assert len(facts) == len(SYMFONIC_KEYS)
    # symfonic has no selection stages; its offload gate runs only in the (gate) scenario
    no_stages = ["–"] * 3
    for providers in ("sdk", "cfg"):
        assert facts[("seamscope instrument_symfonic", providers)] == [
            *no_stages,
            *["yes"] * 5,
            "–",
        ]
        gate = ("seamscope instrument_symfonic (gate)", providers)
        assert facts[gate] == [*no_stages, *["yes"] * 6]
    assert facts[("symfonic's own OTel layer", "own")] == ["–"] * 9

    core = _section(out, "Part 3")
    grid = [
        (int(cells[0]), int(cells[1]))
        for cells in map(_cells, core)
        if len(cells) > 2 and cells[0].isdigit()
    ]
    assert grid == [(p, t) for p in (1, 10, 100, 1000) for t in (10, 100, 500)]

    openai_agents = _section(out, "Part 4")
    keys = re.findall(r"\| `(oa-[a-z-]+)` \|", "\n".join(openai_agents))
    assert keys == OPENAI_AGENTS_KEYS
    facts = _facts_rows(openai_agents)
    assert facts == {
        ("(a) no instrumentation (SDK tracing off)", "–"): ["–"] * 9,
        ("(b) the SDK's own tracing (dropping processor)", "own"): ["–"] * 9,
        ("(c) OpenInference", "sdk"): ["–"] * 9,
        ("(d) seamscope SeamscopeRunner", "sdk"): ["yes"] * 9,
        ("(e) seamscope + OpenInference", "sdk"): ["yes"] * 9,
    }
    assert sum(line.startswith("- seamscope") for line in openai_agents) == 3

    pydantic_ai = _section(out, "Part 5")
    keys = re.findall(r"\| `(pai-[a-z-]+)` \|", "\n".join(pydantic_ai))
    assert keys == PYDANTIC_AI_KEYS
    facts = _facts_rows(pydantic_ai)
    assert facts == {
        ("(a) no instrumentation", "–"): ["–"] * 9,
        ("(b) pydantic-ai's Instrumentation", "sdk"): ["–"] * 9,
        ("(c) OpenInference (its span processor on (b))", "sdk"): ["–"] * 9,
        ("(d) seamscope SeamscopeCapability", "sdk"): ["yes"] * 9,
        ("(e) seamscope beside pydantic-ai's Instrumentation", "sdk"): ["yes"] * 9,
    }
    assert sum(line.startswith("- seamscope") for line in pydantic_ai) == 3

    targets = "\n".join(_section(out, "Targets"))
    assert targets.count("LangChain on `") == 2
    assert targets.count("symfonic on `") == 2
    assert targets.count("symfonic (gate) on `") == 2
    assert "core 1000 policies x 500 tools: decisions" in targets
    assert targets.count("core 1000 policies x 500 tools: telemetry") == 2
    for line in targets.splitlines():
        if line.startswith("- "):
            assert line.endswith(("met", "MISSED")), line

    data = json.loads(results.read_text())
    assert [row["key"] for row in data["langchain"]] == LANGCHAIN_KEYS
    assert [row["key"] for row in data["symfonic"]] == SYMFONIC_KEYS
    assert len(data["core"]) == 12
    assert [row["key"] for row in data["openai_agents"]] == OPENAI_AGENTS_KEYS
    assert [row["key"] for row in data["pydantic_ai"]] == PYDANTIC_AI_KEYS
    # each instrumented row recorded spans (the SDK's own ones for oa-b-own)
    for row in data["openai_agents"][1:] + data["pydantic_ai"][1:]:
        assert row["spans"] > 0, row["key"]
    assert len(data["ratios"]["openai_agents"]) == len(data["ratios"]["pydantic_ai"]) == 3
    assert len(data["targets"]) == 9


@pytest.mark.parametrize("key", ["lc-b-sdk", "oa-e-sdk", "pai-c-sdk"])
def test_run_only_is_silent(key: str) -> None:
    done = _run("--run-only", key, "--iterations", "1")
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout == ""


def test_run_only_rejects_an_unknown_configuration() -> None:
    done = _run("--run-only", "lc-z-sdk", "--iterations", "1")
    assert done.returncode == 2
    assert "unknown configuration 'lc-z-sdk'" in done.stderr
