"""seamscope: the decision layer of a tool-using agent loop, observable with OpenTelemetry.

This module re-exports the decision core's main names (those listed in
``__all__``, all from :mod:`seamscope.decisions`, which has the rest of the
core, with its records in :mod:`seamscope.decisions.records`). Telemetry is
in :mod:`seamscope.telemetry`, the loop adapters in :mod:`seamscope.adapters`,
and none of them is imported here; the re-exported names are imported on
first use (PEP 562), so ``import seamscope.cli`` does not load the core.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from seamscope.decisions._lazy import lazy_exports

# a library prints nothing by default: its events show once the application
# configures logging (or structlog)
logging.getLogger("seamscope").addHandler(logging.NullHandler())

if TYPE_CHECKING:
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


__getattr__, __dir__ = lazy_exports(
    __name__, dict.fromkeys(__all__, "seamscope.decisions"), __all__
)
