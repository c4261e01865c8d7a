"""A span held open across framework hooks that run in different tasks or threads.

A framework calls an adapter's hooks one by one, each in a context of its
own (an asyncio task, a LangGraph node, a thread): a span made current in
one hook is gone in the next, and a context token reset in another
context than the one that created it is an error. :class:`Held` enters a
span's ``with`` form (an ``invoke_agent``, an iteration, a ``chat`` or an
``execute_tool`` scope) in a private :class:`contextvars.Context` it owns,
under the OpenTelemetry context it is given, and exits it in that same
context, once, from whichever hook ends it: :meth:`Held.stop` or
:meth:`Held.fail` (util-genai's ``stop_llm``/``fail_llm``;
:class:`seamscope._internal.Invocation` is the same form for a span that
needs no ``with`` scope). Hooks attach :attr:`Held.context` for their own
duration; nothing is attached in a hook's context. Never raises: a failure
to enter or exit is reported to ``failed(what)`` and the hooks go on
under the parent context.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from opentelemetry import context as otel_context

from seamscope.loop import Iteration, Turn

__all__ = ["Held", "RunSpans"]

_T = TypeVar("_T")


class Held(Generic[_T]):
    """A span's ``with`` scope entered now and exited once, later, anywhere.

    ``factory``: makes the scope (called once, here); ``parent``: the
    OpenTelemetry context the span is a child of (None: the caller's current
    one); ``what``: the hook name a failure is reported under, to
    ``failed``. :attr:`value` is what the scope's ``__enter__`` returned
    (None when it failed); :attr:`context` the OpenTelemetry context with
    the span current (the parent when entering failed).
    """

    __slots__ = ("_failed", "_lock", "_private", "_scope", "_what", "context", "value")

    def __init__(
        self,
        factory: Callable[[], contextlib.AbstractContextManager[_T]],
        *,
        parent: otel_context.Context | None = None,
        what: str,
        failed: Callable[[str], None],
    ) -> None:
        self._what = what
        self._failed = failed
        self._lock = threading.Lock()
        self._scope: contextlib.AbstractContextManager[_T] | None = None
        self.value: _T | None = None
        base = otel_context.get_current() if parent is None else parent
        self.context: otel_context.Context = base
        # an empty context, not a copy of the hook's: a copy would keep the
        # framework's own context variables (its config, its run) alive
        self._private = contextvars.Context()

        def enter() -> tuple[contextlib.AbstractContextManager[_T], _T, otel_context.Context]:
            otel_context.attach(base)  # the private context's own: never detached
            scope = factory()
            value = scope.__enter__()
            return scope, value, otel_context.get_current()

        try:
            self._scope, self.value, self.context = self._private.run(enter)
        except Exception:
            failed(what)

    @property
    def ended(self) -> bool:
        """Whether the span was ended (or never started)."""
        with self._lock:
            return self._scope is None

    @contextlib.contextmanager
    def current(self, passes: tuple[type[BaseException], ...] = ()) -> Iterator[_T | None]:
        """:attr:`context` made current for a block of one hook (the ``with``
        form, for a span around a handler the hook calls): the block's own
        exception ends the span with its ``error.type`` (one of ``passes``, a
        pause rather than a failure, ends it as stopped) and is re-raised
        unchanged; a block that returns leaves the span open for :meth:`stop`."""
        token: contextvars.Token[otel_context.Context] | None = None
        try:
            token = otel_context.attach(self.context)
        except Exception:
            self._failed(f"{self._what}.context_attach")
        try:
            yield self.value
        except BaseException as exc:
            self.end(None if isinstance(exc, passes) else exc)
            raise
        finally:
            if token is not None:
                try:
                    otel_context.detach(token)
                except Exception:
                    self._failed(f"{self._what}.context_detach")

    def stop(self) -> None:
        """End the span (a second stop or fail does nothing)."""
        self.end(None)

    def fail(self, exc: BaseException) -> None:
        """Record ``exc`` on the span (``error.type``, status ERROR), then end it."""
        self.end(exc)

    def end(self, exc: BaseException | None) -> None:
        """:meth:`fail` with ``exc``, or :meth:`stop` when it is None."""
        with self._lock:
            scope, self._scope = self._scope, None
        if scope is None:
            return
        try:
            if exc is None:
                self._private.run(scope.__exit__, None, None, None)
            else:
                self._private.run(scope.__exit__, type(exc), exc, exc.__traceback__)
        except Exception:
            self._failed(self._what)


class RunSpans:
    """The long-lived spans of one agent run, held across its hooks: the run's
    ``invoke_agent`` (when the adapter opens one) and its open iteration (one
    at a time: starting the next ends the last).

    :attr:`context` is the OpenTelemetry context a hook attaches for its
    decisions: the open iteration's, else the ``invoke_agent``'s, else the
    context current when the run was made. The caller serializes calls (its
    run's lock); every method is contained and never raises.
    """

    __slots__ = ("_agent", "_base", "_failed", "_iteration", "_prefix")

    def __init__(
        self,
        prefix: str,
        failed: Callable[[str], None],
        *,
        base: otel_context.Context | None = None,
    ) -> None:
        self._prefix = prefix
        self._failed = failed
        self._base = otel_context.get_current() if base is None else base
        self._agent: Held[object] | None = None
        self._iteration: Held[object] | None = None

    @property
    def base(self) -> otel_context.Context:
        """The context the run started under (its ``invoke_agent``'s parent)."""
        return self._base

    @property
    def agent_context(self) -> otel_context.Context:
        """The context with the run's ``invoke_agent`` current (else the base),
        also once it ended."""
        return self._base if self._agent is None else self._agent.context

    @property
    def context(self) -> otel_context.Context:
        """The context the run's hooks attach: the open iteration's, else
        :attr:`agent_context`."""
        held = self._iteration
        return self.agent_context if held is None or held.ended else held.context

    def open_agent(
        self,
        factory: Callable[[], contextlib.AbstractContextManager[object]],
        parent: otel_context.Context | None = None,
    ) -> None:
        """Start the run's ``invoke_agent`` span under ``parent`` (None: the base)."""
        if parent is not None:
            self._base = parent
        self._agent = Held(
            factory,
            parent=self._base,
            what=f"{self._prefix}.invoke_agent_start",
            failed=self._failed,
        )

    def start_iteration(self, turn: Turn) -> Iteration:
        """End the open iteration and start the turn's next one, under the
        ``invoke_agent`` span."""
        self.end_iteration(None)
        iteration, scope = turn.open_iteration()
        self._iteration = Held(
            lambda: scope,
            parent=self.agent_context,
            what=f"{self._prefix}.iteration_start",
            failed=self._failed,
        )
        return iteration

    def end_iteration(self, exc: BaseException | None = None) -> None:
        """End the open iteration (with ``exc``'s ``error.type``, if any)."""
        held, self._iteration = self._iteration, None
        if held is not None:
            held.end(exc)

    def close(self, exc: BaseException | None = None) -> None:
        """End the open iteration, then the ``invoke_agent`` span (with ``exc``)."""
        self.end_iteration(exc)
        if self._agent is not None:
            self._agent.end(exc)  # its context stays: a continuation starts under it
