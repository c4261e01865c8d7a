"""The LangChain v1 / LangGraph surface the adapter uses, imported in one place.

A missing or too old LangChain fails here, with the install hint, instead of
in whichever module happens to import it first.
"""

from __future__ import annotations

try:
    from langchain.agents.middleware import (
        AgentMiddleware,
        AgentState,
        ExtendedModelResponse,
        ModelRequest,
        ModelResponse,
        ToolCallRequest,
    )
    from langchain.agents.structured_output import AutoStrategy, ProviderStrategy, ToolStrategy
    from langchain.tools import ToolRuntime
    from langchain_core.callbacks import BaseCallbackHandler
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, ToolMessage
    from langchain_core.tools import BaseTool, StructuredTool
    from langchain_core.tracers.context import register_configure_hook
    from langchain_core.utils.function_calling import convert_to_openai_tool
    from langgraph.config import get_config
    from langgraph.errors import GraphBubbleUp
    from langgraph.graph.message import REMOVE_ALL_MESSAGES
    from langgraph.runtime import Runtime, get_runtime
    from langgraph.types import Command
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "seamscope.adapters.langchain needs LangChain v1: pip install 'seamscope[langchain]'"
    ) from exc

__all__ = [
    "REMOVE_ALL_MESSAGES",
    "ls_model_name",
    "AIMessage",
    "AutoStrategy",
    "AgentMiddleware",
    "AgentState",
    "BaseCallbackHandler",
    "BaseChatModel",
    "BaseTool",
    "Command",
    "ExtendedModelResponse",
    "GraphBubbleUp",
    "HumanMessage",
    "ModelRequest",
    "ModelResponse",
    "ProviderStrategy",
    "RemoveMessage",
    "Runtime",
    "StructuredTool",
    "ToolCallRequest",
    "ToolMessage",
    "ToolRuntime",
    "ToolStrategy",
    "convert_to_openai_tool",
    "get_config",
    "get_runtime",
    "register_configure_hook",
]


def ls_model_name(model: object) -> str | None:
    """The model name a LangChain chat model gives its own traces
    (``_get_ls_params()["ls_model_name"]``, which integrations override with
    their own attribute: ``model_id``, ``deployment_name``...); None when it
    says none. The one read of that LangChain method, kept here."""
    reader = getattr(model, "_get_ls_params", None)
    if not callable(reader):
        return None
    name = reader().get("ls_model_name")
    return name if isinstance(name, str) and name else None
