"""``execute_tool`` spans from LangChain's tool callbacks, for a middleware without tool hooks.

A ``SeamscopeMiddleware`` that watches no middleware with tool hooks
defines no ``wrap_tool_call``: LangChain then builds the
same graph and runs the same checks as without seamscope. Its tool calls
are heard instead through LangChain's callbacks: :data:`TOOL_RUNS`, one
:class:`ToolRuns` handler added with ``register_configure_hook`` (public
``langchain_core.tracers.context`` API) to every callback manager
configured once such a middleware exists. The handler ignores every event
but a tool run's (LangChain files them under ``ignore_agent``; every other
``ignore_*`` is set), and any tool run that is not a tool call (no
``tool_call_id``) of an agent run such a middleware follows (found by the
LangGraph invocation the tool runs in).

Per tool call: ``on_tool_start`` opens the ``execute_tool {tool}`` span under
the run's iteration, current while the tool runs (attached in the tool
run's own context, detached at its end in that same context);
``on_tool_end`` ends it with the tool's answer (an error answer is a failed
execution, with the ``error.type`` of what the tool run raised or
handled: :mod:`._tool_errors`) and does the kit's accounting (a re-read of
a result a watched context editing cleared; the offload gate decides when
the next model call sends the answer: :mod:`._stubs`); ``on_tool_error``
fails it.
Arguments the tool rejected fail only the span (``ToolInvocationError``:
LangGraph's tool node answers them); an interrupt pauses the run; any
other exception the tool run raised ends the run too (the tool node
re-raises it, and no hook of seamscope sees the agent fail), and a run
that nonetheless goes on (an error middleware handled it) continues in the
same trace.
"""

from __future__ import annotations

import contextvars
import threading
import weakref
from dataclasses import dataclass
from typing import Any

from seamscope._internal import Invocation
from seamscope.adapters.langchain import _translate as translate
from seamscope.adapters.langchain._framework import (
    BaseCallbackHandler,
    GraphBubbleUp,
    ToolMessage,
    get_runtime,
    register_configure_hook,
)
from seamscope.adapters.langchain._runs import Run, failed
from seamscope.adapters.langchain._steps import StepContext, settle_output
from seamscope.adapters.langchain._tool_errors import INVOCATION_ERROR, ToolOutcome
from seamscope.decisions import ToolCall
from seamscope.loop import Iteration
from seamscope.telemetry import conventions as c

__all__ = ["TOOL_RUNS", "ToolRuns", "follow", "unfollow"]


@dataclass(slots=True)
class _Open:
    """One tool call's span, from its tool run's start to its end."""

    kit: StepContext
    run: Run
    iteration: Iteration
    call: ToolCall
    tool: Invocation
    outcome: ToolOutcome
    runtime: Any


class ToolRuns(BaseCallbackHandler):
    """The tool calls of the agent runs followed: their ``execute_tool`` spans."""

    run_inline = True  # called where the tool runs, in its context
    ignore_llm = True
    ignore_retriever = True
    ignore_chat_model = True
    ignore_retry = True
    ignore_custom_event = True

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._kits: weakref.WeakValueDictionary[int, StepContext] = weakref.WeakValueDictionary()
        self._open: dict[Any, _Open] = {}

    def follow(self, kit: StepContext) -> None:
        with self._lock:
            self._kits[id(kit)] = kit

    def unfollow(self, kit: StepContext) -> None:
        with self._lock:
            self._kits.pop(id(kit), None)

    def _find(self, kits: list[StepContext]) -> tuple[StepContext, Run, Any] | None:
        """The followed run the current tool run belongs to (its invocation's)."""
        try:
            runtime = get_runtime()
        except Exception:
            return None  # not inside a LangGraph run
        for kit in kits:
            run, _ = kit.runs.for_hook(None, runtime, create=False, resume=True)
            if run is not None:
                return kit, run, runtime
        return None

    # -- LangChain callbacks ---------------------------------------------------------

    def on_tool_start(self, serialized: Any, input_str: Any, **kwargs: Any) -> None:
        call_id, run_id = kwargs.get("tool_call_id"), kwargs.get("run_id")
        if not call_id or run_id is None:
            return
        with self._lock:
            kits = list(self._kits.values())
        if not kits:
            return
        try:
            found = self._find(kits)
            if found is None:
                return
            kit, run, runtime = found
            name = (serialized or {}).get("name") or kwargs.get("name") or "?"
            inputs = kwargs.get("inputs")
            call = translate.tool_call(
                {"id": call_id, "name": name, "args": inputs if isinstance(inputs, dict) else {}}
            )
            iteration = run.current_iteration()
            tool = iteration.start_tool(call, parent=run.otel)
            outcome = ToolOutcome(str(call_id))
            outcome.on_tool_start(serialized, input_str, **kwargs)
            tool.attach()  # current for the tool's run, until the span ends
            with self._lock:
                self._open[run_id] = _Open(kit, run, iteration, call, tool, outcome, runtime)
        except Exception:
            failed("langchain.tool_start")

    def _pop(self, kwargs: dict[str, Any]) -> _Open | None:
        with self._lock:
            return self._open.pop(kwargs.get("run_id"), None)

    def on_tool_end(self, output: Any, **kwargs: Any) -> None:
        found = self._pop(kwargs)
        if found is None:
            return
        text = error = None
        try:
            found.outcome.on_tool_end(output, **kwargs)
            if isinstance(output, ToolMessage):
                text = translate.offloadable_text(output)
            if translate.is_error_result(output):
                tool = found.run.tools.get(found.call.name)
                error = found.outcome.error_type(tool) or c.TOOL_ERROR_RESULT
        except Exception:
            failed("langchain.tool_result")
        found.iteration.tool_result(found.tool, text if text is not None else output)
        found.tool.end(error)
        try:
            run, kit = found.run, found.kit
            # the gate decides when the answer is first sent (._stubs): as the
            # state holds it, after every middleware around the tool
            settle_output(kit, run, found.iteration, found.call, text, found.runtime, offload=False)
            if run.ends_at(found.call.name) and not run.closed:
                found.kit.runs.close(run, None)
            found.kit.runs.drain()
        except Exception:
            failed("langchain.after_tool_call")

    def on_tool_error(self, error: BaseException, **kwargs: Any) -> None:
        found = self._pop(kwargs)
        if found is None:
            return
        try:
            if isinstance(error, GraphBubbleUp):  # an interrupt: the run resumes later
                found.tool.stop()
                found.run.paused = True
                return
            found.outcome.on_tool_error(error, **kwargs)
            raised = found.outcome.error_type(found.run.tools.get(found.call.name))
            if raised == INVOCATION_ERROR:
                # LangGraph's tool node answers rejected arguments with an error result
                found.tool.fail(raised)
                return
            found.tool.fail(error)
            run = found.run
            if run.watched is None:  # no end of the invocation to wait for
                found.kit.runs.close(run, error, seen=False)
            else:  # a middleware may handle it: the next model call says so
                run.failing = error
            found.kit.runs.drain()
        except Exception:
            failed("langchain.tool_error")

    def on_chain_error(
        self, error: BaseException, *, parent_run_id: Any = None, **kwargs: Any
    ) -> None:
        """A graph invocation raised: the runs a tool's exception left failing
        with that very exception (no middleware handled it) end with it."""
        if parent_run_id is not None:
            return
        with self._lock:
            kits = list(self._kits.values())
        for kit in kits:
            try:
                kit.runs.fail_with(error)
            except Exception:
                failed("langchain.run_end")


_HANDLER = ToolRuns()

TOOL_RUNS: contextvars.ContextVar[ToolRuns | None] = contextvars.ContextVar(
    "seamscope_tool_runs", default=_HANDLER
)
"""Holds :class:`ToolRuns` everywhere (its default): once registered, every
callback manager configured gets it."""

_installed = False
_install_lock = threading.Lock()


def follow(kit: StepContext) -> None:
    """Open ``execute_tool`` spans for the tool calls of ``kit``'s runs (the
    handler is registered with LangChain the first time)."""
    global _installed
    with _install_lock:
        if not _installed:
            register_configure_hook(TOOL_RUNS, True)
            _installed = True
    _HANDLER.follow(kit)


def unfollow(kit: StepContext) -> None:
    """Stop: ``kit``'s middleware opens its tool spans in its own tool hooks."""
    _HANDLER.unfollow(kit)
