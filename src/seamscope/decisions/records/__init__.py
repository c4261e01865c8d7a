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
"""

from __future__ import annotations

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
)
from seamscope.decisions.records._values import (
    ContainedError,
    DispatchRecord,
    GuardResult,
    MiddlewareDecisionKind,
    ModelConfig,
    ModelUsage,
    OffloadCostKind,
    OffloadMechanism,
    OffloadOutcome,
    OffloadReasonCode,
    PaletteVerdict,
    PolicyEvaluation,
    PolicyResult,
    PostModelResult,
    PreModelResult,
    PricingSource,
    Seam,
    SelectionResult,
    SettleTrigger,
    StageOutcome,
    StageOutcomeKind,
    StageRecord,
    ToolCall,
    WinnerSource,
    contained_error,
    tool_name,
)

__all__ = [
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
    "PolicyEvaluation",
    "PolicyResult",
    "PostModelResult",
    "PreModelResult",
    "PricingSource",
    "RecallAccount",
    "Seam",
    "SelectionResult",
    "SettleTrigger",
    "Settlement",
    "StageOutcome",
    "StageOutcomeKind",
    "StageRecord",
    "ToolCall",
    "WinnerSource",
    "contained_error",
    "tool_name",
]
