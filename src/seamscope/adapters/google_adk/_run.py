"""One ADK invocation's decision state and spans.

A :class:`Run` is one ``Runner.run_async``/``run``/``run_live`` invocation
(``before_run_callback`` to ``after_run_callback`` or
``on_run_error_callback``): its :class:`~seamscope.loop.Turn` and what the
model hooks learnt for the tool hooks. ADK calls the model hooks of one
step and the tool hooks of that step's calls (each call in a task of its
own) in turn; a ``ParallelAgent`` runs branches of one invocation at the
same time, so each branch is a :class:`Lane` with its own open iteration.

:func:`failed` records seamscope's own contained failures for every module
of the adapter.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import context as otel_context

from seamscope._internal import Invocation
from seamscope.adapters import _hooks
from seamscope.decisions import ModelUsage
from seamscope.loop import ChatCall, Iteration, Turn

__all__ = ["HOOKS", "LOG", "Lane", "Run", "Tool", "failed"]

HOOKS = _hooks.Contained("google_adk")
"""The adapter's containment of its own failures (every module's)."""
LOG = HOOKS.log
failed = HOOKS.failed


@dataclass
class Lane:
    """One branch of an invocation (the root agent and the agents it transfers
    to share the main one): its turn and the open model step.

    ``runnable``: the tools the step let run (its ``tools_dict`` after the
    selection); ``chat``: the step's model call until its final response;
    ``resumed``: the open iteration runs the calls of a run resumed at its
    tools (ADK's tool confirmation), before any model call of the run.
    """

    turn: Turn
    iteration: Iteration | None = None
    chat: ChatCall | None = None
    usage: ModelUsage | None = None
    carried: tuple[Any, ...] = ()  # offload ids or CarriedStubs the request carries
    present: tuple[Any, ...] = ()  # CarriedStubs whose output a recall brought back
    runnable: frozenset[str] = frozenset()
    structured: frozenset[str] = frozenset()
    resumed: bool = False

    def end_chat(self, exc: BaseException | str | None = None) -> None:
        """End the open model call's span (failed with ``exc``), once."""
        chat, self.chat = self.chat, None
        if chat is not None:
            chat.invocation.end(exc)


@dataclass
class Tool:
    """One tool call of a step: its ``execute_tool`` span (None when ADK records
    its own) and the context attached for the tool's run."""

    lane: Lane
    iteration: Iteration
    span: Invocation | None
    context: otel_context.Context
    token: object = None


@dataclass
class Run:
    """The decision state and spans of one invocation.

    ``conversation``: the conversation id (the session's, or the calling
    run's for an agent run as a tool); ``scope``: whose offloads a recall
    may read; ``own_spans``: whether seamscope opens the GenAI spans
    (``invoke_agent``, ``chat``, ``execute_tool``), False when ADK's own
    tracing records them; ``root_agent``: the name of the agent the run
    started with; ``agent_name``: the name its spans give it (None: the
    layer's).
    """

    turn: Turn
    conversation: str
    scope: str
    own_spans: bool
    root_agent: str | None
    agent_name: str | None
    lock: threading.RLock = field(default_factory=threading.RLock)
    lanes: dict[str | None, Lane] = field(default_factory=dict)
    tools: dict[str, Tool] = field(default_factory=dict)
    closed: bool = False

    def end(self, exc: BaseException | str | None = None) -> None:
        """End every span still open: the tools', the branches' model calls and
        iterations, then the turn's (failed with ``exc``); once."""
        with self.lock:
            if self.closed:
                return
            self.closed = True
            tools, self.tools = list(self.tools.values()), {}
            lanes = list(self.lanes.values())
        for tool in tools:
            if tool.span is not None:
                tool.span.end(exc)
        for lane in lanes:
            lane.end_chat(exc)
            if lane.turn is not self.turn:
                lane.turn.end(exc)
        self.turn.end(exc)
