"""seamscope: the decision layer of a tool-using agent loop, observable with OpenTelemetry.

This module re-exports the decision core's main names (those listed in
``__all__``, all from :mod:`seamscope.decisions`, which has the rest of the
core, with its records in :mod:`seamscope.decisions.records`). Telemetry is
in :mod:`seamscope.telemetry`, the loop adapters in :mod:`seamscope.adapters`,
and none of them is imported here.
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
