"""One span's life, the one shape every seamscope span has (util-genai's
invocation): started, made current for blocks, ended once.

:func:`start` starts a span under a parent context (default: the current
one) and returns its :class:`Invocation`: the span, :attr:`Invocation.context`
(the parent with the span current) and the start clock. Starting attaches
nothing: a hook hands :attr:`~Invocation.context` to what runs inside the
span, or makes it current for one block with :meth:`~Invocation.current`.
The span ends once, from any task or thread, with :meth:`~Invocation.stop`
or :meth:`~Invocation.fail`; the ``with`` form (``with start(...) as inv``)
is sugar: the context is current for the block, and the block's exception
fails the span and is re-raised unchanged.

An invocation started as an *owner* (the iteration) is found through the
context by the decision spans started inside it (*joined*): when the owner
fails (an exception the core does not contain, ``KeyboardInterrupt``, left
their hooks half run), the joined spans still open end with the same
``error.type``, innermost first.

``error.type`` has one rule, :func:`error_type`, and one writer,
:func:`record_error`. Nothing here raises into the loop: a failure of
telemetry itself is logged as ``seamscope.telemetry.error``.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from seamscope.telemetry import conventions as c
from seamscope.telemetry._logging import telemetry_error

__all__ = ["Invocation", "attached", "error_type", "held", "record_error", "start"]

_OWNER = otel_context.create_key("seamscope_owner")

# A framework's exception that only carries the user's code's own exception
# (raised from it): (its module's top package, its class name).
_WRAPPERS = frozenset(
    {
        ("agents", "UserError"),  # the Agents SDK around a tool's exception
        ("pydantic_ai", "ToolRetryError"),  # pydantic-ai around a ModelRetry
        ("strands", "EventLoopException"),  # Strands around a later cycle's error
    }
)


def error_type(exc: BaseException) -> str:
    """The ``error.type`` of an exception: the qualified class name of what the
    user's code raised, through the wrappers a framework puts around it (an
    exception of a wrapper class raised from another, ``__cause__``)."""
    seen = 0
    while seen < 8:
        kind = type(exc)
        top = (kind.__module__ or "").split(".", 1)[0]
        cause = exc.__cause__
        if (top, kind.__name__) not in _WRAPPERS or cause is None:
            break
        exc = cause
        seen += 1
    return type(exc).__qualname__


def record_error(span: trace.Span, exc: BaseException | str) -> None:
    """``error.type`` (:func:`error_type` of an exception, or the given value)
    and status ERROR on a recording span: the one writer of a span's failure;
    never raises."""
    with contextlib.suppress(Exception):
        if span.is_recording():
            name = exc if isinstance(exc, str) else error_type(exc)
            span.set_attribute(c.ATTR_ERROR_TYPE, name)
            span.set_status(Status(StatusCode.ERROR, name))


class Invocation:
    """An open span: :attr:`span`, :attr:`context` (the parent context with the
    span current), :attr:`start` (a clock the owner may set) and whether it
    records; ended once by :meth:`stop`, :meth:`fail` or :meth:`end`."""

    __slots__ = (
        "_ended",
        "_joined",
        "_lock",
        "_scope",
        "_token",
        "context",
        "recording",
        "span",
        "start",
        "what",
    )

    def __init__(
        self,
        span: trace.Span,
        context: otel_context.Context,
        *,
        scope: contextlib.AbstractContextManager[object] | None = None,
        what: str = "span",
    ) -> None:
        self.span = span
        self.what = what
        """The hook name a failure of this span's telemetry is logged under."""
        self.context = context
        self.recording = span.is_recording()
        self.start = 0.0
        self._ended = False
        self._lock = threading.Lock()
        self._joined: list[Invocation] | None = None
        self._token: object = None
        # an observer's own iteration scope (not seamscope's): exited at the end
        self._scope = scope

    @property
    def ended(self) -> bool:
        """Whether :meth:`stop`, :meth:`fail` or :meth:`end` ran."""
        return self._ended

    def stop(self) -> None:
        """End the span (a second end does nothing)."""
        self.end(None)

    def fail(self, exc: BaseException | str) -> None:
        """Record ``error.type`` and status ERROR (:func:`record_error`), then end
        the span; an owner first fails the joined spans still open."""
        self.end(exc)

    def end(self, exc: BaseException | str | None, *, hook: str | None = None) -> None:
        """:meth:`fail` with ``exc``, or :meth:`stop` when it is None (``hook``:
        the name a failure to end is logged under, default :attr:`what`)."""
        with self._lock:
            if self._ended:
                return
            self._ended = True
        if exc is not None:
            joined, self._joined = self._joined, None
            for inner in reversed(joined or ()):
                inner.end(exc)  # innermost first; an ended one does nothing
            record_error(self.span, exc)
        self._joined = None
        self._detach()
        scope, self._scope = self._scope, None
        if scope is not None:
            try:
                if isinstance(exc, BaseException):
                    scope.__exit__(type(exc), exc, exc.__traceback__)
                else:
                    scope.__exit__(None, None, None)
            except Exception as error:
                telemetry_error(hook or self.what, error)
        try:
            self.span.end()
        except Exception as error:
            telemetry_error(hook or self.what, error)

    # -- current for a block ----------------------------------------------------------

    def attach(self) -> None:
        """Make :attr:`context` current until the span ends (a decision span
        opened in one hook call and ended in the next of the same stack)."""
        try:
            self._token = otel_context.attach(self.context)
        except Exception as exc:
            telemetry_error("context_attach", exc)

    def _detach(self) -> None:
        token, self._token = self._token, None
        if token is not None:
            _detach(token, self.context)

    @contextlib.contextmanager
    def current(self, passes: tuple[type[BaseException], ...] = ()) -> Iterator[Invocation]:
        """:attr:`context` current for one block (one hook's part of the span):
        the block's exception ends the span with its ``error.type`` (one of
        ``passes``, a framework's pause rather than a failure, ends it as
        stopped) and is re-raised unchanged; a block that returns leaves the
        span open."""
        with attached(self.context):
            try:
                yield self
            except BaseException as exc:
                self.end(None if isinstance(exc, passes) else exc)
                raise

    def __enter__(self) -> Invocation:
        self.attach()
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        self.end(exc)


def _detach(token: object, context: otel_context.Context) -> None:
    """Detach ``token`` where it was attached: a block left in another context
    (or one whose inner context was never detached) leaves the token alone
    rather than detaching in the wrong place."""
    try:
        if otel_context.get_current() is context:
            otel_context.detach(token)  # type: ignore[arg-type]
    except Exception as exc:
        telemetry_error("context_detach", exc)


@contextlib.contextmanager
def attached(context: otel_context.Context | None) -> Iterator[None]:
    """``context`` current for one block of a hook (None: leave the current
    one): the one way a hook runs under a span it does not end."""
    token: object = None
    if context is not None:
        try:
            token = otel_context.attach(context)
        except Exception as exc:
            telemetry_error("context_attach", exc)
    try:
        yield
    finally:
        if token is not None:
            _detach(token, context)  # type: ignore[arg-type]


def start(
    tracer: trace.Tracer,
    name: str,
    attributes: dict[str, Any],
    *,
    kind: SpanKind = SpanKind.INTERNAL,
    parent: otel_context.Context | None = None,
    owner: bool = False,
    join: bool = False,
    scope: contextlib.AbstractContextManager[object] | None = None,
    hook: str | None = None,
) -> Invocation:
    """Start a span under ``parent`` (None: the current context); never raises
    (a failure gives an invocation of the invalid span under the parent).

    ``owner``: the joined spans started inside it are failed with it;
    ``join``: this span joins the owner in its parent context, if any;
    ``scope``: an observer's own iteration scope, exited when this ends;
    ``hook``: the name a failure of this span's telemetry is logged under
    (default: the span name's first word).
    """
    what = hook or name.split(" ", 1)[0]
    base = otel_context.get_current() if parent is None else parent
    try:
        span = tracer.start_span(name, context=base, kind=kind, attributes=attributes)
        context = trace.set_span_in_context(span, base)
        invocation = Invocation(span, context, scope=scope, what=what)
    except Exception as exc:
        telemetry_error(what, exc)
        return Invocation(trace.INVALID_SPAN, base, scope=scope, what=what)
    if owner:
        invocation._joined = []
        invocation.context = otel_context.set_value(_OWNER, invocation, invocation.context)
    elif join:
        found = otel_context.get_value(_OWNER, base)
        if isinstance(found, Invocation) and found._joined is not None:
            found._joined.append(invocation)
    return invocation


def held(scope: contextlib.AbstractContextManager[object]) -> Invocation:
    """An observer's own iteration scope (not an :class:`Invocation`), entered
    now and exited when the returned invocation ends (its span is the invalid
    span: the scope records what it records)."""
    base = otel_context.get_current()
    try:
        scope.__enter__()
    except Exception as exc:
        telemetry_error("iteration", exc)
        return Invocation(trace.INVALID_SPAN, base, what="iteration")
    return Invocation(trace.INVALID_SPAN, base, scope=scope, what="iteration")
