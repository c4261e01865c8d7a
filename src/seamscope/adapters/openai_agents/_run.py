"""One agent run's spans and decision state, and the offloaded outputs.

A :class:`Run` is one ``Runner.run``/``run_streamed``/``run_sync``: its
``invoke_agent`` and iteration spans, the ``execute_tool`` spans still
open, and what the input filter learnt for the next model call.
:class:`Outputs` holds offloaded tool outputs for the recall tool and for
the input filter that stubs them. :func:`failed` records seamscope's own
contained failures for every module of the adapter.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from opentelemetry import context as otel_context

from seamscope.adapters import _hooks
from seamscope.adapters._outputs import Outputs
from seamscope.adapters.loop import DecisionLayer, Iteration, Turn
from seamscope.decisions import Message, ModelUsage, ToolCall

__all__ = ["LOG", "Held", "Outputs", "Run", "attached", "contained", "failed", "new_turn"]

LOG = logging.getLogger("seamscope.adapters.openai_agents")
"""The adapter's stdlib logger (the package's name, whichever module logs)."""

_T = TypeVar("_T")


def failed(hook: str) -> None:
    """Record a contained failure of seamscope's own code (call it in ``except``)."""
    _hooks.failed(hook, LOG)


def attached(context: Any) -> contextlib.AbstractContextManager[None]:
    """An OpenTelemetry context made current for a block of one hook (same task)."""
    return _hooks.attached(context, "openai_agents", LOG)


def contained(
    factory: Callable[[], contextlib.AbstractContextManager[_T]] | None, what: str
) -> contextlib.AbstractContextManager[_T | None]:
    """Enter a telemetry context manager without letting it break the body."""
    return _hooks.contained(factory, what, LOG)


class Held:
    """A span's context manager entered in a private copy of a context and
    exited later, from whichever task or callback ends it (once)."""

    def __init__(
        self,
        context: contextvars.Context,
        factory: Callable[[], contextlib.AbstractContextManager[Any]],
        what: str,
    ) -> None:
        self._what = what
        self._context = context.run(contextvars.copy_context)
        self._manager: contextlib.AbstractContextManager[Any] | None = None
        self.value: Any = None
        try:
            manager = factory()
            self.value = self._context.run(manager.__enter__)
            self._manager = manager
        except Exception:
            failed(what)

    @property
    def otel(self) -> Any:
        """The OpenTelemetry context with this span current."""
        return self._context.run(otel_context.get_current)

    def exit(self, exc: BaseException | None = None) -> None:
        manager, self._manager = self._manager, None
        if manager is None:
            return
        try:
            if exc is None:
                self._context.run(manager.__exit__, None, None, None)
            else:
                self._context.run(manager.__exit__, type(exc), exc, exc.__traceback__)
        except Exception:
            failed(self._what)


class Run:
    """The spans and decision state of one agent run.

    The SDK runs hooks, the model and each tool in tasks of their own, so a
    span made current in one of them is gone in the next. The run keeps its
    own ``contextvars.Context`` in which the long-lived ``invoke_agent`` and
    iteration spans are entered and exited (so their context tokens match),
    and hands out the OpenTelemetry context each hook attaches. An
    ``execute_tool`` span lives from ``on_tool_start`` to ``on_tool_end``
    in a :class:`Held` copy of it.
    """

    def __init__(self, key: str, turn: Turn, scope: str) -> None:
        self.key = key
        self.turn = turn
        self.scope = scope
        self.lock = threading.RLock()
        self.closed = False
        self.iteration: Iteration | None = None
        self.usage: ModelUsage | None = None
        self.agent: Any = None
        self.carried: tuple[str, ...] = ()
        self._context = contextvars.copy_context()
        self._agent: contextlib.AbstractContextManager[Any] | None = None
        self._iteration: contextlib.AbstractContextManager[Any] | None = None
        self._agent_otel: Any = None
        self._otel: Any = None
        self._tools: dict[str, tuple[Held, ToolCall, list[BaseException]]] = {}
        # the caller's own RunConfig (nested runs get a copy of it of their own)
        self.base_config: Any = None
        # nested runs (``Agent.as_tool``) by the call id of the tool that runs them
        self.nested: dict[str, Run] = {}
        # a nested run: no run hooks reach it, so it opens its tools' spans
        # itself (when their calls are dispatched; closed when their output is back)
        self.hookless = False
        self.parent: Run | None = None  # the run whose agent tool runs this one

    @property
    def otel(self) -> Any:
        """The OpenTelemetry context the hooks attach (None when unavailable)."""
        return self._otel

    @property
    def agent_otel(self) -> Any:
        """The context with the run's ``invoke_agent`` span current."""
        return self._agent_otel

    @property
    def context(self) -> contextvars.Context:
        return self._context

    def open(self, agent_name: str | None = None, parent: Any = None) -> None:
        """Start the ``invoke_agent`` span (named by ``agent_name``, default the
        layer's), under ``parent`` (an OpenTelemetry context; None: the current)."""
        layer = self.turn.layer
        try:
            manager = layer.genai.invoke_agent(
                agent_name or layer.agent_name, conversation_id=self.turn.conversation_id
            )
            if parent is not None:
                self._context.run(otel_context.attach, parent)  # private: never detached
            self._context.run(manager.__enter__)
            self._agent = manager
            self._agent_otel = self._otel = self._context.run(otel_context.get_current)
        except Exception:
            failed("openai_agents.invoke_agent_start")

    def start_iteration(self, messages: Sequence[Message], role: str | None) -> Iteration:
        """End the open iteration and start the next one (one per model call)."""
        with self.lock:
            self._end_iteration(None)
            turn = self.turn
            turn.messages = list(messages)
            turn.role = role
            manager = turn.iteration()
            try:
                iteration: Iteration = self._context.run(manager.__enter__)
                self._iteration = manager
                self._otel = self._context.run(otel_context.get_current)
            except Exception:
                failed("openai_agents.iteration_start")
                iteration = Iteration(turn, max(turn.iterations - 1, 0))
            self.iteration = iteration
            self.usage = None
            return iteration

    # -- tool spans ---------------------------------------------------------------

    def open_tool(self, call: ToolCall) -> None:
        with self.lock:
            it = self.iteration
            if it is None or self.closed:
                return
            held = Held(self._context, lambda: it.execute_tool(call), "openai_agents.tool_span")
            self._tools[call.id] = (held, call, [])

    def tool_otel(self, call_id: str) -> Any:
        """The OpenTelemetry context with an open tool's ``execute_tool`` span current."""
        with self.lock:
            entry = self._tools.get(call_id)
        return None if entry is None else entry[0].otel

    def has_tool(self, call_id: str) -> bool:
        with self.lock:
            return call_id in self._tools

    def tool_error(self, call_id: str, error: BaseException) -> None:
        """The tool raised and the SDK answered the model with an error message
        (a nested run passes on the error of the agent tool that runs it: the
        SDK reports it through the tool context's configuration, the nested
        run's)."""
        with self.lock:
            entry = self._tools.get(call_id)
            if entry is not None:
                entry[2].append(error)
                return
        if self.parent is not None:
            self.parent.tool_error(call_id, error)

    def close_tool(self, call_id: str, output: Any) -> ToolCall | None:
        """End a tool's span (recording the error it raised); the call it ran."""
        with self.lock:
            entry = self._tools.pop(call_id, None)
            nested = self.nested.pop(call_id, None)
        if nested is not None:
            # the agent tool's own run ends before its tool (with the error it raised)
            nested.close(entry[2][0] if entry is not None and entry[2] else None)
        if entry is None:
            return None
        held, call, errors = entry
        it = self.iteration
        if it is not None and not errors and held.value is not None:
            try:
                it.tool_result(held.value, output)
            except Exception:
                failed("openai_agents.tool_result")
        held.exit(errors[0] if errors else None)
        return call

    # -- the end ------------------------------------------------------------------

    def _end_iteration(self, exc: BaseException | None) -> None:
        manager, self._iteration = self._iteration, None
        self._otel = self._agent_otel
        self._exit(manager, exc, "openai_agents.iteration_end")

    def _exit(self, manager: Any, exc: BaseException | None, hook: str) -> None:
        if manager is None:
            return
        try:
            if exc is None:
                self._context.run(manager.__exit__, None, None, None)
            else:
                self._context.run(manager.__exit__, type(exc), exc, exc.__traceback__)
        except Exception:
            failed(hook)

    def close(self, exc: BaseException | None = None) -> None:
        """End every span of the run still open (with the run's exception, if any)."""
        with self.lock:
            if self.closed:
                return
            self.closed = True
            nested, self.nested = list(self.nested.values()), {}
            for run in nested:
                run.close(exc)
            tools, self._tools = list(self._tools.values()), {}
            for held, _, errors in tools:
                held.exit(errors[0] if errors else exc)
            self._end_iteration(exc)
            manager, self._agent = self._agent, None
            self._exit(manager, exc, "openai_agents.invoke_agent_end")


def new_turn(
    layer: DecisionLayer, conversation_id: str | None, scope: Mapping[str, Any] | None
) -> Turn:
    """The Turn a run's iterations belong to (role set per iteration)."""
    return Turn(layer, conversation_id, [], None, {}, scope)
