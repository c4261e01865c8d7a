"""Agent runs across graph nodes, and the offloaded outputs they keep.

A :class:`Run` is one agent run (one ``invoke``): its ``invoke_agent`` and
iteration spans and its decision state. The :class:`Runs` registry finds
the run a hook belongs to; :class:`Outputs` (the adapters' shared store)
holds offloaded tool outputs for the recall tool; :class:`Compactions` what
watched middlewares took out of each conversation's prompts. :func:`failed` records seamscope's own
contained failures for every module of the adapter.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import uuid
import weakref
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace

from seamscope.adapters import _hooks
from seamscope.adapters._kit import Conversations, error_type, estimate_tokens
from seamscope.adapters._outputs import Outputs
from seamscope.adapters.langchain import _explain as explain
from seamscope.adapters.langchain import _translate as translate
from seamscope.adapters.langchain._framework import GraphBubbleUp
from seamscope.decisions import ModelUsage
from seamscope.decisions.records import OffloadMechanism
from seamscope.loop import DecisionLayer, Iteration, Turn
from seamscope.telemetry import conventions as c

__all__ = [
    "LOG",
    "Compactions",
    "Outputs",
    "Run",
    "Runs",
    "active_parent",
    "contained",
    "failed",
    "HOOKS",
]

_T = TypeVar("_T")

HOOKS = _hooks.Contained("langchain")
"""The adapter's containment of its own failures (every module's)."""
LOG = HOOKS.log
failed = HOOKS.failed

_MAX_OPEN_RUNS = 1024
_MAX_ENDED_RUNS = 256  # ended runs kept, until released, to see whether they continue

_OUTSIDE = (
    "seamscope: %s crossed SeamscopeMiddleware and was handled by a middleware placed "
    "outside it (such as ModelRetryMiddleware or ToolErrorMiddleware): put "
    "SeamscopeMiddleware first in create_agent(middleware=[...]) (or pass those "
    "middlewares to seamscope.watching(...)). The run continues in a new invoke_agent "
    "span under the first one, whose error stands for the handled exception"
)


def contained(
    factory: Callable[[], _T] | None, what: str
) -> contextlib.AbstractContextManager[_T | None]:
    """A telemetry ``with`` scope around a block of one hook that cannot break
    it; an interrupt (``GraphBubbleUp``) pauses the run: the span ends as a
    normal exit."""
    return _hooks.contained(factory, what, LOG, passes=(GraphBubbleUp,))


class _Abandoned(Exception):
    """Stands for the end of a run that its hooks never saw."""


_Abandoned.__qualname__ = c.ABANDONED_RUN  # the error.type the run's spans record


class Run:
    """The spans and decision state of one agent run, across graph nodes.

    LangGraph gives each node a copy of the caller's context, so a span made
    current in one hook is gone in the next. The run's
    :class:`~seamscope.loop.Turn` holds its ``invoke_agent`` and iteration
    spans (started under a context, never attached by starting), and hands
    out the OpenTelemetry context each hook attaches for its own duration.
    """

    def __init__(
        self, key: str, turn: Turn, scope: str, invocation: tuple[Any, str] | None = None
    ) -> None:
        self.key = key
        # the graph invocation it runs in (see translate.invocation): holding the
        # RunControl keeps its id from being reused while the run is open
        self.invocation = invocation
        self.turn = turn
        self.scope = scope
        self.lock = threading.Lock()
        self.closed = False
        self.paused = False  # an interrupt crossed a hook: the run resumes later
        self.iteration: Iteration | None = None
        self.usage: ModelUsage | None = None
        self.watched: Any = None  # (weakref to the invocation's stream writer, finalizer)
        # the model instance the PRE seam chose for the current call, and its name
        self.chosen: tuple[Any, str] | None = None
        # the tool names the current model call was really bound with (the tail's view)
        self.bound: tuple[str, ...] | None = None
        # the agent's own tools, by name, as the last model call received them
        self.tools: Mapping[str, Any] = {}
        self.emitted = 0  # the tool calls the last model call sent to the tools
        # decisions a watched middleware took before the next model call (a summary)
        self.pending: list[Callable[[Iteration], None]] = []
        # what watched middlewares note for later hooks of this run, by middleware name
        self.notes: dict[str, Any] = {}
        # tool call ids a watched middleware answered without running the tool
        self.blocked: set[str] = set()
        self._started = False  # open() or an iteration started the turn's spans
        self.error: str | None = None  # the type of the exception that ended it
        # what a tool run raised (heard by a callback, not a hook): the run ends
        # with it when LangGraph releases the invocation, unless a model call
        # comes first (a middleware handled it)
        self.failing: BaseException | None = None

    @property
    def otel(self) -> Any:
        """The OpenTelemetry context the hooks attach (None before :meth:`open`)."""
        return self.turn.trace_context if self._started else None

    def open(self, parent: otel_context.Context | None) -> None:
        """Start the ``invoke_agent`` span under ``parent`` (None: the current context)."""
        self._started = True
        self.turn.start_agent(parent=otel_context.get_current() if parent is None else parent)

    def continuation_parent(self) -> otel_context.Context | None:
        """Where a continuation of this run (after an exception a middleware
        outside seamscope handled) starts: under this run's parent span when it
        had one, else under this run's ``invoke_agent``: one trace either way."""
        if not self._started:
            return None
        base = self.turn.base
        if trace.get_current_span(base).get_span_context().is_valid:
            return base
        return self.turn.agent_context

    def start_iteration(self, messages: Sequence[Any], state: Mapping[str, Any]) -> Iteration:
        with self.lock:
            return self._start_iteration(messages, state)

    def _start_iteration(self, messages: Sequence[Any], state: Mapping[str, Any]) -> Iteration:
        turn = self.turn
        turn.messages = list(messages)
        turn.state = state
        if not self._started:  # never opened: no invoke_agent, the decisions still run
            self._started = True
            turn.base = otel_context.get_current()
        iteration = turn.start_iteration()
        self.iteration = iteration
        self.usage = None
        return iteration

    def record_pending(self, iteration: Iteration) -> None:
        """Record the decisions taken before this iteration's model call in it."""
        with self.lock:
            pending, self.pending = self.pending, []
        for record in pending:
            try:
                record(iteration)
            except Exception:
                failed("langchain.watch.pending")

    def current_iteration(self) -> Iteration:
        """The open iteration, or a new one (a run resumed at its tools)."""
        with self.lock:
            if self.iteration is not None:
                return self.iteration
            return self._start_iteration(self.turn.messages, self.turn.state)

    def ends_at(self, tool: str) -> bool:
        """Whether the agent ends once a call of ``tool`` answered: it is the one
        call the last model call emitted, of a ``return_direct`` tool."""
        return self.emitted == 1 and bool(getattr(self.tools.get(tool), "return_direct", False))

    def close(self, exc: BaseException | None = None, *, blocking: bool = True) -> bool:
        """End the open iteration and the ``invoke_agent`` span (with ``exc``'s
        error.type). ``blocking=False``: give up (False) if the run is busy."""
        if not self.lock.acquire(blocking=blocking):
            return False
        try:
            if self.closed:
                return True
            self.closed = True
            if exc is not None:
                self.error = error_type(exc)
            if self._started:
                self.turn.end(exc)
            # the invocation's finalizer stays: its release forgets the ended run
            return True
        finally:
            self.lock.release()


class Runs:
    """The open runs of one middleware, oldest first (at most ``_MAX_OPEN_RUNS``).

    ``role`` and ``scope`` are the middleware's arguments: a value, or a
    callable of the LangGraph ``Runtime`` evaluated when a run opens.

    A run opens at the first hook of an invocation (seamscope adds no
    ``before_agent``/``after_agent`` node to the graph). It ends at the model
    call LangChain routes to the end of the run (see the steps), when the
    agent's exception crosses a hook, or, for a run its hooks never see end
    (a stream the caller closed part way, an error raised outside
    seamscope's hooks, another middleware's jump to the end), when LangGraph
    releases the invocation: a finalizer on the invocation's stream writer
    (the runtime's, one per invocation) closes it with error.type
    ``abandoned``. A finalizer runs wherever the garbage collector does, so
    it never waits for a lock: a run it finds busy is closed by the next hook
    of this middleware. A run paused by an interrupt is left open.
    """

    def __init__(self, layer: DecisionLayer, role: Any, scope: Any) -> None:
        self._layer = layer
        self._role = role
        self._scope = scope
        self._runs: OrderedDict[str, Run] = OrderedDict()
        self._by_invocation: dict[tuple[int, str], Run] = {}
        # runs that ended while their invocation may go on: (run, whether an
        # exception a hook saw ended it), by invocation, until LangGraph releases it
        self._ended: OrderedDict[tuple[int, str], tuple[Run, bool]] = OrderedDict()
        self._warned_outside = False
        self._lock = threading.Lock()
        self._released: deque[str] = deque()

    def for_hook(
        self, state: Any, runtime: Any, *, create: bool, resume: bool | None = None
    ) -> tuple[Run | None, bool]:
        """The run a hook belongs to: by its graph invocation, else a paused
        run of its thread; maybe new.

        Nothing is written to the agent's state and no graph node is added
        (the caller's state, stream chunks and checkpoints are the same with
        and without seamscope): the run is found by the invocation the hook
        runs in. With ``create``, the first hook of an invocation that finds
        none opens it (a still-open run of the thread from an earlier
        invocation is closed: ``abandoned``, unless an interrupt paused it,
        which this invocation resumes); parallel hooks agree on one. A hook
        of an invocation whose run already ended continues it (``resume``,
        default ``create``): see :meth:`_continued`.
        """
        self.drain()
        invocation = translate.invocation(runtime)
        key = _invocation_key(invocation)
        conversation_id = translate.thread_id(runtime)
        resuming = create if resume is None else resume
        with self._lock:
            run = self._find(invocation, conversation_id)
            ended = None
            if run is None and key is not None:
                entry = self._ended.get(key)
                # an exception's end is said once, whether or not the hook resumes
                if entry is not None and (entry[1] or resuming):
                    ended = self._ended.pop(key)
        if ended is not None:
            return self._continued(*ended, runtime, resuming)
        if run is not None or not create:
            if run is not None:
                self.watch(run, runtime)
            return run, False
        candidate = self._new(runtime, conversation_id)
        parent = active_parent()
        with self._lock:
            run = self._find(invocation, conversation_id)
            if run is None:
                candidate.open(parent)
                stale = self._register(candidate)
        if run is not None:
            self.watch(run, runtime)
            return run, False
        for old in stale:
            old.close(None if old.paused else old.failing or _Abandoned())
        self.watch(candidate, runtime)
        return candidate, True

    def _continued(
        self, ended: Run, warn: bool, runtime: Any, resume: bool
    ) -> tuple[Run | None, bool]:
        """A hook of an invocation whose run already ended: at a model call
        LangChain would route to the end (another middleware sent the agent
        on), or by an exception a middleware outside seamscope handled (a
        retry, an error handler; ``warn``: said once, a WARNING naming the
        order to use). When ``resume``, the run continues in the same trace:
        the same turn (its iterations keep counting), a new ``invoke_agent``
        under the ended run's parent (or under the ended run)."""
        if warn and not self._warned_outside:
            self._warned_outside = True
            LOG.warning(_OUTSIDE, ended.error or "an exception")
        if not resume:
            return None, False
        run = Run(uuid.uuid4().hex, ended.turn, ended.scope, ended.invocation)
        run.open(ended.continuation_parent())
        with self._lock:
            stale = self._register(run)
        for old in stale:
            old.close(None if old.paused else old.failing or _Abandoned())
        self.watch(run, runtime)
        return run, True

    def scope_of(self, runtime: Any) -> str | None:
        """Whose offloaded outputs a hook may read: the thread, else its run."""
        conversation_id = translate.thread_id(runtime)
        if conversation_id:
            return conversation_id
        with self._lock:
            run = self._find(translate.invocation(runtime), None)
        return None if run is None else run.scope

    def close(self, run: Run, exc: BaseException | None, *, seen: bool = True) -> None:
        """End ``run`` (``exc``: the agent's exception; ``seen``: it crossed a
        hook, rather than a tool run's callback). The run is remembered (at
        most ``_MAX_ENDED_RUNS``, until LangGraph releases its invocation) in
        case its invocation goes on: see :meth:`_continued`."""
        with self._lock:
            self._forget(run)
            key = _invocation_key(run.invocation)
            if key is not None:
                self._ended[key] = (run, exc is not None and seen)
                self._ended.move_to_end(key)
                while len(self._ended) > _MAX_ENDED_RUNS:
                    self._ended.popitem(last=False)
        run.close(exc)

    def fail_with(self, error: BaseException) -> None:
        """End the runs a tool run's ``error`` left failing (the agent raised it)."""
        with self._lock:
            failing = [run for run in self._runs.values() if run.failing is error]
        for run in failing:
            self.close(run, error, seen=False)

    def _forget(self, run: Run) -> None:
        """Drop ``run`` from the registry (holding the lock)."""
        if self._runs.get(run.key) is run:
            del self._runs[run.key]
        key = _invocation_key(run.invocation)
        if key is not None and self._by_invocation.get(key) is run:
            del self._by_invocation[key]

    def watch(self, run: Run, runtime: Any) -> None:
        """Follow the invocation ``runtime`` belongs to: when LangGraph releases
        it and the run is still open (and not paused), the run was abandoned."""
        writer = getattr(runtime, "stream_writer", None)
        if writer is None:
            return
        try:
            watched = run.watched
            if watched is not None and watched[0]() is writer:
                return
            finalizer = weakref.finalize(writer, self._release, run.key)
            finalizer.atexit = False
            run.watched = (weakref.ref(writer), finalizer)
            run.paused = False
            if watched is not None:
                watched[1].detach()
        except TypeError:
            return  # a writer that cannot be weakly referenced: no abandonment detection

    def _release(self, key: str) -> None:
        self._released.append(key)
        self.drain()

    def drain(self) -> None:
        """Close the released runs that are still open (never blocks: see above;
        every hook calls it once more at its end, when a run a finalizer found
        busy is free)."""
        while self._released:
            if not self._lock.acquire(blocking=False):
                return
            try:
                key = self._released.popleft()
                run = self._runs.get(key)
            except IndexError:
                return
            finally:
                self._lock.release()
            if run is None:
                self._forget_ended(key)
                continue
            if run.closed or run.paused:
                continue
            if not run.close(run.failing or _Abandoned(), blocking=False):
                self._released.append(key)
                return
            with contextlib.suppress(Exception):
                if self._lock.acquire(blocking=False):
                    try:
                        self._forget(run)
                    finally:
                        self._lock.release()

    def _forget_ended(self, key: str) -> None:
        """LangGraph released the invocation of ended run ``key``: no hook of it
        can come any more (never blocks: see above)."""
        if not self._lock.acquire(blocking=False):
            return
        try:
            for invocation, (run, _) in list(self._ended.items()):
                if run.key == key:
                    del self._ended[invocation]
        finally:
            self._lock.release()

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
        invocation = translate.invocation(runtime)
        turn = self._layer.start_turn(
            conversation_id,
            role=role if isinstance(role, str) and role else None,
            scope=scope if isinstance(scope, Mapping) else None,
            agent_span=False,
        )
        return Run(key, turn, conversation_id or f"run:{key}", invocation)

    def _register(self, run: Run) -> list[Run]:
        """Add ``run`` (holding the lock); returns the runs it supersedes or evicts."""
        conversation_id = run.turn.conversation_id
        stale: list[Run] = []
        if conversation_id:
            stale = [r for r in self._runs.values() if r.turn.conversation_id == conversation_id]
        invocation = _invocation_key(run.invocation)
        earlier = None if invocation is None else self._by_invocation.get(invocation)
        if earlier is not None and earlier not in stale:
            stale.append(earlier)  # a later run of the same invocation supersedes it
        for old in stale:
            self._forget(old)
        self._runs[run.key] = run
        if invocation is not None:
            self._by_invocation[invocation] = run
        while len(self._runs) > _MAX_OPEN_RUNS:
            evicted = next(iter(self._runs.values()))
            self._forget(evicted)
            stale.append(evicted)
        return stale

    def _find(self, invocation: tuple[Any, str] | None, conversation_id: str | None) -> Run | None:
        """The run of ``invocation``, else the thread's latest open run when this
        invocation may continue it: an interrupt paused it (it is this
        invocation's from now on), or either invocation is unknown. Another
        invocation's unpaused run is not this one's (it ended where no hook
        saw it end). Holding the lock."""
        key = _invocation_key(invocation)
        run = None if key is None else self._by_invocation.get(key)
        if run is None and conversation_id:
            for candidate in reversed(self._runs.values()):
                if candidate.turn.conversation_id == conversation_id:
                    other = _invocation_key(candidate.invocation)
                    if key is None or other is None or other == key:
                        return candidate
                    if not candidate.paused:
                        return None
                    if self._by_invocation.get(other) is candidate:
                        del self._by_invocation[other]
                    candidate.invocation = invocation
                    self._by_invocation[key] = candidate
                    return candidate
        return run


def _invocation_key(invocation: tuple[Any, str] | None) -> tuple[int, str] | None:
    return None if invocation is None else (id(invocation[0]), invocation[1])


def active_parent() -> otel_context.Context | None:
    """The context seamscope's spans join: None when a span is already current
    (the caller's, OpenLLMetry's), else the span OpenInference's LangChain
    instrumentation keeps for the current LangChain run (it does not make its
    spans current), if it is loaded."""
    if trace.get_current_span().get_span_context().is_valid:
        return None
    module = sys.modules.get("openinference.instrumentation.langchain")
    find = getattr(module, "get_current_span", None)
    instrumentor = getattr(module, "LangChainInstrumentor", None)
    if find is None or instrumentor is None:
        return None
    try:
        # loaded but not instrumented: its lookup would only print a warning
        if not instrumentor().is_instrumented_by_opentelemetry:
            return None
        span = find()
    except Exception:
        return None
    if isinstance(span, trace.Span) and span.get_span_context().is_valid:
        return trace.set_span_in_context(span)
    return None


@dataclass(slots=True)
class _Kept:
    """What watched middlewares took out of one conversation's prompts."""

    cleared: dict[str, tuple[str, str, Any, str]] = field(default_factory=dict)
    """tool call id -> (compaction id, tool, args, placeholder)"""
    summaries: dict[str, str] = field(default_factory=dict)
    """summary text -> compaction id"""
    evicted: dict[str, tuple[str, str, str, float]] = field(default_factory=dict)
    """tool call id -> (compaction id, path, preview, removed tokens)"""
    read_back: dict[str, float] = field(default_factory=dict)
    """eviction compaction id -> the tokens reads of its file brought back (what
    the conversation's last prompt holds of them, plus this step's reads)"""
    absent: set[str] = field(default_factory=set)
    """evicted tool call ids the offload store has no record of"""
    reread: set[str] = field(default_factory=set)
    current: tuple[str, ...] = ()
    """the cleared and evicted results (compaction ids) the last real prompt held"""


def _count_reads(kept: _Kept, messages: Sequence[Any]) -> None:
    """Set each eviction's tokens read back from the reads of its file that
    ``messages`` (the conversation as a prompt holds it) answer, and mark the
    ones read back whole as re-read (their preview saves nothing more);
    holding the lock. A read is the call an ``AIMessage`` emitted whose
    ``ToolMessage`` answers it; one naming several evicted files reads the
    latest of them."""
    evictions = list(reversed(kept.evicted.values()))
    calls: dict[str, tuple[str, Any]] = {}
    back: dict[str, float] = {}
    for message in messages:
        for raw in getattr(message, "tool_calls", None) or ():
            if isinstance(raw, Mapping) and isinstance(raw.get("id"), str):
                calls[raw["id"]] = (str(raw.get("name") or ""), raw.get("args"))
        call = calls.get(getattr(message, "tool_call_id", None) or "")
        if call is None or not isinstance(call[1], Mapping):
            continue
        result = translate.text(getattr(message, "content", None))
        for compaction_id, path, _, _ in evictions:
            if explain.reads_path(call[0], call[1], result, path):
                back[compaction_id] = back.get(compaction_id, 0.0) + (
                    0.0 if result is None else estimate_tokens(result)
                )
                break
    for compaction_id, _, _, removed in evictions:
        tokens = back.get(compaction_id, 0.0)
        kept.read_back[compaction_id] = tokens
        if tokens >= removed:
            kept.reread.add(compaction_id)
        else:
            kept.reread.discard(compaction_id)


class Compactions:
    """Per conversation (scope), the tool results context editing cleared, the
    ones Deep Agents' filesystem evicted to a file, and the summaries that
    replaced messages, so each is recorded once and counted as carried by
    every later prompt that really holds its placeholder, preview or summary;
    at most ``limit`` conversations (the least recently used dropped first).

    An eviction made on another worker is learnt from the shared offload
    store that keeps its record (:meth:`carried` with ``outputs``): a prompt
    that holds its preview finds it there, and reads of its file are its
    recalls here too. How much of an evicted file the reads have brought back
    is read from the prompt itself (the reads' results it holds), so every
    worker counts it alike, whichever worker made the reads."""

    def __init__(self, limit: int) -> None:
        self._kept: Conversations[_Kept] = Conversations(limit, _Kept)

    def clear(
        self, scope: str, tool_call_id: str, compaction_id: str, tool: str, args: Any, text: str
    ) -> bool:
        """Note a cleared tool result; False when it was already noted."""
        with self._kept.of(scope) as kept:
            if tool_call_id in kept.cleared:
                return False
            kept.cleared[tool_call_id] = (compaction_id, tool, args, text)
            return True

    def evict(
        self,
        scope: str,
        tool_call_id: str,
        compaction_id: str,
        path: str,
        preview: str,
        removed_tokens: float,
    ) -> bool:
        """Note a tool result evicted to ``path``; False when it was already noted."""
        with self._kept.of(scope) as kept:
            if tool_call_id in kept.evicted:
                return False
            kept.evicted[tool_call_id] = (compaction_id, path, preview, removed_tokens)
            return True

    def summary(self, scope: str, text: str, compaction_id: str) -> None:
        with self._kept.of(scope) as kept:
            kept.summaries[text] = compaction_id

    def carried(
        self, scope: str, messages: Sequence[Any], outputs: Outputs | None = None
    ) -> tuple[str, ...]:
        """The compaction ids whose placeholder or summary ``messages`` (a prompt
        a model really receives) hold, minus the ones re-read; they become the
        conversation's currently cleared results. ``outputs``: a shared
        offload store's view, where the evictions another worker saw made
        are found (their record, once per conversation and tool call)."""
        if outputs is not None and outputs.store.shared:
            self._learn(scope, messages, outputs)
        with self._kept.existing(scope) as kept:
            if kept is None:
                return ()
            if kept.evicted:
                _count_reads(kept, messages)
            found: list[str] = []
            cleared: list[str] = []
            for message in messages:
                body = translate.text(getattr(message, "content", None))
                if body is None:
                    continue
                # a tool result by its call, an evicted user message by its id
                call_id = getattr(message, "tool_call_id", None) or getattr(message, "id", "") or ""
                entry = kept.cleared.get(call_id)
                if entry is not None and body == entry[3] and entry[0] not in kept.reread:
                    found.append(entry[0])
                    cleared.append(entry[0])
                    continue
                evicted = kept.evicted.get(call_id)
                if evicted is not None and body == evicted[2] and evicted[0] not in kept.reread:
                    found.append(evicted[0])
                    cleared.append(evicted[0])
                    continue
                compaction_id = kept.summaries.get(body)
                if compaction_id is not None and translate.is_summary(message):
                    found.append(compaction_id)
            kept.current = tuple(cleared)
            return tuple(dict.fromkeys(found))

    def learn(self, scope: str, messages: Sequence[Any], outputs: Outputs) -> None:
        """Note the evictions whose preview ``messages`` (the state a tool call
        runs with) hold, as held by the prompt that emitted the call, and how
        much of their files the reads ``messages`` answer brought back: a run
        resumed here at its tools (after an interrupt) read that prompt on
        another worker, which may have made the eviction and the reads."""
        if outputs.store.shared:
            self._learn(scope, messages, outputs)
        with self._kept.existing(scope) as kept:
            if kept is None or not kept.evicted:
                return
            _count_reads(kept, messages)
            held = []
            for message in messages:
                call_id = getattr(message, "tool_call_id", None) or getattr(message, "id", "")
                evicted = kept.evicted.get(call_id or "")
                if (
                    evicted is not None
                    and evicted[0] not in kept.reread
                    and translate.text(getattr(message, "content", None)) == evicted[2]
                ):
                    held.append(evicted[0])
            kept.current = tuple(dict.fromkeys((*kept.current, *held)))

    def _learn(self, scope: str, messages: Sequence[Any], outputs: Outputs) -> tuple[str, ...]:
        """Note the evictions whose preview ``messages`` hold that this process
        did not see made, from the store's records (one lookup for the new
        ones); returns their compaction ids."""
        notices: dict[str, str] = {}
        for message in messages:
            call_id = getattr(message, "tool_call_id", None) or getattr(message, "id", None)
            body = translate.text(getattr(message, "content", None))
            if isinstance(call_id, str) and call_id and body is not None:
                path = explain.eviction_path(body)
                if path is not None:
                    notices[call_id] = path
        if not notices:
            return ()
        with self._kept.of(scope) as kept:
            new = [i for i in notices if i not in kept.evicted and i not in kept.absent]
        if not new:
            return ()
        found = outputs.compactions(scope, OffloadMechanism.DEEPAGENTS_EVICTION, new)
        learnt: list[str] = []
        with self._kept.of(scope) as kept:
            for call_id, record in found.items():
                if record is None:
                    kept.absent.add(call_id)
                elif call_id not in kept.evicted:
                    entry = (record.offload_id, notices[call_id], record.stub, record.output_tokens)
                    kept.evicted[call_id] = entry
                    learnt.append(record.offload_id)
        return tuple(learnt)

    def reread(self, scope: str, tool: str, args: Any, text: str | None = None) -> str | None:
        """The cleared result (its compaction id) a new call of ``tool`` with the
        same ``args`` fetches again, if the last prompt held it cleared; it is
        no longer counted as carried. Else the evicted result whose file the
        call reads (``text``: its output), if the last prompt held its preview
        (:func:`~._explain.reads_path`): once the reads of that file have
        brought back as many tokens as were evicted, the preview saves nothing
        more and is no longer counted as carried."""
        with self._kept.existing(scope) as kept:
            if kept is None:
                return None
            evicted = self._read_back(kept, tool, args, text)
            if evicted is not None:
                return evicted
            for compaction_id, name, old_args, _ in reversed(list(kept.cleared.values())):
                if (
                    compaction_id in kept.current
                    and compaction_id not in kept.reread
                    and name == tool
                    and old_args == args
                ):
                    kept.reread.add(compaction_id)
                    return str(compaction_id)
            return None

    @staticmethod
    def _read_back(kept: _Kept, tool: str, args: Any, text: str | None) -> str | None:
        """The eviction whose file a call of ``tool`` reads (holding the lock)."""
        if not kept.evicted or not isinstance(args, Mapping):
            return None
        for compaction_id, path, _, removed in reversed(list(kept.evicted.values())):
            if (
                compaction_id in kept.current
                and compaction_id not in kept.reread
                and explain.reads_path(tool, args, text, path)
            ):
                back = kept.read_back.get(compaction_id, 0.0) + (
                    0.0 if text is None else estimate_tokens(text)
                )
                kept.read_back[compaction_id] = back
                if back >= removed:
                    kept.reread.add(compaction_id)
                return compaction_id
        return None
