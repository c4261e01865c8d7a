"""The Strands Agents surface the adapter uses, imported in one place.

A missing or different ``strands-agents`` fails here, with the install hint,
instead of in whichever module happens to import it first.
"""

from __future__ import annotations

try:
    from strands.hooks import (
        AfterInvocationEvent,
        AfterToolCallEvent,
        BeforeInvocationEvent,
        BeforeToolCallEvent,
        HookOrder,
    )
    from strands.middleware import InvokeModelContext, InvokeModelStage, ModelStopReason
    from strands.models.model import Model
    from strands.plugins import Plugin
    from strands.tools.decorator import tool
    from strands.tools.structured_output.structured_output_tool import StructuredOutputTool
    from strands.types.tools import ToolContext
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "seamscope.adapters.strands needs strands-agents: pip install 'seamscope[strands]' "
        "&& pip install --no-deps strands-agents==1.62.0 "
        "opentelemetry-instrumentation-threading==0.66b1"
    ) from exc

__all__ = [
    "AfterInvocationEvent",
    "AfterToolCallEvent",
    "BeforeInvocationEvent",
    "BeforeToolCallEvent",
    "HookOrder",
    "InvokeModelContext",
    "InvokeModelStage",
    "Model",
    "ModelStopReason",
    "Plugin",
    "StructuredOutputTool",
    "ToolContext",
    "tool",
]
