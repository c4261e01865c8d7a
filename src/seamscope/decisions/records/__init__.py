"""Every record the decision core produces or takes: values, no behaviour.

This package imports nothing else of seamscope, so the seams, the selection
pipeline, the offload gate, the ledger's accounting and the observer
protocol all depend on it and never on each other. Records are frozen
dataclasses with slots; closed value sets are :class:`enum.StrEnum`
(a test pins every member: they are span and metric attribute values).

The records a caller or adopter builds (:class:`ModelConfig`,
:class:`ModelUsage`, :class:`StageOutcome`, :class:`OffloadGateInputs`,
:class:`CarriedStub`) check their fields at construction and raise
ValueError naming the class and field (wrong types included). The few
check primitives they use are at the top of ``_values``; ``_checks``
builds the rest of the core's construction checks on them.

Money: the offload gate and the ledger compute in exact :class:`~decimal.Decimal`
USD; a record's ``*_usd`` float is that exact value rounded to the nearest
double, for telemetry. Verdicts are always taken on the exact values.

The names are imported on first use (PEP 562): the closed value sets alone
(``_enums``, what the conventions and the CLI's explain need) load without
the dataclasses.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from seamscope.decisions.records._economics import (
        DEFAULT_LARGE_OFFLOAD_THRESHOLD_TOKENS,
        DEFAULT_RECALL_INPUT_TOKENS,
        DEFAULT_RECALL_OUTPUT_TOKENS,
        DEFAULT_STUB_TOKENS,
        CarriedStub,
        Compaction,
        CompactionAccount,
        GateCall,
        LedgerEntry,
        MiddlewareDecision,
        ModelCallAccount,
        OffloadGateDecision,
        OffloadGateInputs,
        RecallAccount,
        Settlement,
        ShadowOffload,
        ShadowSettlement,
        ShadowVerdict,
    )
    from seamscope.decisions.records._enums import (
        GuardResult,
        MiddlewareDecisionKind,
        OffloadCostKind,
        OffloadMechanism,
        OffloadOutcome,
        OffloadReasonCode,
        PaletteVerdict,
        PolicyResult,
        PricingSource,
        PriorSource,
        RecallStatus,
        Seam,
        SettleTrigger,
        StageOutcomeKind,
        WinnerSource,
    )
    from seamscope.decisions.records._stored import (
        AccountDelta,
        AccountTotals,
        ClaimedOffload,
        Recalled,
        StoredOffload,
    )
    from seamscope.decisions.records._values import (
        ContainedError,
        DispatchRecord,
        ModelConfig,
        ModelUsage,
        PassedOver,
        PolicyEvaluation,
        PostModelResult,
        PreModelResult,
        SelectionResult,
        StageOutcome,
        StageRecord,
        ToolCall,
        contained_error,
        tool_name,
    )

__all__ = [
    "AccountDelta",
    "AccountTotals",
    "ClaimedOffload",
    "StoredOffload",
    "DEFAULT_LARGE_OFFLOAD_THRESHOLD_TOKENS",
    "DEFAULT_RECALL_INPUT_TOKENS",
    "DEFAULT_RECALL_OUTPUT_TOKENS",
    "DEFAULT_STUB_TOKENS",
    "ContainedError",
    "CarriedStub",
    "DispatchRecord",
    "GateCall",
    "Compaction",
    "CompactionAccount",
    "GuardResult",
    "LedgerEntry",
    "MiddlewareDecision",
    "MiddlewareDecisionKind",
    "ModelCallAccount",
    "ModelConfig",
    "ModelUsage",
    "OffloadCostKind",
    "OffloadGateDecision",
    "OffloadGateInputs",
    "OffloadMechanism",
    "OffloadOutcome",
    "OffloadReasonCode",
    "PaletteVerdict",
    "PassedOver",
    "PolicyEvaluation",
    "PolicyResult",
    "PostModelResult",
    "PreModelResult",
    "PricingSource",
    "PriorSource",
    "RecallAccount",
    "RecallStatus",
    "Recalled",
    "Seam",
    "SelectionResult",
    "SettleTrigger",
    "Settlement",
    "ShadowOffload",
    "ShadowSettlement",
    "ShadowVerdict",
    "StageOutcome",
    "StageOutcomeKind",
    "StageRecord",
    "ToolCall",
    "WinnerSource",
    "contained_error",
    "tool_name",
]

# public name -> the module of the package that defines it
_HOME = {
    "AccountDelta": "_stored",
    "AccountTotals": "_stored",
    "ClaimedOffload": "_stored",
    "Recalled": "_stored",
    "RecallStatus": "_enums",
    "StoredOffload": "_stored",
    "CarriedStub": "_economics",
    "Compaction": "_economics",
    "CompactionAccount": "_economics",
    "ContainedError": "_values",
    "DEFAULT_LARGE_OFFLOAD_THRESHOLD_TOKENS": "_economics",
    "DEFAULT_RECALL_INPUT_TOKENS": "_economics",
    "DEFAULT_RECALL_OUTPUT_TOKENS": "_economics",
    "DEFAULT_STUB_TOKENS": "_economics",
    "DispatchRecord": "_values",
    "GateCall": "_economics",
    "GuardResult": "_enums",
    "LedgerEntry": "_economics",
    "MiddlewareDecision": "_economics",
    "MiddlewareDecisionKind": "_enums",
    "ModelCallAccount": "_economics",
    "ModelConfig": "_values",
    "ModelUsage": "_values",
    "OffloadCostKind": "_enums",
    "OffloadGateDecision": "_economics",
    "OffloadGateInputs": "_economics",
    "OffloadMechanism": "_enums",
    "OffloadOutcome": "_enums",
    "OffloadReasonCode": "_enums",
    "PaletteVerdict": "_enums",
    "PassedOver": "_values",
    "PolicyEvaluation": "_values",
    "PolicyResult": "_enums",
    "PostModelResult": "_values",
    "PreModelResult": "_values",
    "PricingSource": "_enums",
    "PriorSource": "_enums",
    "RecallAccount": "_economics",
    "Seam": "_enums",
    "SelectionResult": "_values",
    "SettleTrigger": "_enums",
    "Settlement": "_economics",
    "ShadowOffload": "_economics",
    "ShadowSettlement": "_economics",
    "ShadowVerdict": "_economics",
    "StageOutcome": "_values",
    "StageOutcomeKind": "_enums",
    "StageRecord": "_values",
    "ToolCall": "_values",
    "WinnerSource": "_enums",
    "contained_error": "_values",
    "tool_name": "_values",
}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value  # later reads skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
