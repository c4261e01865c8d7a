"""The Google ADK surface the adapter uses, imported in one place.

A missing or different ``google-adk`` fails here, with the install hint,
instead of in whichever module happens to import it first.
"""

from __future__ import annotations

try:
    from google.adk.agents import BaseAgent
    from google.adk.agents.callback_context import CallbackContext
    from google.adk.agents.invocation_context import InvocationContext
    from google.adk.events.event import Event
    from google.adk.models.base_llm import BaseLlm
    from google.adk.models.llm_request import LlmRequest
    from google.adk.models.llm_response import LlmResponse
    from google.adk.plugins.base_plugin import BasePlugin
    from google.adk.tools.base_tool import BaseTool
    from google.adk.tools.function_tool import FunctionTool
    from google.adk.tools.tool_context import ToolContext
    from google.genai import types
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "seamscope.adapters.google_adk needs google-adk: pip install 'seamscope[google-adk]' "
        "&& pip install --no-deps google-adk==2.13.0"
    ) from exc

__all__ = [
    "BaseAgent",
    "BaseLlm",
    "BasePlugin",
    "BaseTool",
    "CallbackContext",
    "Event",
    "FunctionTool",
    "InvocationContext",
    "LlmRequest",
    "LlmResponse",
    "ToolContext",
    "types",
]
