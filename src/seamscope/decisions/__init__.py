"""The decision core: policies at two seams, tool selection, the offload gate, the ledger.

Nothing here imports OpenTelemetry or structlog (a test proves it);
telemetry is one implementation of :class:`DecisionObserver`. The records
the core produces and takes, and their closed value sets, are in
:mod:`seamscope.decisions.records`.

The public names are imported on first use (PEP 562), so importing one
part of the core (the records, as the conventions and the CLI's explain
do) does not load the rest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from seamscope.decisions._lazy import lazy_exports

if TYPE_CHECKING:
    from seamscope.decisions._ledger import OffloadLedger
    from seamscope.decisions._messages import Message, last_user_text, message_text
    from seamscope.decisions._observer import DecisionObserver, NoopObserver
    from seamscope.decisions._offload import OffloadGate, evaluate_offload_gate
    from seamscope.decisions._policy import DispatchContext, ToolCallPolicy
    from seamscope.decisions._pricing import ModelPrice, PricingTable, to_decimal
    from seamscope.decisions._priors import DEFAULT_MIN_OFFLOADS, PRIORS_FORMAT, Prior, Priors
    from seamscope.decisions._seams import SeamRouter
    from seamscope.decisions._store import OffloadStore
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
    "DEFAULT_MIN_OFFLOADS",
    "PRIORS_FORMAT",
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
    "OffloadStore",
    "PolicyStage",
    "PostModelResult",
    "PreModelResult",
    "PricingTable",
    "Prior",
    "Priors",
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
    "last_user_text",
    "message_text",
    "to_decimal",
]

# public name -> the module of the core that defines it
_HOME = {
    "DEFAULT_MIN_OFFLOADS": "_priors",
    "PRIORS_FORMAT": "_priors",
    "Prior": "_priors",
    "Priors": "_priors",
    "AllowlistStage": "selection",
    "DecisionObserver": "_observer",
    "DispatchContext": "_policy",
    "ForcedChoiceStage": "selection",
    "IntentRoutingStage": "selection",
    "IntentVerdict": "selection",
    "LazyRoutingStage": "selection",
    "Message": "_messages",
    "ModelConfig": "records",
    "ModelPrice": "_pricing",
    "ModelUsage": "records",
    "NoopObserver": "_observer",
    "OffloadGate": "_offload",
    "OffloadGateDecision": "records",
    "OffloadGateInputs": "records",
    "OffloadLedger": "_ledger",
    "OffloadStore": "_store",
    "PolicyStage": "selection",
    "PostModelResult": "records",
    "PreModelResult": "records",
    "PricingTable": "_pricing",
    "RolePaletteStage": "selection",
    "SafetyLevel": "selection",
    "SeamRouter": "_seams",
    "SelectionContext": "selection",
    "SelectionPipeline": "selection",
    "SelectionResult": "records",
    "SelectionStage": "selection",
    "Settlement": "records",
    "StageOutcome": "records",
    "ToolCall": "records",
    "ToolCallPolicy": "_policy",
    "ToolCatalog": "selection",
    "ToolSpec": "selection",
    "evaluate_offload_gate": "_offload",
    "last_user_text": "_messages",
    "message_text": "_messages",
    "to_decimal": "_pricing",
}


__getattr__, __dir__ = lazy_exports(
    __name__, {n: f"{__name__}.{m}" for n, m in _HOME.items()}, __all__
)
