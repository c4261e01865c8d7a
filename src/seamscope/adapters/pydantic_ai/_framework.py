"""The pydantic-ai surface the adapter uses, imported in one place.

A missing or different pydantic-ai fails here, with the install hint,
instead of in whichever module happens to import it first.
"""

from __future__ import annotations

try:
    from opentelemetry.trace import NoOpTracer
    from pydantic_ai import RunContext
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.exceptions import UsageLimitExceeded
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelResponse,
        RetryPromptPart,
        SystemPromptPart,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
    from pydantic_ai.models import Model, ModelRequestContext
    from pydantic_ai.tools import ToolDefinition
    from pydantic_ai.toolsets import (
        AbstractToolset,
        FunctionToolset,
        PreparedToolset,
        WrapperToolset,
    )
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "seamscope.adapters.pydantic_ai needs pydantic-ai: pip install 'seamscope[pydantic-ai]'"
    ) from exc

__all__ = [
    "AbstractCapability",
    "AbstractToolset",
    "FunctionToolset",
    "Model",
    "ModelMessage",
    "ModelRequest",
    "ModelRequestContext",
    "ModelResponse",
    "NoOpTracer",
    "PreparedToolset",
    "RetryPromptPart",
    "RunContext",
    "SystemPromptPart",
    "TextPart",
    "ToolCallPart",
    "ToolDefinition",
    "UsageLimitExceeded",
    "ToolReturnPart",
    "UserPromptPart",
    "WrapperToolset",
]
