"""``seamscope whatif`` reads prompt-cache writes under today's name and under the
name before it (semantic-conventions-genai #440), so a trace written by an
earlier seamscope re-settles as one written now."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from seamscope.cli import main
from seamscope.telemetry import conventions as c

NEW = c.ATTR_GEN_AI_USAGE_CACHE_WRITE_INPUT_TOKENS
OLD = c.ATTR_GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS


def _without(source: Path, target: Path, key: str) -> int:
    """``source`` with every span attribute ``key`` left out; how many were."""
    dropped = 0
    lines = []
    for line in source.read_text(encoding="utf-8").splitlines():
        request = json.loads(line)
        for resource in request.get("resourceSpans", []):
            for scope in resource.get("scopeSpans", []):
                for span in scope.get("spans", []):
                    kept = [a for a in span.get("attributes", []) if a["key"] != key]
                    dropped += len(span.get("attributes", [])) - len(kept)
                    span["attributes"] = kept
        lines.append(json.dumps(request))
    target.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return dropped


def _whatif(capsys: pytest.CaptureFixture[str], path: Path) -> list[Any]:
    assert 0 == main(["whatif", str(path), "--set", "recall_probability=0.9", "--format", "json"])
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_an_older_trace_re_settles_as_a_trace_of_today(
    demo_trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    today = _whatif(capsys, demo_trace)
    older, newer = tmp_path / "older.jsonl", tmp_path / "newer.jsonl"
    # the demo writes cache writes under both names (the old one until 0.2.0)
    written = _without(demo_trace, older, NEW)
    assert 0 < written == _without(demo_trace, newer, OLD)
    assert today == _whatif(capsys, older) == _whatif(capsys, newer)
    # and the cache writes count: without either name the realized side differs
    neither = tmp_path / "neither.jsonl"
    _without(older, neither, OLD)
    assert today != _whatif(capsys, neither)
