"""A decision span's handle and its life: opened, given its end attributes, ended.

The caller holds a :class:`Handle` (util-genai's invocation object, in
small): the span, the token of the context it made current and the start
clock; no module state carries a span anywhere else. :func:`open_span`
starts a span and makes it current, :func:`close_span` sets the attributes
and events built for its end (only when it records) and ends it,
:func:`end_span` detaches its context and ends it, each step on its own.

The open :class:`IterationScope` travels in the OpenTelemetry context (a
value of the context, like the current span), so the decision spans opened
inside it can be ended, with ``error.type`` and status ERROR, when an
exception the core does not contain (``KeyboardInterrupt``,
``SystemExit``) leaves their hooks half run.

Nothing here raises: a failure is logged as ``seamscope.telemetry.error``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from seamscope.telemetry import _attributes as a
from seamscope.telemetry import conventions as c
from seamscope.telemetry._logging import telemetry_error

__all__ = ["Handle", "IterationScope", "close_span", "end_span", "fail_span", "open_span"]

_INTERNAL = SpanKind.INTERNAL
_SCOPE_KEY = otel_context.create_key("iteration_scope")


class Handle:
    """An open span, its context token and its start clock (util-genai's
    invocation object, in small)."""

    __slots__ = ("done", "recording", "repeat", "span", "start", "token")

    def __init__(self, span: trace.Span, token: object) -> None:
        self.span = span
        self.token = token
        self.recording = span.is_recording()
        self.start = 0.0
        self.repeat = False  # a gate call re-deciding an output already decided
        self.done = False


def open_span(
    tracer: trace.Tracer,
    text: Callable[[object], str],
    name: str,
    attributes: dict[str, Any],
    conversation: str | None,
    agent: str | None,
    scope: IterationScope | None = None,
) -> Handle:
    """Start a span with ``attributes`` plus the conversation and agent (cut
    by ``text``), and make it current. ``scope``: the iteration scope this
    span opens (else the span joins the open iteration scope, if any)."""
    if conversation:
        attributes[c.ATTR_GEN_AI_CONVERSATION_ID] = text(conversation)
    if agent:
        attributes[c.ATTR_GEN_AI_AGENT_NAME] = text(agent)
    span = tracer.start_span(name, kind=_INTERNAL, attributes=attributes)
    ctx = trace.set_span_in_context(span)
    if scope is not None:
        ctx = otel_context.set_value(_SCOPE_KEY, scope, ctx)
    handle = Handle(span, otel_context.attach(ctx))
    if scope is None:
        open_scope = otel_context.get_value(_SCOPE_KEY, ctx)
        if isinstance(open_scope, IterationScope):
            open_scope.opened.append(handle)
    return handle


def end_span(hook: str, handle: Handle) -> None:
    """Detach and end: always, and each step on its own (never raises)."""
    if handle.done:
        return
    handle.done = True
    # a token holds the context it was made in: drop it once used
    token, handle.token = handle.token, None
    try:
        otel_context.detach(token)  # type: ignore[arg-type]
    except Exception as exc:
        telemetry_error(hook, exc)
    try:
        handle.span.end()
    except Exception as exc:
        telemetry_error(hook, exc)


def close_span(
    hook: str,
    handle: object,
    build: Callable[[], tuple[a.Attributes, Sequence[a.Event]]],
) -> None:
    """Set the end attributes and events ``build()`` gives on an open decision
    span (built only when it records), then end it."""
    if not isinstance(handle, Handle):
        return
    try:
        if handle.recording:
            attributes, events = build()
            span = handle.span
            span.set_attributes(attributes)
            for name, attrs in events:
                span.add_event(name, attrs)
    except Exception as exc:
        telemetry_error(hook, exc)
    end_span(hook, handle)


def fail_span(handle: Handle, exc: BaseException) -> None:
    """Mark the span with the exception's type as ``error.type`` and status ERROR."""
    if handle.recording:
        with contextlib.suppress(Exception):
            name = type(exc).__qualname__
            handle.span.set_attribute(c.ATTR_ERROR_TYPE, name)
            handle.span.set_status(Status(StatusCode.ERROR, name))


class IterationScope(contextlib.AbstractContextManager[object]):
    """The context manager :meth:`OTelObserver.iteration` returns: a
    ``seamscope.iteration`` span (entering it gives the span)."""

    __slots__ = ("_agent", "_conversation", "_handle", "_index", "_text", "_tracer", "opened")

    def __init__(
        self,
        tracer: trace.Tracer,
        text: Callable[[object], str],
        index: int,
        conversation: str | None,
        agent: str | None,
    ) -> None:
        self._tracer = tracer
        self._text = text
        self._index = index
        self._conversation = conversation
        self._agent = agent
        self._handle: Handle | None = None
        self.opened: list[Handle] = []  # the decision spans opened inside this iteration

    def __enter__(self) -> object:
        try:
            self._handle = open_span(
                self._tracer,
                self._text,
                c.SPAN_ITERATION,
                {c.ATTR_ITERATION_INDEX: self._index},
                self._conversation,
                self._agent,
                scope=self,
            )
            return self._handle.span
        except Exception as exc:
            telemetry_error("iteration", exc)
            return trace.INVALID_SPAN

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        handle = self._handle
        if handle is None:
            return
        if exc is not None:
            # decision spans an uncontained exception left open (their end hook
            # never ran): end them with the error, innermost first
            for inner in reversed(self.opened):
                if not inner.done:
                    inner.done = True
                    fail_span(inner, exc)
                    with contextlib.suppress(Exception):
                        inner.span.end()
            fail_span(handle, exc)
        self.opened.clear()
        end_span("iteration", handle)
