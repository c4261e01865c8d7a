"""Every closed value set of the decision core and of telemetry is pinned member by member.

These values are span attribute values, metric attribute values and parts of
users' queries: changing one is a contract change and must fail here.
"""

from __future__ import annotations

import enum
import inspect

from seamscope.decisions import records
from seamscope.decisions.selection import SafetyLevel
from seamscope.telemetry import conventions

PINNED: dict[str, dict[str, str]] = {
    "Seam": {"PRE_MODEL": "pre_model", "POST_MODEL": "post_model"},
    "WinnerSource": {
        "POLICY": "policy",
        "RESOLVER": "resolver",
        "DEFAULT": "default",
        "ADOPTER": "adopter",
        "NONE": "none",
        "ROUTER": "router",
        "FALLBACK": "fallback",
    },
    "PolicyResult": {
        "MATCHED": "matched",
        "NOT_MATCHED": "not_matched",
        "SKIPPED": "skipped",
        "ERROR": "error",
    },
    "GuardResult": {"PASSED": "passed", "FAILED": "failed", "ERROR": "error", "NONE": "none"},
    "PaletteVerdict": {"KEPT": "kept", "DROPPED": "dropped"},
    "StageOutcomeKind": {"SELECT": "select", "ABSTAIN": "abstain"},
    "OffloadReasonCode": {
        "BELOW_THRESHOLD": "below_threshold",
        "UNPRICED_MODEL": "unpriced_model",
        "NET_POSITIVE": "net_positive",
        "NET_NOT_POSITIVE": "net_not_positive",
        "STORE_FAILED": "store_failed",
    },
    "PricingSource": {
        "OVERRIDE": "override",
        "GENAI_PRICES": "genai-prices",
        "SYMFONIC": "symfonic",
        "NONE": "none",
    },
    "PriorSource": {"DEFAULT": "default", "CALIBRATED": "calibrated"},
    "OffloadOutcome": {"GAIN": "gain", "LOSS": "loss", "BREAK_EVEN": "break_even"},
    "OffloadCostKind": {
        "STUB_CARRY": "stub_carry",
        "RECALL": "recall",
        "CACHE_DISRUPTION": "cache_disruption",
        "COMPACTION_CALL": "compaction_call",
    },
    "OffloadMechanism": {
        "SEAMSCOPE_GATE": "seamscope_gate",
        "CONTEXT_EDITING": "context_editing",
        "SUMMARIZATION": "summarization",
        "TOOL_OUTPUT_TRIMMER": "tool_output_trimmer",
        "DEEPAGENTS_EVICTION": "deepagents_eviction",
        "STRANDS_CONTEXT_OFFLOAD": "strands_context_offload",
    },
    "MiddlewareDecisionKind": {
        "TOOL_SELECTION": "tool_selection",
        "TOOL_SEARCH": "tool_search",
        "MODEL_ROUTE": "model_route",
        "MODEL_FALLBACK": "model_fallback",
        "TOOL_CALL_BLOCKED": "tool_call_blocked",
        "COMPACTION": "compaction",
    },
    "SelectionSet": {"OFFERED": "offered", "SELECTED": "selected"},
    "SettleTrigger": {
        "CONVERSATION_END": "conversation_end",
        "EXPLICIT": "explicit",
        "IDLE": "idle",
        "EVICTED": "evicted",
        "EXPIRED": "expired",
    },
    "RecallStatus": {
        "FOUND": "found",
        "EXPIRED": "expired",
        "EVICTED": "evicted",
        "UNKNOWN": "unknown",
    },
    "CacheUsage": {"READ": "read", "WRITE": "write", "UNCACHED": "uncached"},
    "ShadowBasis": {"EXACT": "exact", "EXPECTED": "expected"},
    "DecisionKind": {
        "SELECT_TOOLS": "select_tools",
        "PRE_MODEL": "pre_model",
        "POST_MODEL": "post_model",
        "OFFLOAD_GATE": "offload_gate",
    },
}


# the closed value sets used only by telemetry live in conventions
TELEMETRY_ONLY = {"SelectionSet", "CacheUsage", "DecisionKind", "ShadowBasis"}


def _str_enums_in_module() -> dict[str, type[enum.StrEnum]]:
    found = {
        name: obj
        for module in (records, conventions)
        for name, obj in ((n, getattr(module, n)) for n in dir(module))
        if inspect.isclass(obj) and issubclass(obj, enum.StrEnum) and obj is not enum.StrEnum
    }
    return found


def test_the_pinned_enums_are_exactly_the_modules_str_enums() -> None:
    assert sorted(PINNED) == sorted(_str_enums_in_module())


def test_the_core_enums_are_records_public_names_and_the_rest_are_telemetrys() -> None:
    core = {n for n in records.__all__ if n in _str_enums_in_module()}
    assert sorted(set(PINNED) - TELEMETRY_ONLY) == sorted(core)
    assert all(vars(conventions)[n].__module__ == conventions.__name__ for n in TELEMETRY_ONLY)


def test_every_member_value_is_pinned() -> None:
    actual = {
        name: {member.name: member.value for member in cls}
        for name, cls in _str_enums_in_module().items()
    }
    assert PINNED == actual


def test_members_are_their_values_as_str() -> None:
    # a StrEnum member formats as its value, so it can be used as an
    # attribute value without .value
    actual = {
        name: {member.name: str(member) for member in cls}
        for name, cls in _str_enums_in_module().items()
    }
    assert PINNED == actual


def test_safety_levels_are_pinned_in_rank_order() -> None:
    assert [("read", 0), ("write", 1), ("destructive", 2)] == [
        (level.value, level.rank) for level in SafetyLevel
    ]
