"""The reference ReAct loop, kept importable here: it lives in :mod:`seamscope.loop`."""

from seamscope.loop import (
    RECALL_TOOL,
    ChatRequest,
    ChatResponse,
    IterationRecord,
    ReActAgent,
    TurnResult,
    offload_stub,
)

__all__ = [
    "RECALL_TOOL",
    "ChatRequest",
    "ChatResponse",
    "IterationRecord",
    "ReActAgent",
    "TurnResult",
    "offload_stub",
]
