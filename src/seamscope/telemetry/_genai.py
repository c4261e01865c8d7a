"""Standard OpenTelemetry GenAI spans around seamscope's decision spans.

``invoke_agent {agent}`` per turn, ``chat {model}`` per model call,
``execute_tool {tool}`` per executed tool call, with ``gen_ai.*``
attributes, so any GenAI-aware backend renders the loop. An exception of
the loop crossing one of them is recorded (``error.type``, status ERROR)
and re-raised unchanged; a failure of telemetry itself (a span processor
that raises) is logged as ``seamscope.telemetry.error`` and never reaches
the loop.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from seamscope import __version__
from seamscope.decisions.records import ModelUsage
from seamscope.telemetry import conventions as c
from seamscope.telemetry._logging import telemetry_error

__all__ = ["GenAISpans"]


def _failed(span_name: str, exc: BaseException) -> None:
    telemetry_error(span_name.split(" ")[0], exc)


class GenAISpans:
    """Factory of the three GenAI span shapes on one tracer provider."""

    def __init__(self, tracer_provider: trace.TracerProvider | None = None) -> None:
        provider = tracer_provider or trace.get_tracer_provider()
        self._tracer = provider.get_tracer("seamscope", __version__)

    @contextlib.contextmanager
    def _span(self, name: str, kind: SpanKind, attrs: dict[str, Any]) -> Iterator[trace.Span]:
        span: trace.Span = trace.INVALID_SPAN
        token: object = None
        try:
            span = self._tracer.start_span(name, kind=kind, attributes=attrs)
            token = otel_context.attach(trace.set_span_in_context(span))
        except Exception as exc:  # telemetry failed: the loop goes on
            _failed(name, exc)
        try:
            yield span
        except BaseException as exc:
            with contextlib.suppress(Exception):
                if span.is_recording():
                    span.set_attribute(c.ATTR_ERROR_TYPE, type(exc).__qualname__)
                    span.set_status(Status(StatusCode.ERROR, type(exc).__qualname__))
            raise
        finally:
            try:
                if token is not None:
                    otel_context.detach(token)  # type: ignore[arg-type]
            finally:
                try:
                    span.end()
                except Exception as exc:
                    _failed(name, exc)

    def invoke_agent(
        self, agent_name: str | None, *, conversation_id: str | None = None
    ) -> contextlib.AbstractContextManager[trace.Span]:
        attrs: dict[str, Any] = {c.ATTR_GEN_AI_OPERATION_NAME: "invoke_agent"}
        if agent_name:
            attrs[c.ATTR_GEN_AI_AGENT_NAME] = agent_name
        if conversation_id:
            attrs[c.ATTR_GEN_AI_CONVERSATION_ID] = conversation_id
        name = f"invoke_agent {agent_name}" if agent_name else "invoke_agent"
        return self._span(name, SpanKind.INTERNAL, attrs)

    def chat(
        self,
        model: str,
        *,
        provider: str | None = None,
        conversation_id: str | None = None,
        agent_name: str | None = None,
    ) -> contextlib.AbstractContextManager[trace.Span]:
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
        return self._span(f"chat {model}", SpanKind.CLIENT, attrs)

    def execute_tool(
        self,
        tool_name: str,
        *,
        call_id: str | None = None,
        conversation_id: str | None = None,
    ) -> contextlib.AbstractContextManager[trace.Span]:
        attrs: dict[str, Any] = {
            c.ATTR_GEN_AI_OPERATION_NAME: "execute_tool",
            c.ATTR_GEN_AI_TOOL_NAME: tool_name,
        }
        if call_id is not None:  # an empty id too, as the dispatch span records it
            attrs[c.ATTR_GEN_AI_TOOL_CALL_ID] = call_id
        if conversation_id:
            attrs[c.ATTR_GEN_AI_CONVERSATION_ID] = conversation_id
        return self._span(f"execute_tool {tool_name}", SpanKind.INTERNAL, attrs)

    @staticmethod
    def record_usage(
        span: trace.Span, usage: ModelUsage, response_model: str | None = None
    ) -> None:
        """Set ``gen_ai.usage.*`` (and the response model) on a chat span."""
        with contextlib.suppress(Exception):
            span.set_attribute(c.ATTR_GEN_AI_USAGE_INPUT_TOKENS, usage.input_tokens)
            span.set_attribute(c.ATTR_GEN_AI_USAGE_OUTPUT_TOKENS, usage.output_tokens)
            if usage.cache_read_tokens:
                span.set_attribute(
                    c.ATTR_GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS, usage.cache_read_tokens
                )
            if usage.cache_write_tokens:
                span.set_attribute(
                    c.ATTR_GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS, usage.cache_write_tokens
                )
            if response_model:
                span.set_attribute(c.ATTR_GEN_AI_RESPONSE_MODEL, response_model)
