"""The decision core: policies at two seams, tool selection, the offload gate, the ledger.

Nothing here imports OpenTelemetry or structlog (a test proves it);
telemetry is one implementation of :class:`DecisionObserver`. The records
the core produces and takes, and their closed value sets, are in
:mod:`seamscope.decisions.records`.
"""

from seamscope.decisions._ledger import OffloadLedger
from seamscope.decisions._messages import Message
from seamscope.decisions._observer import DecisionObserver, NoopObserver
from seamscope.decisions._offload import OffloadGate, evaluate_offload_gate
from seamscope.decisions._policy import DispatchContext, ToolCallPolicy
from seamscope.decisions._pricing import ModelPrice, PricingTable
from seamscope.decisions._seams import SeamRouter
from seamscope.decisions.records import (
    ModelConfig,
    ModelUsage,
    OffloadGateDecision,
    OffloadGateInputs,
    PostModelResult,
    PreModelResult,
    SelectionResult,
    Settlement,
    StageOutcome,
    ToolCall,
)
from seamscope.decisions.selection import (
    AllowlistStage,
    ForcedChoiceStage,
    IntentRoutingStage,
    IntentVerdict,
    LazyRoutingStage,
    PolicyStage,
    RolePaletteStage,
    SafetyLevel,
    SelectionContext,
    SelectionPipeline,
    SelectionStage,
    ToolCatalog,
    ToolSpec,
)

__all__ = [
    "AllowlistStage",
    "DecisionObserver",
    "DispatchContext",
    "ForcedChoiceStage",
    "IntentRoutingStage",
    "IntentVerdict",
    "LazyRoutingStage",
    "Message",
    "ModelConfig",
    "ModelPrice",
    "ModelUsage",
    "NoopObserver",
    "OffloadGate",
    "OffloadGateDecision",
    "OffloadGateInputs",
    "OffloadLedger",
    "PolicyStage",
    "PostModelResult",
    "PreModelResult",
    "PricingTable",
    "RolePaletteStage",
    "SafetyLevel",
    "SeamRouter",
    "SelectionContext",
    "SelectionPipeline",
    "SelectionResult",
    "SelectionStage",
    "Settlement",
    "StageOutcome",
    "ToolCall",
    "ToolCallPolicy",
    "ToolCatalog",
    "ToolSpec",
    "evaluate_offload_gate",
]
