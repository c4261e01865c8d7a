"""The stub that stands in a conversation for an offloaded output, and the
built-in tool that brings the output back."""

from __future__ import annotations

from seamscope.decisions import OffloadGateDecision

__all__ = ["RECALL_TOOL", "offload_stub"]

RECALL_TOOL = "recall_tool_result"
"""The built-in tool that re-expands an offloaded output: ``{"offload_id": ...}``."""


def offload_stub(decision: OffloadGateDecision, tool: str) -> str:
    """The text that stands in the conversation for an offloaded output."""
    return (
        f"[offloaded {decision.offload_id}: {int(decision.output_tokens)} tokens from "
        f"{tool}; call {RECALL_TOOL}(offload_id={decision.offload_id!r}) to re-expand]"
    )
