"""The framework-free loop: :class:`DecisionLayer` (the decision points of a
hand-written ReAct loop, with their telemetry) and :class:`ReActAgent` (a
reference ReAct loop built on it).

This package is their one home (:mod:`seamscope.adapters` re-exports the
main ones, for ``from seamscope.adapters import DecisionLayer``). The
framework adapters (:mod:`seamscope.adapters`) build on this package; it
imports none of them.
"""

from seamscope.loop._layer import ChatCall, DecisionLayer, Iteration, Turn
from seamscope.loop._react import (
    ChatRequest,
    ChatResponse,
    IterationRecord,
    ReActAgent,
    TurnResult,
)
from seamscope.loop._stub import RECALL_TOOL, offload_stub, unsent_stub_tokens
from seamscope.loop._tokens import estimate_tokens

__all__ = [
    "RECALL_TOOL",
    "ChatCall",
    "ChatRequest",
    "ChatResponse",
    "DecisionLayer",
    "Iteration",
    "IterationRecord",
    "ReActAgent",
    "Turn",
    "TurnResult",
    "estimate_tokens",
    "offload_stub",
    "unsent_stub_tokens",
]
