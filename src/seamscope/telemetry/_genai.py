"""Standard OpenTelemetry GenAI spans around seamscope's decision spans.

``invoke_agent {agent}`` per turn, ``chat {model}`` per model call,
``execute_tool {tool}`` per executed tool call, with ``gen_ai.*``
attributes, so any GenAI-aware backend renders the loop. An exception of
the loop crossing one of them is recorded (``error.type``, status ERROR;
:mod:`._invocation`'s one rule) and re-raised unchanged; a failure of
telemetry itself (a span processor that raises) is logged as
``seamscope.telemetry.error`` and never reaches the loop.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind

from seamscope import __version__
from seamscope.decisions.records import ModelUsage, tool_name
from seamscope.telemetry import conventions as c
from seamscope.telemetry._invocation import Invocation, start
from seamscope.telemetry._logging import telemetry_error

__all__ = ["DEFAULT_MAX_LENGTH", "GenAISpans", "tool_definitions"]

DEFAULT_MAX_LENGTH = 1024
"""``TelemetryConfig.max_attribute_length``'s default: the cut of a reported
string when the caller gives no length."""


def _cut(value: str, max_length: int) -> str:
    return value if len(value) <= max_length else value[: max_length - 1] + "…"


_MAX_DEFINITIONS = 64
"""Distinct tool lists whose ``gen_ai.tool.definitions`` text a GenAISpans remembers."""

# where a tool object keeps its parameters' JSON schema: the Agents SDK's FunctionTool,
# pydantic-ai's ToolDefinition, LangChain's BaseTool (a pydantic model of the arguments)
_SCHEMA_FIELDS = ("params_json_schema", "parameters_json_schema", "tool_call_schema", "args_schema")


def _function_of(tool: Mapping[str, Any]) -> Mapping[str, Any]:
    """An OpenAI-style ``{"type": "function", "function": {...}}`` dict's inner part."""
    inner = tool.get("function")
    return inner if isinstance(inner, Mapping) else tool


def _tool_type(tool: Any) -> str:
    declared = tool.get("type") if isinstance(tool, Mapping) else getattr(tool, "type", None)
    if isinstance(declared, str) and declared:
        return declared
    if isinstance(tool, str | Mapping) or any(hasattr(tool, f) for f in _SCHEMA_FIELDS):
        return "function"
    return type(tool).__name__  # a tool of another kind (a provider-hosted tool)


def _schema(tool: Any) -> Any:
    if isinstance(tool, Mapping):
        inner = _function_of(tool)
        return inner.get("parameters", inner.get("input_schema"))
    for name in _SCHEMA_FIELDS:
        value = getattr(tool, name, None)
        if isinstance(value, Mapping):
            return dict(value)
        if isinstance(value, type) and hasattr(value, "model_json_schema"):
            return value.model_json_schema()
    return None


def _description(tool: Any) -> Any:
    if isinstance(tool, Mapping):
        return _function_of(tool).get("description")
    return getattr(tool, "description", None)


def tool_definitions(
    tools: Sequence[Any],
    *,
    max_length: int = DEFAULT_MAX_LENGTH,
    max_items: int = 128,
    detail: bool = False,
    mask: Callable[[str], str] = str,
) -> str | None:
    """``gen_ai.tool.definitions``: the tools sent to the model, as the JSON
    array the GenAI conventions define (gen-ai-tool-definitions.json), in order.

    Each entry has the tool's ``type`` and ``name`` (``?`` when it cannot be
    read). The type is the tool's own declared one (a dict's ``type``, an
    object's ``type`` attribute), ``function`` for a function tool (a name, a
    dict, an object with a parameter schema: LangChain's tools, the Agents
    SDK's ``FunctionTool``, pydantic-ai's ``ToolDefinition``), else the class
    name of a tool of another kind (a provider-hosted tool). With ``detail``
    (content capture on, opt-in) an entry also has the tool's ``description``
    (through ``mask``) and ``parameters`` (its JSON schema) where it has them.

    The text is valid JSON of at most ``max_length`` characters listing at
    most ``max_items`` tools: an entry whose detail does not fit is listed
    without it, and the tools from the first one that does not fit even so are
    left out (the iteration's ``seamscope.selection.selected`` names them all).
    None when not even the first tool fits.
    """
    parts: list[str] = []
    size = 2  # the brackets
    for tool in tools[:max_items]:
        entry: dict[str, Any] = {"type": _tool_type(tool), "name": tool_name(tool) or "?"}
        bare = json.dumps(entry, separators=(",", ":"), default=str)
        text = bare
        if detail:
            description = _description(tool)
            if isinstance(description, str) and description:
                entry["description"] = mask(description)
            schema = _schema(tool)
            if isinstance(schema, Mapping):
                entry["parameters"] = schema
            text = json.dumps(entry, separators=(",", ":"), default=str)
        extra = len(text) + (1 if parts else 0)
        if size + extra > max_length:
            text = bare
            extra = len(text) + (1 if parts else 0)
            if size + extra > max_length:
                break
        parts.append(text)
        size += extra
    if tools and not parts:
        return None
    return "[" + ",".join(parts) + "]"


class GenAISpans:
    """Factory of the three GenAI span shapes on one tracer provider.

    Every name and id (agent, conversation, model, tool, call id) is cut to
    ``max_length`` characters, in the attributes and in the span names, as
    on seamscope's decision spans (``TelemetryConfig.max_attribute_length``);
    a chat span's tool definitions list at most ``max_items`` tools
    (``max_array_length``), their descriptions through ``mask``.
    """

    def __init__(
        self,
        tracer_provider: trace.TracerProvider | None = None,
        *,
        max_length: int = DEFAULT_MAX_LENGTH,
        max_items: int = 128,
        mask: Callable[[str], str] = str,
    ) -> None:
        provider = tracer_provider or trace.get_tracer_provider()
        self._tracer = provider.get_tracer("seamscope", __version__)
        self._max = max_length
        self._max_items = max_items
        self._mask = mask
        self._definitions: dict[tuple[Any, ...], tuple[tuple[Any, ...], str | None]] = {}

    @property
    def max_length(self) -> int:
        """The length names, ids and reported strings are cut to."""
        return self._max

    def _cut(self, value: Any) -> Any:
        return _cut(value, self._max) if isinstance(value, str) else value

    def _start(
        self,
        name: str,
        kind: SpanKind,
        attrs: dict[str, Any],
        parent: otel_context.Context | None,
    ) -> Invocation:
        return start(
            self._tracer,
            self._cut(name),
            {key: self._cut(value) for key, value in attrs.items()},
            kind=kind,
            parent=parent,
        )

    def start_agent(
        self,
        agent_name: str | None,
        *,
        parent: otel_context.Context | None = None,
        conversation_id: str | None = None,
    ) -> Invocation:
        """An ``invoke_agent {agent}`` span, a child of ``parent`` (default: the
        current context); ``with`` it for a block, or end it with ``stop()``/``fail()``."""
        name, attrs = _invoke_agent(agent_name, conversation_id)
        return self._start(name, SpanKind.INTERNAL, attrs, parent)

    def start_chat(
        self,
        model: str,
        *,
        parent: otel_context.Context | None = None,
        provider: str | None = None,
        conversation_id: str | None = None,
        agent_name: str | None = None,
    ) -> Invocation:
        """A ``chat {model}`` span (CLIENT), a child of ``parent`` (default: the
        current context)."""
        name, attrs = _chat(model, provider, conversation_id, agent_name)
        return self._start(name, SpanKind.CLIENT, attrs, parent)

    def start_tool(
        self,
        tool_name: str,
        *,
        parent: otel_context.Context | None = None,
        call_id: str | None = None,
        conversation_id: str | None = None,
    ) -> Invocation:
        """An ``execute_tool {tool}`` span, a child of ``parent`` (default: the current context)."""
        name, attrs = _execute_tool(tool_name, call_id, conversation_id)
        return self._start(name, SpanKind.INTERNAL, attrs, parent)

    @staticmethod
    def rename_chat(span: trace.Span, model: str) -> None:
        """Name a chat span after the model the response says answered (the
        model object named none); never raises."""
        with contextlib.suppress(Exception):
            if span.is_recording():
                span.update_name(f"chat {model}")
                span.set_attribute(c.ATTR_GEN_AI_REQUEST_MODEL, model)

    def record_tools(
        self,
        span: trace.Span,
        tools: Sequence[Any],
        *,
        detail: bool = False,
    ) -> None:
        """``gen_ai.tool.definitions`` on a recording chat span: the tools sent
        with this request (:func:`tool_definitions`; descriptions and schemas
        only with ``detail``, i.e. content capture on); never raises."""
        try:
            if not span.is_recording():
                return
            # one text per tool list: the same tool objects are sent call after call
            # (a framework's tool reads cost microseconds each); the memo holds the
            # tools, so no id in its keys is reused while it remembers them
            key = (detail, *map(id, tools))
            hit = self._definitions.get(key)
            if hit is None:
                text = tool_definitions(
                    tools,
                    max_length=self._max,
                    max_items=self._max_items,
                    detail=detail,
                    mask=self._mask,
                )
                if len(self._definitions) >= _MAX_DEFINITIONS:
                    self._definitions.clear()
                hit = self._definitions[key] = (tuple(tools), text)
            value = hit[1]
            if value is not None:
                span.set_attribute(c.ATTR_GEN_AI_TOOL_DEFINITIONS, value)
        except Exception as exc:
            telemetry_error("chat", exc)

    @staticmethod
    def mark_unavailable(span: trace.Span, chosen: str) -> None:
        """``seamscope.model.chosen_unavailable`` on a chat span whose model is not
        the PRE seam's choice (that one is not callable here); never raises."""
        with contextlib.suppress(Exception):
            span.set_attribute(c.ATTR_MODEL_CHOSEN_UNAVAILABLE, chosen)

    @staticmethod
    def mark_compacted(span: trace.Span) -> None:
        """``seamscope.conversation.compacted`` on a chat span whose prompt carries a
        compaction or an offload's stub; never raises."""
        with contextlib.suppress(Exception):
            span.set_attribute(c.ATTR_CONVERSATION_COMPACTED, True)

    @staticmethod
    def record_usage(
        span: trace.Span,
        usage: ModelUsage,
        response_model: str | None = None,
        *,
        max_length: int = DEFAULT_MAX_LENGTH,
    ) -> None:
        """Set ``gen_ai.usage.*`` (and the response model, a free string the
        caller reports, cut to ``max_length`` characters) on a chat span: the
        inference span only, never ``invoke_agent`` (a consumer sums the chat
        spans; semantic-conventions-genai #469)."""
        with contextlib.suppress(Exception):
            span.set_attribute(c.ATTR_GEN_AI_USAGE_INPUT_TOKENS, usage.input_tokens)
            span.set_attribute(c.ATTR_GEN_AI_USAGE_OUTPUT_TOKENS, usage.output_tokens)
            if usage.cache_read_tokens:
                span.set_attribute(
                    c.ATTR_GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS, usage.cache_read_tokens
                )
            if usage.cache_write_tokens:
                span.set_attribute(
                    c.ATTR_GEN_AI_USAGE_CACHE_WRITE_INPUT_TOKENS, usage.cache_write_tokens
                )
                # the name before semantic-conventions-genai #440, kept one release
                span.set_attribute(
                    c.ATTR_GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS, usage.cache_write_tokens
                )
            if response_model:
                span.set_attribute(
                    c.ATTR_GEN_AI_RESPONSE_MODEL, _cut(str(response_model), max_length)
                )


def _chat(
    model: str, provider: str | None, conversation_id: str | None, agent_name: str | None
) -> tuple[str, dict[str, Any]]:
    attrs: dict[str, Any] = {
        c.ATTR_GEN_AI_OPERATION_NAME: "chat",
        c.ATTR_GEN_AI_REQUEST_MODEL: model,
    }
    if provider:
        attrs[c.ATTR_GEN_AI_PROVIDER_NAME] = provider
    if conversation_id:
        attrs[c.ATTR_GEN_AI_CONVERSATION_ID] = conversation_id
    if agent_name:
        attrs[c.ATTR_GEN_AI_AGENT_NAME] = agent_name
    return f"chat {model}", attrs


def _execute_tool(
    tool_name: str, call_id: str | None, conversation_id: str | None
) -> tuple[str, dict[str, Any]]:
    attrs: dict[str, Any] = {
        c.ATTR_GEN_AI_OPERATION_NAME: "execute_tool",
        c.ATTR_GEN_AI_TOOL_NAME: tool_name,
    }
    if call_id is not None:  # an empty id too, as the dispatch span records it
        attrs[c.ATTR_GEN_AI_TOOL_CALL_ID] = call_id
    if conversation_id:
        attrs[c.ATTR_GEN_AI_CONVERSATION_ID] = conversation_id
    return f"execute_tool {tool_name}", attrs


def _invoke_agent(
    agent_name: str | None, conversation_id: str | None
) -> tuple[str, dict[str, Any]]:
    attrs: dict[str, Any] = {c.ATTR_GEN_AI_OPERATION_NAME: "invoke_agent"}
    if agent_name:
        attrs[c.ATTR_GEN_AI_AGENT_NAME] = agent_name
    if conversation_id:
        attrs[c.ATTR_GEN_AI_CONVERSATION_ID] = conversation_id
    return (f"invoke_agent {agent_name}" if agent_name else "invoke_agent"), attrs
