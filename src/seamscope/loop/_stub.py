"""The stub that stands in a conversation for an offloaded output, and the
built-in tool that brings the output back."""

from __future__ import annotations

from dataclasses import replace

from seamscope.decisions import OffloadGateDecision
from seamscope.loop._tokens import estimate_tokens

__all__ = ["RECALL_TOOL", "UNSENT_ID_SIZE", "offload_stub", "unsent_stub_tokens"]

RECALL_TOOL = "recall_tool_result"
"""The built-in tool that re-expands an offloaded output: ``{"offload_id": ...}``."""


def offload_stub(decision: OffloadGateDecision, tool: str) -> str:
    """The text that stands in the conversation for an offloaded output."""
    return (
        f"[offloaded {decision.offload_id}: {int(decision.output_tokens)} tokens from "
        f"{tool}; call {RECALL_TOOL}(offload_id={decision.offload_id!r}) to re-expand]"
    )


UNSENT_ID_SIZE = 16
"""The id length an unsent stub is sized with: the gate's default ids (16 hex digits)."""


def unsent_stub_tokens(decision: OffloadGateDecision, tool: str) -> float:
    """The tokens of the stub the loop would send for an offload that did not happen
    (a shadow's, or one ``seamscope whatif`` makes fire): one rule for both, with an
    id of :data:`UNSENT_ID_SIZE` characters."""
    placeholder = replace(decision, offload_id="0" * UNSENT_ID_SIZE)
    return estimate_tokens(offload_stub(placeholder, tool))
