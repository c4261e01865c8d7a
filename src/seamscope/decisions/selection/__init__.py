"""Tool selection: six stages sharing one signature, and their pipeline."""

from seamscope.decisions.records import SelectionResult, StageOutcome, StageRecord
from seamscope.decisions.selection._pipeline import SelectionPipeline
from seamscope.decisions.selection._stages import (
    DEFAULT_ALWAYS_INCLUDE,
    AllowlistStage,
    ForcedChoiceStage,
    IntentRoutingStage,
    IntentVerdict,
    LazyRoutingStage,
    PolicyStage,
    RolePaletteStage,
)
from seamscope.decisions.selection._types import (
    SafetyLevel,
    SelectionContext,
    SelectionStage,
    ToolCatalog,
    ToolSpec,
    filter_by_names,
)

__all__ = [
    "DEFAULT_ALWAYS_INCLUDE",
    "AllowlistStage",
    "ForcedChoiceStage",
    "IntentRoutingStage",
    "IntentVerdict",
    "LazyRoutingStage",
    "PolicyStage",
    "RolePaletteStage",
    "SafetyLevel",
    "SelectionContext",
    "SelectionPipeline",
    "SelectionResult",
    "SelectionStage",
    "StageOutcome",
    "StageRecord",
    "ToolCatalog",
    "ToolSpec",
    "filter_by_names",
]
