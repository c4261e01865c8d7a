"""Tool selection: six stages sharing one signature, and their pipeline.

What a stage returns and the pipeline records (``StageOutcome``,
``StageRecord``, ``SelectionResult``) are records: :mod:`seamscope.decisions`
(their home :mod:`seamscope.decisions.records`).
"""

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
    "SelectionStage",
    "ToolCatalog",
    "ToolSpec",
    "filter_by_names",
]
