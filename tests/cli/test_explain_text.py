"""What explain's text says, read cold: a failed model call in the tree, the money
table inside 80 columns, a tiny loss that reads as a loss."""

from __future__ import annotations

import io
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from rich.cells import cell_len
from rich.console import Console
from tests.cli._support import any_value, export_line, span, turn, write_lines

from seamscope.cli._render import money, write_settlements
from seamscope.telemetry import conventions as c

from .conftest import Explain


def _failed_chat_turn() -> list[dict[str, Any]]:
    spans = turn()
    chat = spans[2]
    assert chat["name"] == "chat m"
    chat["attributes"].append({"key": c.ATTR_ERROR_TYPE, "value": any_value("RateLimitError")})
    chat["status"] = {"code": 2}
    return spans


def test_a_failed_model_call_says_so_in_the_tree(tmp_path: Path, explain: Explain) -> None:
    path = write_lines(tmp_path / "t.jsonl", [export_line(_failed_chat_turn())])
    code, out, _ = explain(str(path))
    assert 0 == code
    [line] = [x for x in out.splitlines() if "chat" in x]
    assert line.endswith("chat        m  in 1 200 tok · out 30 tok  failed: RateLimitError")
    code, out, _ = explain(str(path), "--format", "json")
    [turn_json] = json.loads(out)["turns"]
    assert "RateLimitError" == turn_json["iterations"][0]["chat"]["error_type"]


def test_a_model_call_that_did_not_fail_says_nothing_more(tmp_path: Path, explain: Explain) -> None:
    path = write_lines(tmp_path / "t.jsonl", [export_line(turn())])
    _, out, _ = explain(str(path))
    [line] = [x for x in out.splitlines() if "chat" in x]
    assert line.endswith("chat        m  in 1 200 tok · out 30 tok")


def _settle(span_id: str, offload_id: str, net: float, **more: Any) -> dict[str, Any]:
    return span(
        span_id,
        c.SPAN_OFFLOAD_SETTLE,
        trace_id="1" * 32,
        attrs={
            c.ATTR_OFFLOAD_ID: offload_id,
            c.ATTR_GEN_AI_CONVERSATION_ID: "conv-1",
            c.ATTR_GEN_AI_REQUEST_MODEL: "claude-haiku-4-5",
            c.ATTR_OFFLOAD_MECHANISM: "seamscope_gate",
            c.ATTR_OFFLOAD_NET_SAVING_USD: 0.1234,
            c.ATTR_OFFLOAD_REALIZED_NET_SAVING_USD: net,
            c.ATTR_OFFLOAD_TURNS_CARRIED: 12,
            c.ATTR_OFFLOAD_RECALLS: 1,
            c.ATTR_OFFLOAD_CACHE_DELTA_USD: 0.0,
            c.ATTR_OFFLOAD_OUTCOME: "loss" if net < 0 else "gain",
            **more,
        },
    )


def _settlements() -> list[dict[str, Any]]:
    return [
        {
            "offload_id": "off-52e6b438", "mechanism": "seamscope_gate",
            "model": "claude-haiku-4-5", "predicted_net_saving_usd": 0.1234,
            "realized_net_saving_usd": -0.0000123, "turns_carried": 12, "recalls": 1,
            "cache_delta_usd": 0.0012, "outcome": "loss",
        },
        {
            "offload_id": "cmp-7a1b2c3d4e5f", "mechanism": "context_editing",
            "model": "gpt-4.1-mini", "predicted_net_saving_usd": 0.0034,
            "realized_net_saving_usd": 0.0021, "turns_carried": 3, "recalls": 0,
            "cache_delta_usd": 0.0, "outcome": "gain",
        },
    ]  # fmt: skip


@pytest.mark.parametrize("width", [80, 100, 160])
def test_the_money_table_fits_the_terminal_with_every_id_and_amount_whole(width: int) -> None:
    out = io.StringIO()
    console = Console(file=out, width=width, force_terminal=True, color_system=None)
    write_settlements(console, _settlements())
    lines = out.getvalue().splitlines()
    assert max(cell_len(line.rstrip()) for line in lines) <= width
    text = out.getvalue()
    wholes = [
        *("off-52e6b438", "cmp-7a1b2c3d4e5f", "claude-haiku-4-5", "context_editing"),
        *("+$0.1234", "−$0.000012", "+$0.0034", "+$0.0021", "$0.0012", "loss", "gain"),
    ]
    for whole in wholes:
        assert whole in text, whole
    assert "…" not in text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (-0.0000123, "−$0.000012"),
        (0.00004, "+$0.000040"),
        (-0.00005, "−$0.0001"),  # 4 decimals say it
        (0.0, "+$0.0000"),
        (Decimal("-0.000000001234"), "−$0.0000000012"),
        (Decimal("0.46362"), "+$0.4636"),
    ],
)
def test_a_tiny_amount_reads_as_what_it_is(value: float | Decimal, text: str) -> None:
    assert text == money(value, True)


def test_a_tiny_loss_in_explains_table(tmp_path: Path, explain: Explain) -> None:
    path = write_lines(
        tmp_path / "t.jsonl", [export_line([_settle("b" * 16, "off-1", -0.0000123)])]
    )
    _, out, _ = explain(str(path))
    [row] = [line for line in out.splitlines() if "off-1" in line]
    assert "−$0.000012" in row and row.rstrip(" │").endswith("loss")
