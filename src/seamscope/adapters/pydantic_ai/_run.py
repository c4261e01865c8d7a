"""One agent run's decision state and spans, and the offloaded outputs.

A :class:`Run` is one ``Agent.run``/``run_sync``/``run_stream``/``iter``:
its iteration spans (one per model request step) and what the request
hooks learnt for the tool hooks. :class:`Outputs` holds offloaded tool
outputs for the recall tool. :func:`failed` records seamscope's own
contained failures for every module of the adapter.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from seamscope.adapters import _hooks
from seamscope.adapters._outputs import Outputs
from seamscope.decisions import Message, ModelUsage
from seamscope.loop import ChatCall, Iteration, Turn

__all__ = ["LOG", "Outputs", "Run", "attached", "contained", "failed"]

LOG = logging.getLogger("seamscope.adapters.pydantic_ai")
"""The adapter's stdlib logger (the package's name, whichever module logs)."""

_T = TypeVar("_T")


def failed(hook: str) -> None:
    """Record a contained failure of seamscope's own code (call it in ``except``)."""
    _hooks.failed(hook, LOG)


def attached(context: Any) -> contextlib.AbstractContextManager[None]:
    """An OpenTelemetry context made current for a block of one hook (same task)."""
    return _hooks.attached(context)


def contained(
    factory: Callable[[], _T] | None, what: str
) -> contextlib.AbstractContextManager[_T | None]:
    """Enter a telemetry context manager without letting it break the body."""
    return _hooks.contained(factory, what, LOG)


class Run:
    """The decision state and iteration spans of one agent run.

    pydantic-ai calls the request hooks of one step (``prepare_tools``,
    ``wrap_model_request``, ``after_model_request``) and the tool hooks of
    that step's calls (each in a task of its own) in turn. An iteration
    lives from the step's first hook to the next step (or the run's end),
    longer than any one hook: the run's :class:`~seamscope.loop.Turn` holds
    it (one open at a time), and each hook attaches the OpenTelemetry
    context :attr:`otel` for its decisions.

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
        self.carried: tuple[Any, ...] = ()  # offload ids or CarriedStubs the request carries
        self.present: tuple[Any, ...] = ()  # CarriedStubs whose output a recall brought back
        # the tools pydantic-ai lets run this step (prepare_tools' answer; None: unknown)
        self.runnable: frozenset[str] | None = None
        # where the step offers the recall tool among its tools (the selection's
        # place for it); None: not offered; -1: as pydantic-ai has it, last (no
        # selection answered for the step)
        self.recall_at: int | None = -1

    @property
    def otel(self) -> Any:
        """The OpenTelemetry context the hooks attach: the open iteration's."""
        return self.turn.trace_context

    def start_iteration(
        self, step: int, messages: list[Message], role: str | None
    ) -> Iteration | None:
        """End the open iteration and start the one of ``step`` (once per step)."""
        with self.lock:
            if self.closed:
                return None
            if self.step == step and self.iteration is not None:
                return self.iteration
            self.step = step
            turn = self.turn
            turn.messages = messages
            turn.role = role
            iteration = turn.start_iteration()
            self.iteration = iteration
            self.chat = None
            self.runnable = None
            self.recall_at = -1
            self.usage = None
            self.carried = self.present = ()
            return iteration

    @_hooks.containing("pydantic_ai.run_end", LOG)
    def close(self, exc: BaseException | None = None) -> None:
        """End the open iteration (with the run's exception, if any)."""
        with self.lock:
            if self.closed:
                return
            self.closed = True
            self.turn.end(exc)
