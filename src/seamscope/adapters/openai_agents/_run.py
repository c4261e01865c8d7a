"""One agent run's spans and decision state, and the offloaded outputs.

A :class:`Run` is one ``Runner.run``/``run_streamed``/``run_sync``: its
``invoke_agent`` and iteration spans, the ``execute_tool`` spans still
open, and what the input filter learnt for the next model call.
:class:`Outputs` holds offloaded tool outputs for the recall tool and for
the input filter that stubs them. :func:`failed` records seamscope's own
contained failures for every module of the adapter.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from seamscope._internal import Invocation, error_type
from seamscope.adapters import _hooks
from seamscope.adapters._outputs import Outputs
from seamscope.adapters.openai_agents._translate import Trimmed
from seamscope.decisions import Message, ModelUsage, ToolCall
from seamscope.loop import DecisionLayer, Iteration, Turn
from seamscope.telemetry import conventions as c

__all__ = ["HOOKS", "LOG", "Outputs", "Run", "attached", "contained", "failed", "new_turn"]

HOOKS = _hooks.Contained("openai_agents")
"""The adapter's containment of its own failures (every module's)."""
LOG = HOOKS.log
failed = HOOKS.failed
contained = HOOKS.contained
attached = _hooks.attached


class Run:
    """The spans and decision state of one agent run.

    The SDK runs hooks, the model and each tool in tasks of their own, so a
    span made current in one of them is gone in the next. The run's
    ``invoke_agent`` and iteration spans are held by its
    :class:`~seamscope.loop.Turn`, each ``execute_tool`` span (from
    ``on_tool_start`` to ``on_tool_end``) by the invocation
    ``Iteration.start_tool`` gave; each hook attaches the OpenTelemetry
    context they hand out.
    """

    def __init__(self, key: str, turn: Turn, scope: str) -> None:
        self.key = key
        self.turn = turn
        self.scope = scope
        self.lock = threading.RLock()
        self.closed = False
        self.iteration: Iteration | None = None
        self.usage: ModelUsage | None = None
        self.agent: Any = None  # the turn's agent, from the input filter (a plan takes it)
        # the agent the SDK runs now (the starting agent, then each handoff's):
        # the routed model shows the SDK the model it would resolve for it
        self.current_agent: Any = None
        # the input filter ran since the last model call's plan: a model call
        # without it is the SDK retrying that call (same plan, same iteration)
        self.fresh = False
        self.carried: tuple[Any, ...] = ()  # offload ids or CarriedStubs the input carries
        self.present: tuple[Any, ...] = ()  # CarriedStubs whose output a recall brought back
        self.recallable = False  # the offload store holds outputs of this conversation
        self.stubbed = False  # the model call's input holds a stub (an offloaded output's)
        # the tool outputs the caller's ToolOutputTrimmer trimmed in the input the
        # next model call is sent (the plan records them), and the trimmer itself
        self.trims: tuple[Trimmed, ...] = ()
        self.trimmer: Any = None
        self._tools: dict[str, tuple[Iteration, Invocation, ToolCall, list[BaseException]]] = {}
        # the caller's own RunConfig (nested runs get a copy of it of their own)
        self.base_config: Any = None
        # nested runs (``Agent.as_tool``) by the call id of the tool that runs them
        self.nested: dict[str, Run] = {}
        # a nested run: no run hooks reach it, so it opens its tools' spans
        # itself (when their calls are dispatched; closed when their output is back)
        self.hookless = False
        self.parent: Run | None = None  # the run whose agent tool runs this one
        # the RunState this run resumes (None: a new run): its first tool calls
        # were emitted by a model call of the run it continues
        self.resumed: Any = None
        # what the run's last model call raised (None: it answered): a nested
        # run ends with it when its agent tool's failure function answers for it
        self.failure: BaseException | None = None

    @property
    def otel(self) -> Any:
        """The OpenTelemetry context the hooks attach: the open iteration's."""
        return self.turn.trace_context

    @property
    def agent_otel(self) -> Any:
        """The context with the run's ``invoke_agent`` span current."""
        return self.turn.agent_context

    def open(self, agent_name: str | None = None, parent: Any = None) -> None:
        """Start the ``invoke_agent`` span (named by ``agent_name``, default the
        layer's), under ``parent`` (an OpenTelemetry context; None: the context
        current when the run was made)."""
        self.turn.start_agent(agent_name or self.turn.layer.agent_name, parent=parent)

    def start_iteration(self, messages: Sequence[Message], role: str | None) -> Iteration:
        """End the open iteration and start the next one (one per model call)."""
        with self.lock:
            turn = self.turn
            turn.messages = list(messages)
            turn.role = role
            self.iteration = turn.start_iteration()
            self.usage = None
            return self.iteration

    def resumed_iteration(self, role: str | None) -> Iteration | None:
        """The open iteration; in a resumed run before its first model call, a
        new one: the iteration of the tool calls the run it continues emitted
        (approved since), which the SDK runs first."""
        with self.lock:
            if self.iteration is None and self.resumed is not None and not self.closed:
                self.start_iteration(self.turn.messages, role)
            return self.iteration

    def model_ended(self, exc: BaseException | None) -> None:
        """The run's model call answered (None) or raised ``exc``."""
        self.failure = exc

    # -- tool spans ---------------------------------------------------------------

    def open_tool(self, call: ToolCall) -> None:
        with self.lock:
            it = self.iteration
            if it is None or self.closed:
                return
            self._tools[call.id] = (it, it.start_tool(call), call, [])

    def tool_otel(self, call_id: str) -> Any:
        """The OpenTelemetry context with an open tool's ``execute_tool`` span current."""
        with self.lock:
            entry = self._tools.get(call_id)
        return None if entry is None else entry[1].context

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
                entry[3].append(error)
                return
        if self.parent is not None:
            self.parent.tool_error(call_id, error)

    def close_tool(self, call_id: str, output: Any, *, error: str | None = None) -> ToolCall | None:
        """End a tool's span (recording the error it raised, or ``error``: the
        ``error.type`` of an answer that is a failure, e.g. a recall that found
        nothing); the call it ran."""
        with self.lock:
            entry = self._tools.pop(call_id, None)
            nested = self.nested.pop(call_id, None)
        if entry is None:
            if nested is not None:
                nested.close(nested.failure)
            return None
        it, tool, call, errors = entry
        if nested is not None:
            # the agent tool's own run ends before its tool, with the error that
            # ended it: the one its tool reported, else what its model raised;
            # the agent tool failed with it too (its failure function answered)
            if not errors and nested.failure is not None:
                errors.append(nested.failure)
            nested.close(errors[0] if errors else None)
        if errors:
            tool.fail(errors[0])
        else:
            it.tool_result(tool, output)
            tool.end(error)
        return call

    # -- the end ------------------------------------------------------------------

    @_hooks.containing("openai_agents.run_end", LOG)
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
            for _, tool, _, errors in tools:
                tool.end(errors[0] if errors else _unanswered(exc))
            self.turn.end(exc)


def _unanswered(exc: BaseException | None) -> BaseException | str | None:
    """How a tool call the run ended before it answered ends: with the run's
    exception when that is a tool's own (the SDK's wrapper raised from what
    the user's code raised), else cancelled (a guardrail's tripwire, a
    cancellation: its body may never have begun)."""
    if exc is None:
        return None
    return exc if error_type(exc) != type(exc).__qualname__ else c.TOOL_CALL_CANCELLED


def new_turn(
    layer: DecisionLayer, conversation_id: str | None, scope: Mapping[str, Any] | None
) -> Turn:
    """The Turn a run's iterations belong to (role set per iteration; its
    ``invoke_agent`` starts with :meth:`Run.open`)."""
    return layer.start_turn(conversation_id, scope=scope, agent_span=False)
