"""The OpenAI Agents SDK surface the adapter uses, imported in one place.

A missing or different SDK fails here, with the install hint, instead of in
whichever module happens to import it first.
"""

from __future__ import annotations

from typing import Any

try:
    from agents import (
        Agent,
        FunctionTool,
        Model,
        ModelProvider,
        ModelResponse,
        ModelSettings,
        ModelTracing,
        RunConfig,
        RunContextWrapper,
        RunHooks,
        Runner,
        RunResult,
        RunResultStreaming,
        RunState,
        Tool,
        ToolErrorFormatterArgs,
        ToolOriginType,
        Usage,
    )
    from agents.exceptions import InputGuardrailTripwireTriggered, MaxTurnsExceeded
    from agents.extensions.tool_output_trimmer import ToolOutputTrimmer
    from agents.models.default_models import get_default_model_settings
    from agents.run import DEFAULT_MAX_TURNS
    from agents.run_config import CallModelData, ModelInputData

    # the SDK's own rule for the model provider a run owns (it closes the one it
    # made when the caller gave none): seamscope always passes a RunConfig, so
    # it applies the same rule, with the SDK's own helpers, itself
    from agents.run_internal.model_provider_lifecycle import (
        _close_runner_owned_model_provider as close_owned_provider,
    )
    from agents.run_internal.model_provider_lifecycle import (
        _normalize_run_config_for_runner as normalize_run_config,
    )
    from agents.run_internal.turn_preparation import validate_run_hooks
    from agents.tool import get_function_tool_origin
    from agents.tool_context import ToolContext
    from openai.types.responses import (
        ResponseCompletedEvent,
        ResponseFunctionToolCall,
        ResponseOutputMessage,
    )
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "seamscope.adapters.openai_agents needs the OpenAI Agents SDK: "
        "pip install 'seamscope[openai-agents]'"
    ) from exc

__all__ = [
    "DEFAULT_MAX_TURNS",
    "cleanup_on_run_end",
    "Agent",
    "CallModelData",
    "FunctionTool",
    "InputGuardrailTripwireTriggered",
    "MaxTurnsExceeded",
    "Model",
    "ModelInputData",
    "ModelProvider",
    "ModelResponse",
    "ModelSettings",
    "ModelTracing",
    "ResponseCompletedEvent",
    "ResponseFunctionToolCall",
    "ResponseOutputMessage",
    "RunConfig",
    "RunContextWrapper",
    "RunHooks",
    "RunResult",
    "RunResultStreaming",
    "RunState",
    "Runner",
    "Tool",
    "ToolContext",
    "ToolErrorFormatterArgs",
    "ToolOriginType",
    "ToolOutputTrimmer",
    "Usage",
    "close_owned_provider",
    "get_default_model_settings",
    "get_function_tool_origin",
    "normalize_run_config",
    "validate_run_hooks",
]


async def cleanup_on_run_end(model: Any, owner: object) -> None:
    """The SDK's run-end hook of a model (``Model._cleanup_on_run_end``, which
    the runner calls on the model it used): the routed model passes it on to
    every model the run really called."""
    hook = getattr(model, "_cleanup_on_run_end", None)
    if hook is not None:
        await hook(owner)
