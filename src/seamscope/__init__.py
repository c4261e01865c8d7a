"""seamscope: the decision layer of a tool-using agent loop, observable with OpenTelemetry.

The decision layer's public names are importable from here. Telemetry lives in
:mod:`seamscope.telemetry`, loop adapters in :mod:`seamscope.adapters`.
"""

from seamscope.decisions import (
    AllowlistStage,
    DispatchContext,
    ForcedChoiceStage,
    IntentRoutingStage,
    LazyRoutingStage,
    Message,
    ModelConfig,
    OffloadGate,
    OffloadGateDecision,
    OffloadGateInputs,
    PolicyStage,
    PricingTable,
    RolePaletteStage,
    SeamRouter,
    SelectionContext,
    SelectionPipeline,
    SelectionStage,
    StageOutcome,
    ToolCall,
    ToolCallPolicy,
    ToolCatalog,
    ToolSpec,
    evaluate_offload_gate,
)

__all__ = [
    "AllowlistStage",
    "DispatchContext",
    "ForcedChoiceStage",
    "IntentRoutingStage",
    "LazyRoutingStage",
    "Message",
    "ModelConfig",
    "OffloadGate",
    "OffloadGateDecision",
    "OffloadGateInputs",
    "PolicyStage",
    "PricingTable",
    "RolePaletteStage",
    "SeamRouter",
    "SelectionContext",
    "SelectionPipeline",
    "SelectionStage",
    "StageOutcome",
    "ToolCall",
    "ToolCallPolicy",
    "ToolCatalog",
    "ToolSpec",
    "evaluate_offload_gate",
]

__version__ = "0.1.0"
