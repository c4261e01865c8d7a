"""The peer benchmark checks the nine decision facts by value, not by key presence:
a span that carries every key with one wrong value loses exactly that fact."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import Event, ReadableSpan

from seamscope.decisions.records import (
    GuardResult,
    OffloadReasonCode,
    PaletteVerdict,
    PolicyResult,
    WinnerSource,
)
from seamscope.loop import RECALL_TOOL
from seamscope.telemetry import conventions as c

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from _facts import FACTS, facts_of
from _scenario import HAIKU, LC_TOOLS, PALETTE, TURN

SELECTED = (*PALETTE, "hydrate_context", RECALL_TOOL)
PALETTE_DROPS = (
    "export_report",
    "deploy_service",
    "create_ticket",
    "page_oncall",
    "hydrate_context",
)


def _spans(**changes: Any) -> list[ReadableSpan]:
    """The spans of the scripted turn; ``changes``: ``span name/attribute key`` -> value."""
    attributes: dict[str, dict[str, Any]] = {
        "palette": {
            c.ATTR_STAGE_NAME: "role_palette",
            c.ATTR_STAGE_DROPPED: PALETTE_DROPS,
            c.ATTR_STAGE_REASON: "analyst palette (−5: export_report, deploy_service, …)",
        },
        "policy": {
            c.ATTR_STAGE_NAME: "policy",
            c.ATTR_STAGE_DROPPED: ("delete_rows",),
            c.ATTR_STAGE_REASON: "safety ceiling 'write' (−1: delete_rows)",
        },
        c.SPAN_SELECT_TOOLS: {
            c.ATTR_SELECTION_OFFERED: (RECALL_TOOL, *LC_TOOLS),
            c.ATTR_SELECTION_SELECTED: SELECTED,
        },
        c.SPAN_SEAM_PRE_MODEL: {
            c.ATTR_POLICY_PASSED_OVER: ("docs_lookup",),
            c.ATTR_SEAM_WINNER_SOURCE: WinnerSource.POLICY.value,
            c.ATTR_GEN_AI_REQUEST_MODEL: HAIKU,
            c.ATTR_POLICY_WINNER: "sales_data_read",
        },
        c.SPAN_DISPATCH: {
            c.ATTR_DISPATCH_EMITTED_TOOL: "run_block",
            c.ATTR_POLICY_WINNER: "sales_data_read",
            c.ATTR_DISPATCH_REDIRECT_TO: "fetch_data",
            c.ATTR_DISPATCH_FINAL_TOOL: "fetch_data",
            c.ATTR_DISPATCH_GUARD: GuardResult.PASSED.value,
            c.ATTR_DISPATCH_PALETTE_GATE: PaletteVerdict.KEPT.value,
        },
        c.SPAN_OFFLOAD_GATE: {
            c.ATTR_OFFLOAD_FIRE: True,
            c.ATTR_OFFLOAD_REASON_CODE: OffloadReasonCode.NET_POSITIVE.value,
            c.ATTR_GEN_AI_REQUEST_MODEL: HAIKU,
            c.ATTR_OFFLOAD_OUTPUT_TOKENS: 2_000,
            c.ATTR_OFFLOAD_HORIZON: 5,
            c.ATTR_OFFLOAD_NET_SAVING_USD: 0.002725,
            c.ATTR_OFFLOAD_REPREFILL_SAVING_USD: 0.01,
            c.ATTR_OFFLOAD_STUB_CARRY_COST_USD: 0.0004,
            c.ATTR_OFFLOAD_EXPECTED_RECALL_HOP_COST_USD: 0.006875,
        },
    }
    for where, value in changes.items():
        span, key = where.split("/", 1)
        attributes[span][key] = value
    names = {"palette": c.SPAN_STAGE, "policy": c.SPAN_STAGE}
    events = {
        c.SPAN_SEAM_PRE_MODEL: (
            Event(
                c.EVENT_POLICY_EVALUATED,
                {
                    c.ATTR_POLICY_NAME: "sales_data_read",
                    c.ATTR_POLICY_RESULT: PolicyResult.MATCHED.value,
                },
            ),
        )
    }
    return [
        ReadableSpan(names.get(label, label), attributes=attrs, events=events.get(label, ()))
        for label, attrs in attributes.items()
    ]


def test_the_scripted_turn_states_all_nine_facts() -> None:
    assert facts_of(_spans(), TURN) == dict.fromkeys(FACTS, True)


@pytest.mark.parametrize(
    ("where", "value", "fact"),
    [
        (f"{c.SPAN_SELECT_TOOLS}/{c.ATTR_SELECTION_OFFERED}", LC_TOOLS, "offered"),
        (f"{c.SPAN_SELECT_TOOLS}/{c.ATTR_SELECTION_SELECTED}", SELECTED[1:], "selected"),
        (f"policy/{c.ATTR_STAGE_DROPPED}", ("deploy_service",), "dropped with reason"),
        (f"policy/{c.ATTR_STAGE_REASON}", "safety ceiling", "dropped with reason"),
        (
            f"{c.SPAN_SEAM_PRE_MODEL}/{c.ATTR_GEN_AI_REQUEST_MODEL}",
            "claude-opus-4-6",
            "model winner",
        ),
        (
            f"{c.SPAN_SEAM_PRE_MODEL}/{c.ATTR_POLICY_PASSED_OVER}",
            (),
            "winner source with evaluations",
        ),
        (f"{c.SPAN_DISPATCH}/{c.ATTR_DISPATCH_FINAL_TOOL}", "run_block", "redirect"),
        (f"{c.SPAN_DISPATCH}/{c.ATTR_DISPATCH_GUARD}", GuardResult.FAILED.value, "guard"),
        (
            f"{c.SPAN_DISPATCH}/{c.ATTR_DISPATCH_PALETTE_GATE}",
            PaletteVerdict.DROPPED.value,
            "palette verdict",
        ),
        (
            f"{c.SPAN_OFFLOAD_GATE}/{c.ATTR_OFFLOAD_NET_SAVING_USD}",
            0.0027,
            "offload priced terms",
        ),
    ],
)
def test_one_wrong_value_loses_exactly_that_fact(where: str, value: Any, fact: str) -> None:
    want = dict.fromkeys(FACTS, True)
    want[fact] = False
    assert facts_of(_spans(**{where: value}), TURN) == want
