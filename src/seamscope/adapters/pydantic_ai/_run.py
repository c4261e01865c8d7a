"""One agent run's decision state and spans, and the offloaded outputs.

A :class:`Run` is one ``Agent.run``/``run_sync``/``run_stream``/``iter``:
its iteration spans (one per model request step) and what the request
hooks learnt for the tool hooks. :class:`Outputs` holds offloaded tool
outputs for the recall tool. :func:`failed` records seamscope's own
contained failures for every module of the adapter.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from opentelemetry import context as otel_context

from seamscope.adapters import _hooks
from seamscope.adapters.loop import ChatCall, Iteration, Turn
from seamscope.adapters.pydantic_ai._translate import Offloaded
from seamscope.decisions import Message, ModelUsage

__all__ = ["LOG", "Outputs", "Run", "attached", "contained", "failed"]

LOG = logging.getLogger("seamscope.adapters.pydantic_ai")
"""The adapter's stdlib logger (the package's name, whichever module logs)."""

_T = TypeVar("_T")


def failed(hook: str) -> None:
    """Record a contained failure of seamscope's own code (call it in ``except``)."""
    _hooks.failed(hook, LOG)


def attached(context: Any) -> contextlib.AbstractContextManager[None]:
    """An OpenTelemetry context made current for a block of one hook (same task)."""
    return _hooks.attached(context, "pydantic_ai", LOG)


def contained(
    factory: Callable[[], contextlib.AbstractContextManager[_T]] | None, what: str
) -> contextlib.AbstractContextManager[_T | None]:
    """Enter a telemetry context manager without letting it break the body."""
    return _hooks.contained(factory, what, LOG)


class Run:
    """The decision state and iteration spans of one agent run.

    pydantic-ai calls the request hooks of one step (``prepare_tools``,
    ``wrap_model_request``, ``after_model_request``) and the tool hooks of
    that step's calls (each in a task of its own) in turn. An iteration
    lives from the step's first hook to the next step (or the run's end),
    longer than any one hook: it is entered and exited in the run's own
    ``contextvars.Context`` (so its context token matches), and each hook
    attaches the OpenTelemetry context :attr:`otel` for its decisions.

    ``own_spans``: whether seamscope opens the GenAI ``chat`` and
    ``execute_tool`` spans (False when pydantic-ai's own instrumentation
    does).
    """

    def __init__(self, turn: Turn, scope: str, *, own_spans: bool) -> None:
        self.turn = turn
        self.scope = scope
        self.own_spans = own_spans
        self.lock = threading.RLock()
        self.closed = False
        self.step: int | None = None
        self.iteration: Iteration | None = None
        self.chat: ChatCall | None = None
        self.usage: ModelUsage | None = None
        self.carried: tuple[str, ...] = ()
        self._context = contextvars.copy_context()
        self._iteration: contextlib.AbstractContextManager[Any] | None = None
        self._base_otel: Any = self._context.run(otel_context.get_current)
        self._otel: Any = self._base_otel

    @property
    def otel(self) -> Any:
        """The OpenTelemetry context the hooks attach: the open iteration's."""
        return self._otel

    def start_iteration(
        self, step: int, messages: list[Message], role: str | None
    ) -> Iteration | None:
        """End the open iteration and start the one of ``step`` (once per step)."""
        with self.lock:
            if self.closed:
                return None
            if self.step == step and self.iteration is not None:
                return self.iteration
            self._end_iteration(None)
            self.step = step
            turn = self.turn
            turn.messages = messages
            turn.role = role
            iteration, scope = turn.open_iteration()
            try:
                self._context.run(scope.__enter__)
                self._iteration = scope
                self._otel = self._context.run(otel_context.get_current)
            except Exception:
                failed("pydantic_ai.iteration_start")
            self.iteration = iteration
            self.chat = None
            self.usage = None
            self.carried = ()
            return iteration

    def _end_iteration(self, exc: BaseException | None) -> None:
        manager, self._iteration = self._iteration, None
        self._otel = self._base_otel
        if manager is None:
            return
        try:
            if exc is None:
                self._context.run(manager.__exit__, None, None, None)
            else:
                self._context.run(manager.__exit__, type(exc), exc, exc.__traceback__)
        except Exception:
            failed("pydantic_ai.iteration_end")

    def close(self, exc: BaseException | None = None) -> None:
        """End the open iteration (with the run's exception, if any)."""
        with self.lock:
            if self.closed:
                return
            self.closed = True
            self._end_iteration(exc)


class Outputs:
    """Offloaded outputs kept in this process, by offload id, each with the
    conversation allowed to read it and the call it answered; oldest dropped
    first. A dropped output can no longer be recalled (the stub stays in the
    history)."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        # offload id -> (scope, call id, text, stub)
        self._store: OrderedDict[str, tuple[str, str, str, str]] = OrderedDict()
        self._expanded: set[str] = set()
        self._lock = threading.Lock()

    def keep(self, offload_id: str, scope: str, call_id: str, text: str, stub: str) -> None:
        with self._lock:
            self._store[offload_id] = (scope, call_id, text, stub)
            while len(self._store) > self._limit:
                evicted, _ = self._store.popitem(last=False)
                self._expanded.discard(evicted)

    def get(self, offload_id: str) -> str | None:
        with self._lock:
            entry = self._store.get(offload_id)
        return None if entry is None else entry[2]

    def has(self, scope: str) -> bool:
        with self._lock:
            return any(entry[0] == scope for entry in self._store.values())

    def lookup(self, offload_id: str, scope: str) -> str | None:
        with self._lock:
            entry = self._store.get(offload_id)
        return entry[2] if entry is not None and entry[0] == scope else None

    def offloaded(self, scope: str) -> Mapping[str, Offloaded]:
        """The scope's offloads by the call id whose output they replaced."""
        with self._lock:
            return {
                call_id: Offloaded(offload_id, stub)
                for offload_id, (owner, call_id, _, stub) in self._store.items()
                if owner == scope
            }

    def expand(self, offload_id: str) -> None:
        """A recall brought the full output back into the conversation."""
        with self._lock:
            if offload_id in self._store:
                self._expanded.add(offload_id)

    def expanded(self, offload_id: str) -> bool:
        with self._lock:
            return offload_id in self._expanded
