"""explain shows a reused selection as such; a trace without it reads as before."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from seamscope.adapters import DecisionLayer
from seamscope.decisions import Message, RolePaletteStage
from seamscope.telemetry import configure

from .conftest import Explain

TOOLS = ["run_block", "fetch_data", "search", "shell"]


def _trace(path: Path, *, reuse: bool) -> None:
    handle = configure(trace_file=path, set_global=False, register_atexit=False, environ={})
    try:
        layer = DecisionLayer(
            default_model="claude-opus-4-6",
            stages=[RolePaletteStage(resolver=lambda role: ("run_block", "fetch_data"))],
            telemetry=handle,
            reuse_selection=reuse,
        )
        messages: list[Any] = [Message("user", "sales by brand")]
        with layer.turn("conv-1", messages, role="analyst") as turn:
            for _ in range(2):
                with turn.iteration() as it:
                    it.select_tools(list(TOOLS))
    finally:
        handle.shutdown()


def test_explain_marks_a_reused_selection(tmp_path: Path, explain: Explain) -> None:
    path = tmp_path / "trace.jsonl"
    _trace(path, reuse=True)
    code, out, _ = explain(str(path))
    assert 0 == code
    assert 1 == out.count("4 offered → 2 selected (reused)")
    assert 2 == out.count("4 offered → 2 selected")
    code, out, _ = explain(str(path), "--format", "json")
    first, second = json.loads(out)["turns"][0]["iterations"]
    assert "reused" not in first["selection"]
    assert 1 == len(first["selection"]["stages"])
    assert (True, []) == (second["selection"]["reused"], second["selection"]["stages"])
    assert first["selection"]["selected"] == second["selection"]["selected"]


def test_explain_of_a_trace_without_reuse_is_unchanged(tmp_path: Path, explain: Explain) -> None:
    path = tmp_path / "trace.jsonl"
    _trace(path, reuse=False)
    code, out, _ = explain(str(path))
    assert 0 == code
    assert "(reused)" not in out
    assert 2 == out.count("4 offered → 2 selected")
    code, out, _ = explain(str(path), "--format", "json")
    for iteration in json.loads(out)["turns"][0]["iterations"]:
        assert "reused" not in iteration["selection"]
        assert 1 == len(iteration["selection"]["stages"])
