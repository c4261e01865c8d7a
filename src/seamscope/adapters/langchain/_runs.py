"""Agent runs across graph nodes, and the offloaded outputs they keep.

A :class:`Run` is one agent run (one ``invoke``): its ``invoke_agent`` and
iteration spans and its decision state. The :class:`Runs` registry finds
the run a hook belongs to; :class:`Outputs` holds offloaded tool outputs
for the recall tool. :func:`failed` records seamscope's own contained
failures for every module of the adapter.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import sys
import threading
import uuid
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry import context as otel_context

from seamscope.adapters.langchain import _translate as translate
from seamscope.adapters.loop import DecisionLayer, Iteration, Turn
from seamscope.decisions import ModelUsage
from seamscope.telemetry._logging import telemetry_error

__all__ = ["LOG", "Outputs", "Run", "Runs", "failed"]

LOG = logging.getLogger("seamscope.adapters.langchain")
"""The adapter's stdlib logger (the package's name, whichever module logs)."""

_MAX_OPEN_RUNS = 1024


def failed(hook: str) -> None:
    """Record a contained failure of seamscope's own code (call it in ``except``).

    A ``seamscope.telemetry.error`` event names the hook and the error type;
    the traceback goes to the stdlib logger at DEBUG. Never raises.
    """
    with contextlib.suppress(Exception):
        error = sys.exc_info()[1]
        telemetry_error(hook, error)
        LOG.debug("seamscope: %s failed; the agent continues unchanged", hook, exc_info=True)


class Run:
    """The spans and decision state of one agent run, across graph nodes.

    LangGraph gives each node a copy of the caller's context, so a span made
    current in one hook is gone in the next. The run keeps its own
    ``contextvars.Context`` in which the long-lived ``invoke_agent`` and
    iteration spans are entered and exited (so their context tokens match),
    and hands out the OpenTelemetry context each hook attaches.
    """

    def __init__(self, key: str, turn: Turn, scope: str) -> None:
        self.key = key
        self.turn = turn
        self.scope = scope
        self.lock = threading.RLock()
        self.closed = False
        self.iteration: Iteration | None = None
        self.usage: ModelUsage | None = None
        self._context = contextvars.copy_context()
        self._agent: contextlib.AbstractContextManager[Any] | None = None
        self._iteration: contextlib.AbstractContextManager[Any] | None = None
        self._agent_otel: Any = None
        self._otel: Any = None

    @property
    def otel(self) -> Any:
        """The OpenTelemetry context the hooks attach (None when unavailable)."""
        return self._otel

    def open(self) -> None:
        layer = self.turn.layer
        try:
            manager = layer.genai.invoke_agent(
                layer.agent_name, conversation_id=self.turn.conversation_id
            )
            self._context.run(manager.__enter__)
            self._agent = manager
            self._agent_otel = self._otel = self._context.run(otel_context.get_current)
        except Exception:
            failed("langchain.invoke_agent_start")

    def start_iteration(self, messages: Sequence[Any], state: Mapping[str, Any]) -> Iteration:
        with self.lock:
            self._end_iteration(None)
            turn = self.turn
            turn.messages = list(messages)
            turn.state = state
            manager = turn.iteration()
            try:
                iteration: Iteration = self._context.run(manager.__enter__)
                self._iteration = manager
                self._otel = self._context.run(otel_context.get_current)
            except Exception:
                failed("langchain.iteration_start")
                iteration = Iteration(turn, max(turn.iterations - 1, 0))
            self.iteration = iteration
            self.usage = None
            return iteration

    def current_iteration(self) -> Iteration:
        """The open iteration, or a new one (a run resumed at its tools)."""
        with self.lock:
            if self.iteration is not None:
                return self.iteration
        return self.start_iteration(self.turn.messages, self.turn.state)

    def _exit(self, manager: Any, exc: BaseException | None, hook: str) -> None:
        """Leave a span's context manager in the run's context, passing the
        agent's exception (if any) so the span records it."""
        if manager is None:
            return
        try:
            if exc is None:
                self._context.run(manager.__exit__, None, None, None)
            else:
                self._context.run(manager.__exit__, type(exc), exc, exc.__traceback__)
        except Exception:
            failed(hook)

    def _end_iteration(self, exc: BaseException | None) -> None:
        manager, self._iteration = self._iteration, None
        self._otel = self._agent_otel
        self._exit(manager, exc, "langchain.iteration_end")

    def close(self, exc: BaseException | None = None) -> None:
        with self.lock:
            if self.closed:
                return
            self.closed = True
            self._end_iteration(exc)
            manager, self._agent = self._agent, None
            self._exit(manager, exc, "langchain.invoke_agent_end")


class Runs:
    """The open runs of one middleware, oldest first (at most ``_MAX_OPEN_RUNS``).

    ``role`` and ``scope`` are the middleware's arguments: a value, or a
    callable of the LangGraph ``Runtime`` evaluated when a run opens.
    """

    def __init__(self, layer: DecisionLayer, role: Any, scope: Any) -> None:
        self._layer = layer
        self._role = role
        self._scope = scope
        self._runs: OrderedDict[str, Run] = OrderedDict()
        self._lock = threading.Lock()

    def open(self, runtime: Any) -> Run:
        """A new run for this invocation (a still-open run on its thread is closed)."""
        run = self._new(runtime, translate.thread_id(runtime))
        with self._lock:
            run.open()
            stale = self._register(run)
        for old in stale:
            old.close()
        return run

    def for_hook(self, state: Any, runtime: Any, *, create: bool) -> tuple[Run | None, bool]:
        """The run a hook belongs to: by the state key, else by thread; maybe new.

        A new run is made for a hook that finds none (a run resumed after an
        interrupt, or one whose ``before_agent`` did not run); parallel hooks
        agree on one.
        """
        key = translate.run_key(state)
        conversation_id = translate.thread_id(runtime)
        with self._lock:
            run = self._find(key, conversation_id)
        if run is not None or not create:
            return run, False
        candidate = self._new(runtime, conversation_id)
        with self._lock:
            run = self._find(key, conversation_id)
            if run is not None:
                return run, False
            candidate.open()
            stale = self._register(candidate)
        for old in stale:
            old.close()
        return candidate, True

    def close(self, run: Run, exc: BaseException | None) -> None:
        with self._lock:
            if self._runs.get(run.key) is run:
                del self._runs[run.key]
        run.close(exc)

    def _resolve(self, value: Any, runtime: Any, what: str) -> Any:
        if not callable(value):
            return value
        try:
            return value(runtime)
        except Exception:
            failed(f"langchain.{what}")
            return None

    def _new(self, runtime: Any, conversation_id: str | None) -> Run:
        role = self._resolve(self._role, runtime, "role")
        scope = self._resolve(self._scope, runtime, "scope")
        key = uuid.uuid4().hex
        turn = Turn(
            self._layer,
            conversation_id,
            [],
            role if isinstance(role, str) and role else None,
            {},
            scope if isinstance(scope, Mapping) else None,
        )
        return Run(key, turn, conversation_id or f"run:{key}")

    def _register(self, run: Run) -> list[Run]:
        """Add ``run`` (holding the lock); returns the runs it supersedes or evicts."""
        conversation_id = run.turn.conversation_id
        stale: list[Run] = []
        if conversation_id:
            stale = [r for r in self._runs.values() if r.turn.conversation_id == conversation_id]
            for old in stale:
                del self._runs[old.key]
        self._runs[run.key] = run
        while len(self._runs) > _MAX_OPEN_RUNS:
            stale.append(self._runs.popitem(last=False)[1])
        return stale

    def _find(self, key: Any, conversation_id: str | None) -> Run | None:
        run = self._runs.get(key) if isinstance(key, str) else None
        if run is None and conversation_id:
            for candidate in reversed(self._runs.values()):
                if candidate.turn.conversation_id == conversation_id:
                    return candidate
        return run


class Outputs:
    """Offloaded outputs kept for recall in this process, by offload id, each
    with the scope (thread or run) allowed to read it; oldest dropped first."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._store: OrderedDict[str, tuple[str, str]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, offload_id: str) -> str | None:
        with self._lock:
            entry = self._store.get(offload_id)
        return None if entry is None else entry[1]

    def keep(self, offload_id: str, scope: str, text: str) -> None:
        with self._lock:
            self._store[offload_id] = (scope, text)
            while len(self._store) > self._limit:
                self._store.popitem(last=False)

    def has(self, scope: str) -> bool:
        with self._lock:
            return any(entry[0] == scope for entry in self._store.values())

    def lookup(self, offload_id: str, scope: str) -> str | None:
        with self._lock:
            entry = self._store.get(offload_id)
        return entry[1] if entry is not None and entry[0] == scope else None
