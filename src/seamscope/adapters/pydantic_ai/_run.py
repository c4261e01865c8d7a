"""One agent run's decision state and spans, and the offloaded outputs.

A :class:`Run` is one ``Agent.run``/``run_sync``/``run_stream``/``iter``:
its iteration spans (one per model request step) and what the request
hooks learnt for the tool hooks. :class:`Outputs` holds offloaded tool
outputs for the recall tool. :func:`failed` records seamscope's own
contained failures for every module of the adapter.
"""

from __future__ import annotations

import threading
from typing import Any

from seamscope.adapters import _hooks
from seamscope.adapters._outputs import Outputs
from seamscope.decisions import Message, ModelUsage
from seamscope.loop import ChatCall, Iteration, Turn

__all__ = ["HOOKS", "LOG", "Outputs", "Run", "attached", "contained", "failed"]

HOOKS = _hooks.Contained("pydantic_ai")
"""The adapter's containment of its own failures (every module's)."""
LOG = HOOKS.log
failed = HOOKS.failed
contained = HOOKS.contained
attached = _hooks.attached


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
