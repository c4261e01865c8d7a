"""explain --format json shows what each seam passed over: counts and names."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from seamscope.adapters import DecisionLayer
from seamscope.decisions import Message, ModelConfig, ToolCall, ToolCallPolicy
from seamscope.telemetry import configure

from .conftest import Explain


def _never(ctx: Any) -> bool:
    return False


def _always(ctx: Any) -> bool:
    return True


def test_explain_json_carries_the_passed_over_policies(tmp_path: Path, explain: Explain) -> None:
    path = tmp_path / "trace.jsonl"
    handle = configure(trace_file=path, set_global=False, register_atexit=False, environ={})
    try:
        layer = DecisionLayer(
            default_model="claude-opus-4-6",
            policies=[
                ToolCallPolicy("miss", match=_never, model=ModelConfig("claude-sonnet-4-5")),
                ToolCallPolicy("redirect_only", match=_always, redirect_to="fetch_data"),
                ToolCallPolicy("cheap", match=_always, model=ModelConfig("claude-haiku-4-5")),
            ],
            telemetry=handle,
        )
        messages = [Message("user", "sales by brand")]
        with layer.turn("conv-1", messages) as turn, turn.iteration() as it:
            it.select_tools(["run_block", "fetch_data"])
            it.pre_model()
            it.post_model(Message("assistant", "", (ToolCall("call_1", "run_block", {}),)))
    finally:
        handle.shutdown()
    code, out, _ = explain(str(path), "--format", "json")
    assert 0 == code
    (iteration,) = json.loads(out)["turns"][0]["iterations"]
    # PRE: miss did not match, redirect_only has no model, cheap won
    # POST: miss and cheap have no redirect, redirect_only won
    assert (
        {"not_matched": 1, "skipped": 1, "names": ["miss", "redirect_only"]},
        [{"policy": "cheap", "result": "matched"}],
        {"not_matched": 0, "skipped": 1, "names": ["miss"]},
        [{"policy": "redirect_only", "result": "matched"}],
    ) == (
        iteration["pre_model"]["passed_over"],
        iteration["pre_model"]["evaluations"],
        iteration["dispatches"][0]["passed_over"],
        iteration["dispatches"][0]["evaluations"],
    )
