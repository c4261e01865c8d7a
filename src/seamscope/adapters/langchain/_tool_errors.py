"""What a tool call's error result stands for: the ``error.type`` of what the tool raised.

LangGraph's tool runner turns some exceptions into an error ``ToolMessage``
before the result reaches seamscope's ``wrap_tool_call`` (arguments the
tool's schema rejected: ``ToolInvocationError``; an error middleware inside
seamscope's hook: any exception), and a tool with ``handle_tool_error``
answers its own ``ToolException`` with one. The exception is then gone
from the result, but LangChain's callbacks saw it: a :class:`ToolOutcome`
handler, added through ``register_configure_hook`` (public
``langchain_core.tracers.context`` API) to every callback manager
configured while :data:`TOOL_OUTCOME` holds it, hears the tool run of one
call id (``on_tool_start``/``on_tool_error``/``on_tool_end``).

:meth:`ToolOutcome.error_type` then names it: the exception the tool run
raised (unwrapped with the kit's ``error_type``); a pydantic
``ValidationError`` is what LangGraph's tool runner raises as
``ToolInvocationError`` (it wraps every one that leaves the tool); a tool
run that ended without raising, answering an error from a tool that
handles ``ToolException`` and not validation errors, handled a
``ToolException`` (a subclass is named by that base: its own type is
gone); ``None`` when nothing says more (the adapter's
``tool_error_result``).
"""

from __future__ import annotations

import contextvars
from typing import Any

from pydantic import ValidationError

from seamscope.adapters._kit import error_type
from seamscope.adapters.langchain._framework import (
    BaseCallbackHandler,
    ToolMessage,
    register_configure_hook,
)

__all__ = ["INVOCATION_ERROR", "TOOL_EXCEPTION", "TOOL_OUTCOME", "ToolOutcome"]

INVOCATION_ERROR = "ToolInvocationError"
"""LangGraph's exception for a call whose arguments the tool rejected."""

TOOL_EXCEPTION = "ToolException"
"""LangChain's exception a tool with ``handle_tool_error`` answers itself."""


class ToolOutcome(BaseCallbackHandler):
    """The tool run of one tool call id, as LangChain's callbacks report it."""

    run_inline = True  # called where the run happens, in its context

    def __init__(self, call_id: str) -> None:
        super().__init__()
        self.call_id = call_id
        self.run_id: Any = None
        self.error: BaseException | None = None
        self.output: Any = None

    def on_tool_start(self, serialized: Any, input_str: Any, **kwargs: Any) -> None:
        if self.run_id is None and kwargs.get("tool_call_id") == self.call_id:
            self.run_id = kwargs.get("run_id")

    def on_tool_error(self, error: BaseException, **kwargs: Any) -> None:
        if kwargs.get("tool_call_id") == self.call_id or (
            self.run_id is not None and kwargs.get("run_id") == self.run_id
        ):
            self.error = error

    def on_tool_end(self, output: Any, **kwargs: Any) -> None:
        if self.run_id is not None and kwargs.get("run_id") == self.run_id:
            self.output = output

    def error_type(self, tool: Any) -> str | None:
        """The ``error.type`` of this call's error result (``tool``: the
        ``BaseTool`` that ran it); None when nothing says more."""
        if self.error is not None:
            if isinstance(self.error, ValidationError):
                return INVOCATION_ERROR
            return error_type(self.error)
        ended = self.output
        if (
            isinstance(ended, ToolMessage)
            and ended.status == "error"
            and getattr(tool, "handle_tool_error", None)
            and not getattr(tool, "handle_validation_error", None)
        ):
            return TOOL_EXCEPTION
        return None


TOOL_OUTCOME: contextvars.ContextVar[ToolOutcome | None] = contextvars.ContextVar(
    "seamscope_tool_outcome", default=None
)
"""The outcome handler of the tool call whose hook runs in this context."""
# every callback manager configured while the variable holds a handler gets it
register_configure_hook(TOOL_OUTCOME, True)
