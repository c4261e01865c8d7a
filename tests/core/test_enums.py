"""Every closed value set of the decision core is pinned member by member.

These values are span attribute values, metric attribute values and parts of
users' queries: changing one is a contract change and must fail here.
"""

from __future__ import annotations

import enum
import inspect

from seamscope.decisions import _enums
from seamscope.decisions.selection import SafetyLevel

PINNED: dict[str, dict[str, str]] = {
    "Seam": {"PRE_MODEL": "pre_model", "POST_MODEL": "post_model"},
    "WinnerSource": {
        "POLICY": "policy",
        "RESOLVER": "resolver",
        "DEFAULT": "default",
        "ADOPTER": "adopter",
        "NONE": "none",
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
    },
    "PricingSource": {
        "OVERRIDE": "override",
        "GENAI_PRICES": "genai-prices",
        "SYMFONIC": "symfonic",
        "NONE": "none",
    },
    "OffloadOutcome": {"GAIN": "gain", "LOSS": "loss"},
    "OffloadCostKind": {
        "STUB_CARRY": "stub_carry",
        "RECALL": "recall",
        "CACHE_DISRUPTION": "cache_disruption",
    },
    "SelectionSet": {"OFFERED": "offered", "SELECTED": "selected"},
    "SettleTrigger": {
        "CONVERSATION_END": "conversation_end",
        "EXPLICIT": "explicit",
        "IDLE": "idle",
        "EVICTED": "evicted",
    },
    "CacheUsage": {"READ": "read", "WRITE": "write", "UNCACHED": "uncached"},
    "DecisionKind": {
        "SELECT_TOOLS": "select_tools",
        "STAGE": "stage",
        "PRE_MODEL": "pre_model",
        "POST_MODEL": "post_model",
        "DISPATCH": "dispatch",
        "OFFLOAD_GATE": "offload_gate",
    },
}


def _str_enums_in_module() -> dict[str, type[enum.StrEnum]]:
    return {
        name: obj
        for name, obj in vars(_enums).items()
        if inspect.isclass(obj) and issubclass(obj, enum.StrEnum) and obj is not enum.StrEnum
    }


def test_the_pinned_enums_are_exactly_the_modules_str_enums() -> None:
    assert sorted(PINNED) == sorted(_str_enums_in_module())


def test_the_pinned_enums_are_exactly_the_modules_public_names() -> None:
    assert sorted(PINNED) == sorted(_enums.__all__)


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
