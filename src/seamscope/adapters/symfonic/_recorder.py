"""The span map and bookkeeping of one instrumented ``SymfonicAgent``.

:class:`_RunRecorder` keeps one entry per ``agent.run`` (its
``invoke_agent`` span) and, in it, the react-node iteration being recorded
(its ``seamscope.iteration``, ``chat`` and ``execute_tool`` spans); it
receives symfonic's callbacks, feeds the offload ledger, and records the
POST seam once symfonic's tool node shows its outcome. What the wrapped
policies, resolver and gate report is recorded by its subclass in
:mod:`._seams`.

This is the only module of the adapter that imports seamscope's telemetry
internals (the observer and its config, the GenAI span helpers, the offload
ledger, the telemetry error log) or reads an observer's span handle
(:func:`_handle_span`); the other modules take them from here.
"""

from __future__ import annotations

import contextvars
import dataclasses
import functools
import re
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind

from seamscope import __version__
from seamscope._internal import (
    GenAISpans,
    Invocation,
    OTelObserver,
    TelemetryConfig,
    build_dispatch_context,
    contained_error,
    guard_observer,
    start_invocation,
    telemetry_error,
    tool_definitions,
)
from seamscope.adapters._kit import estimate_tokens
from seamscope.adapters.symfonic._state import _Call, _Iteration, _Run
from seamscope.adapters.symfonic._translate import (
    _REACT_NODE,
    _RECALL_TOOL,
    _dispatch_record,
    _final_calls,
    _recalled_tokens,
    _stubs,
    _usage,
)
from seamscope.decisions import (
    DecisionObserver,
    ModelUsage,
    OffloadGateDecision,
    OffloadGateInputs,
    OffloadLedger,
    PostModelResult,
    PricingTable,
    ToolCall,
)
from seamscope.decisions.records import CarriedStub, GateCall, Seam
from seamscope.telemetry import conventions as c

__all__ = [
    "_ACTIVE",
    "ActiveGate",
    "OffloadLedger",
    "TelemetryConfig",
    "_MAX_OFFLOAD_IDS",
    "_Call",
    "_Iteration",
    "_Run",
    "_RunRecorder",
    "_contained",
    "_default_ledger",
    "_default_observer",
    "_handle_span",
    "_span_context",
]

_MAX_RUNS = 1024
_MAX_OFFLOAD_IDS = 4096


@dataclasses.dataclass(frozen=True, slots=True)
class ActiveGate:
    """What the offload gate hook may reach of the recorder whose model call is
    in flight (the seams module's recorder; this module does not import it):
    its identity, the run id, whether it is installed, and its gate call
    (``gate(original, inputs, run_id, site)``)."""

    recorder: object
    run_id: str
    installed: Callable[[], bool]
    gate: Callable[[Callable[[Any], Any], Any, str, tuple[str | None, str | None]], Any]


_ACTIVE: contextvars.ContextVar[ActiveGate | None] = contextvars.ContextVar(
    "seamscope_symfonic_active", default=None
)
"""The instrumentation and run id of the react node running in this context.

Set when the PRE seam runs (first thing in symfonic's react node), cleared at
its ``on_llm_end``: the offload gate, the POST seam and symfonic's WARNINGs
run in between, synchronously, in the same context.
"""

_TOOL_ERROR = re.compile(r"Error: ([A-Za-z_][A-Za-z0-9_.]*)\(")
"""LangGraph's ToolNode text for a tool that raised: ``Error: {exc!r}`` (the class name)."""


# --------------------------------------------------------------------------
# The recorder.
# --------------------------------------------------------------------------


def _contained(method: Callable[..., Any]) -> Callable[..., Any]:
    """Telemetry never raises into symfonic: log and carry on."""

    @functools.wraps(method)
    def call(self: _RunRecorder, *args: Any) -> Any:
        try:
            return method(self, *args)
        except Exception as exc:
            self._failed(method.__name__, exc)
            return None

    return call


class _RunRecorder:
    """The runs and iterations of one agent, their spans, and the ledger feed.

    The hooks only ever call its methods; each method that a hook calls is
    contained (:func:`_contained`), so a failure here is logged as a
    telemetry error named after the method and symfonic carries on.
    """

    def __init__(
        self,
        agent: Any,
        *,
        observer: DecisionObserver,
        tracer_provider: trace.TracerProvider | None,
        agent_name: str | None,
        ledger: OffloadLedger,
    ) -> None:
        self.agent = agent
        self.observer = observer
        self.agent_name = agent_name
        self.ledger = ledger
        self._obs = guard_observer(observer)
        provider = tracer_provider or trace.get_tracer_provider()
        self._tracer = provider.get_tracer("seamscope", __version__)
        self._runs: OrderedDict[str, _Run] = OrderedDict()
        # Keyed by (conversation id or "", tool call id): one offload (its id
        # and sizes) per offloaded output of a conversation, and the outputs
        # the gate saw.
        self._offloads: OrderedDict[tuple[str, str], CarriedStub] = OrderedDict()
        # fired offloads the ledger follows from the first call that sends
        # their stub (its real size): (conversation, tool call id) -> the
        # decision and its span link
        self._pending: OrderedDict[tuple[str, str], tuple[OffloadGateDecision, Any, str | None]] = (
            OrderedDict()
        )
        self._gated: OrderedDict[tuple[str, str], None] = OrderedDict()
        # (conversation id, symfonic memory id) -> offload id, from the stubs
        # the model was sent; (conversation id, offload id) of recalled offloads.
        self._mem_ids: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._expanded: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._open_conversations: dict[str, int] = {}
        self._lock = threading.Lock()
        # Per instrumentation, so one agent's conversation block or run call
        # is never read by another instrumented agent running inside it.
        self._conversation: contextvars.ContextVar[str | None] = contextvars.ContextVar(
            "seamscope_symfonic_conversation", default=None
        )
        self._call: contextvars.ContextVar[_Call | None] = contextvars.ContextVar(
            "seamscope_symfonic_run_call", default=None
        )
        self._installed = False
        # set by the install: the policies as configured (before wrapping) and
        # the model symfonic falls back to when the resolver raises
        self._pre_policies: tuple[Any, ...] = ()
        self._post_policies: tuple[Any, ...] = ()
        self._snapshot_default: Any = None

    # -- conversations -----------------------------------------------------------

    @_contained
    def _open_conversation(self, conversation_id: str) -> bool:
        with self._lock:
            depth = self._open_conversations.get(conversation_id, 0)
            self._open_conversations[conversation_id] = depth + 1
        return True

    @_contained
    def _close_conversation(self, conversation_id: str) -> None:
        with self._lock:
            depth = self._open_conversations.get(conversation_id, 1) - 1
            if depth > 0:
                self._open_conversations[conversation_id] = depth
                return
            self._open_conversations.pop(conversation_id, None)
            pending = [(k, v) for k, v in self._pending.items() if k[0] == conversation_id]
            for keys in (
                self._offloads,
                self._gated,
                self._mem_ids,
                self._expanded,
                self._pending,
            ):
                for key in [k for k in keys if k[0] == conversation_id]:
                    del keys[key]
        try:
            for _, (decision, link, tool) in pending:  # fired, its stub never sent
                self.ledger.record_offload(
                    decision, conversation_id=conversation_id, link=link, tool_name=tool
                )
        finally:
            self.ledger.end_conversation(conversation_id)

    def _follow_offload(
        self,
        conversation_id: str,
        call_id: str,
        decision: OffloadGateDecision,
        link: Any,
        tool_name: str | None = None,
    ) -> None:
        """A fired offload of this conversation's output ``call_id``: the ledger
        follows it from the first model call that sends its stub, priced on
        that stub (:meth:`_carried`)."""
        with self._lock:
            self._pending[(conversation_id, call_id)] = (decision, link, tool_name)
            while len(self._pending) > _MAX_OFFLOAD_IDS:
                self._pending.popitem(last=False)

    # -- helpers -----------------------------------------------------------------

    def _failed(self, hook: str, exc: BaseException) -> None:
        telemetry_error(f"symfonic.{hook}", exc)

    def _span(
        self,
        name: str,
        kind: SpanKind,
        attrs: dict[str, Any],
        parent: otel_context.Context | None,
    ) -> Invocation:
        """Start one of this adapter's own spans; names and string attributes are
        cut to the observer's ``max_attribute_length``, as on every other span."""
        config = getattr(self._obs, "config", None)
        limit = getattr(config, "max_attribute_length", 1024)
        limit = limit if isinstance(limit, int) and limit > 1 else 1024

        def cut(value: Any) -> Any:
            if isinstance(value, str) and len(value) > limit:
                return value[: limit - 1] + "…"
            return value

        return start_invocation(
            self._tracer,
            cut(name),
            {key: cut(value) for key, value in attrs.items()},
            kind=kind,
            parent=parent,
        )

    def _conversation_attrs(self, run: _Run | None, attrs: dict[str, Any]) -> dict[str, Any]:
        if run is not None and run.conversation_id:
            attrs[c.ATTR_GEN_AI_CONVERSATION_ID] = run.conversation_id
        if self.agent_name:
            attrs[c.ATTR_GEN_AI_AGENT_NAME] = self.agent_name
        return attrs

    def _new_run(
        self, run_id: str, invocation: Invocation | None, conversation: str | None
    ) -> _Run:
        ctx = otel_context.get_current() if invocation is None else invocation.context
        run = _Run(run_id, invocation, ctx, conversation)
        evicted: list[_Run] = []
        with self._lock:
            previous = self._runs.pop(run_id, None)
            if previous is not None:
                evicted.append(previous)
            self._runs[run_id] = run
            while len(self._runs) > _MAX_RUNS:
                evicted.append(self._runs.popitem(last=False)[1])
        for old in evicted:
            self._close_run(old)
        return run

    def _run(self, run_id: Any, *, create: bool = False) -> _Run | None:
        with self._lock:
            run = self._runs.get(str(run_id))
        if run is None and create:
            run = self._new_run(str(run_id), None, self._conversation.get())
        return run

    def _new_iteration(self, run: _Run) -> _Iteration:
        if run.current is not None:
            self._close_iteration(run, run.current)
        index = run.iterations
        run.iterations += 1
        attrs = self._conversation_attrs(run, {c.ATTR_ITERATION_INDEX: index})
        it = _Iteration(index, self._span(c.SPAN_ITERATION, SpanKind.INTERNAL, attrs, run.ctx))
        run.current = it
        return it

    def _close_iteration(self, run: _Run, it: _Iteration) -> None:
        try:
            self._flush_post(run, it, None)
        finally:
            if it.chat is not None:
                it.chat.stop()
                it.chat = None
            for tool in it.tools.values():
                tool.stop()
            it.tools.clear()
            it.invocation.end(it.error_type)
            if run.current is it:
                run.current = None

    def _close_run(self, run: _Run) -> None:
        try:
            if run.current is not None:
                self._close_iteration(run, run.current)
        except Exception as exc:
            self._failed("close_run", exc)
        if run.invocation is not None:
            run.invocation.end(run.error_type)

    def _close_runs(self) -> None:
        """End every run still open (and its spans), forgetting them."""
        with self._lock:
            runs = list(self._runs.values())
            self._runs.clear()
        for run in runs:
            self._close_run(run)

    def _context(
        self,
        seam: Seam,
        run: _Run,
        it: _Iteration,
        messages: Any,
        *,
        resolved: Any = None,
        forced: Any = None,
        role: Any = None,
    ) -> Any:
        return build_dispatch_context(
            seam,
            tuple(messages or ()),
            resolved_tool_names=tuple(resolved or ()),
            forced_tool_choice=forced if isinstance(forced, str) else None,
            iteration=it.index,
            role=role if isinstance(role, str) else None,
            conversation_id=run.conversation_id,
            agent_name=self.agent_name,
        )

    # -- callbacks -----------------------------------------------------------------

    @_contained
    def _agent_start(self, event: Any) -> None:
        conversation = self._conversation.get()
        attrs: dict[str, Any] = {c.ATTR_GEN_AI_OPERATION_NAME: "invoke_agent"}
        if self.agent_name:
            attrs[c.ATTR_GEN_AI_AGENT_NAME] = self.agent_name
        if conversation:
            attrs[c.ATTR_GEN_AI_CONVERSATION_ID] = conversation
        name = f"invoke_agent {self.agent_name}" if self.agent_name else "invoke_agent"
        span = self._span(name, SpanKind.INTERNAL, attrs, otel_context.get_current())
        self._new_run(str(event.run_id), span, conversation)
        call = self._call.get()
        if call is not None:
            call.runs.append(str(event.run_id))

    @_contained
    def _agent_end(self, event: Any) -> None:
        run_id = str(event.run_id)
        call = self._call.get()
        if (
            call is not None
            and run_id in call.runs
            and getattr(event, "final_response", None) is None
            and getattr(event, "node_count", 0) is None
        ):
            # symfonic's error path (an exception is crossing agent.run): the
            # run call that started this run ends its spans with the
            # exception's type (:meth:`_abort_runs`).
            return
        with self._lock:
            run = self._runs.pop(run_id, None)
        if run is not None:
            self._close_run(run)

    # -- the run call ----------------------------------------------------------------

    async def _guarded_run(
        self, original: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """``agent.run``: an exception crossing it ends the runs it started, with its type.

        The exception (``KeyboardInterrupt``, ``SystemExit``, a cancellation,
        anything symfonic re-raises) propagates unchanged.
        """
        call = _Call()
        token = self._call.set(call)
        try:
            return await original(*args, **kwargs)
        except BaseException as exc:
            self._abort_runs(call, exc)
            raise
        finally:
            self._call.reset(token)
            self._finish_call(call)

    @_contained
    def _abort_runs(self, call: _Call, exc: BaseException) -> None:
        kind = contained_error("run", exc).error_type
        with self._lock:
            runs = [r for r in (self._runs.pop(i, None) for i in call.runs) if r is not None]
        for run in runs:
            run.error_type = kind
            it = run.current
            if it is not None:
                it.error_type = kind
                for tool in it.tools.values():
                    tool.fail(kind)
                if it.chat is not None:
                    it.chat.fail(kind)
            self._close_run(run)

    @_contained
    def _finish_call(self, call: _Call) -> None:
        # Runs of this call symfonic never ended (nothing is left open).
        with self._lock:
            runs = [r for r in (self._runs.pop(i, None) for i in call.runs) if r is not None]
        for run in runs:
            self._close_run(run)

    @_contained
    def _node_start(self, event: Any) -> None:
        if getattr(event, "node_name", None) != _REACT_NODE:
            return
        run = self._run(event.run_id, create=True)
        if run is not None:
            self._new_iteration(run)

    @_contained
    def _node_error(self, event: Any) -> None:
        run = self._run(event.run_id)
        if run is None:
            return
        error_type = str(getattr(event, "error_type", "") or "") or "_OTHER"
        run.error_type = error_type
        it = run.current
        if it is not None and getattr(event, "node_name", None) == _REACT_NODE:
            it.error_type = error_type

    @_contained
    def _llm_start(self, event: Any) -> None:
        if getattr(event, "node_name", None) != _REACT_NODE:
            return
        run = self._run(event.run_id, create=True)
        if run is None:
            return
        it = run.current or self._new_iteration(run)
        if it.chat is not None:
            it.chat.stop()
            it.chat = None
        if run.conversation_id:
            it.carried = self._carried(run.conversation_id, getattr(event, "messages", ()))
        model = it.model or str(getattr(event, "model", "") or "") or "unknown"
        attrs = self._conversation_attrs(
            run, {c.ATTR_GEN_AI_OPERATION_NAME: "chat", c.ATTR_GEN_AI_REQUEST_MODEL: model}
        )
        it.chat = self._span(f"chat {model}", SpanKind.CLIENT, attrs, it.ctx)

    @_contained
    def _llm_pre_call(self, event: Any) -> None:
        """The tools symfonic binds for the react node's model call, as the
        provider will see them: ``gen_ai.tool.definitions`` on its chat span
        (descriptions and schemas only with content capture on)."""
        if getattr(event, "node_name", None) != _REACT_NODE:
            return
        run = self._run(event.run_id)
        it = None if run is None else run.current
        span = None if it is None or it.chat is None else it.chat.span
        if span is None or not span.is_recording():
            return
        config = getattr(self.observer, "config", None)
        if not isinstance(config, TelemetryConfig):
            config = TelemetryConfig.create()
        tools = [
            {
                "name": t.get("name"),
                "description": t.get("description"),
                "parameters": t.get("schema"),
            }
            for t in getattr(event, "tools", None) or ()
            if isinstance(t, Mapping)
        ]
        value = tool_definitions(
            tools,
            max_length=config.max_attribute_length,
            max_items=config.max_array_length,
            detail=bool(self._obs.capture_content),
            mask=config.mask,
        )
        if value is not None:
            span.set_attribute(c.ATTR_GEN_AI_TOOL_DEFINITIONS, value)

    def _carried(self, conversation_id: str, messages: Any) -> list[CarriedStub]:
        """The offloads whose stub (not the output) the prompt carries.

        Read from the messages symfonic sends: a stub of an output whose
        fired decision was recorded in this conversation, unless the model
        recalled that output since (its content is back in the prompt).
        Each comes with its sizes, so the ledger still counts the saving of
        an offload it already settled (idle, evicted). Also learns each
        stub's memory id, for the recall tool. The first call that sends an
        offload's stub starts the ledger's following of it, priced on that
        stub (its characters / 4, the one token estimator), not on the
        gate's assumed stub size.
        """
        carried: list[CarriedStub] = []
        follow: list[tuple[OffloadGateDecision, Any, str | None, float]] = []
        with self._lock:
            for call_id, mem_id, stub in _stubs(messages):
                offload = self._offloads.get((conversation_id, call_id))
                if offload is None:
                    continue
                pending = self._pending.pop((conversation_id, call_id), None)
                if pending is not None:
                    offload = dataclasses.replace(offload, stub_tokens=estimate_tokens(stub))
                    self._offloads[(conversation_id, call_id)] = offload
                    follow.append((*pending, offload.stub_tokens))
                key = (conversation_id, mem_id)
                self._mem_ids[key] = offload.offload_id
                self._mem_ids.move_to_end(key)
                while len(self._mem_ids) > _MAX_OFFLOAD_IDS:
                    self._mem_ids.popitem(last=False)
                if (conversation_id, offload.offload_id) not in self._expanded:
                    carried.append(offload)
        if follow:
            self._start_following(conversation_id, follow)
        return carried

    @_contained
    def _start_following(
        self, conversation_id: str, follow: list[tuple[OffloadGateDecision, Any, str | None, float]]
    ) -> None:
        """The ledger follows these fired offloads (with the tool whose output
        each replaced), each priced on its stub sent."""
        for decision, link, tool, stub_tokens in follow:
            self.ledger.record_offload(
                decision,
                conversation_id=conversation_id,
                link=link,
                stub_tokens=stub_tokens,
                tool_name=tool,
            )

    @_contained
    def _llm_end(self, event: Any) -> None:
        if getattr(event, "node_name", None) != _REACT_NODE:
            return
        active = _ACTIVE.get()
        if active is not None and active.recorder is self:
            _ACTIVE.set(None)
        run = self._run(event.run_id)
        it = run.current if run is not None else None
        if run is None or it is None:
            return
        usage = _usage(getattr(event, "usage", None))
        it.output_tokens = 0 if usage is None else usage.output_tokens
        chat, it.chat = it.chat, None
        if chat is not None:
            try:
                if usage is not None:
                    GenAISpans.record_usage(
                        chat.span, usage, str(getattr(event, "model", "") or "") or None
                    )
            finally:
                chat.stop()
        if run.conversation_id:
            model = it.model or str(getattr(event, "model", "") or "") or "unknown"
            carried, it.carried = it.carried or [], None
            self.ledger.record_model_call(
                run.conversation_id,
                model=model,
                usage=usage if usage is not None else ModelUsage(),
                carried=carried,
            )

    @_contained
    def _before_tool(self, event: Any, state: Any) -> None:
        run = self._run(event.run_id)
        it = run.current if run is not None else None
        if run is None or it is None:
            return
        if it.dispatches and not it.flushed:
            self._flush_post(run, it, _final_calls(state))
        call_id = str(getattr(event, "call_id", "") or "")
        tool = str(getattr(event, "tool_name", "") or "")
        attrs: dict[str, Any] = {
            c.ATTR_GEN_AI_OPERATION_NAME: "execute_tool",
            c.ATTR_GEN_AI_TOOL_NAME: tool,
        }
        if call_id:
            attrs[c.ATTR_GEN_AI_TOOL_CALL_ID] = call_id
        if run.conversation_id:
            attrs[c.ATTR_GEN_AI_CONVERSATION_ID] = run.conversation_id
            if tool == _RECALL_TOOL and call_id:
                args = getattr(event, "args", None)
                mem_id = str(args.get("mem_id") or "") if isinstance(args, Mapping) else ""
                with self._lock:
                    offload_id = self._mem_ids.get((run.conversation_id, mem_id))
                if offload_id is not None:
                    it.recalls[call_id] = offload_id
        previous = it.tools.pop(call_id, None)
        if previous is not None:
            previous.stop()
        it.tools[call_id] = self._span(f"execute_tool {tool}", SpanKind.INTERNAL, attrs, it.ctx)

    @_contained
    def _tool_result(self, event: Any) -> None:
        run = self._run(event.run_id)
        it = run.current if run is not None else None
        if run is None or it is None:
            return
        call_id = str(getattr(event, "call_id", "") or "")
        is_error = bool(getattr(event, "is_error", False))
        tool = it.tools.pop(call_id, None)
        if tool is not None:
            tool.end(_tool_error_type(getattr(event, "result", None)) if is_error else None)
        offload_id = it.recalls.pop(call_id, None)
        if offload_id is None or is_error or not run.conversation_id:
            return
        # The recalled text re-enters the prompt; the model call that asked
        # for it is paid once, however many recalls it emitted.
        output_tokens = 0 if it.recall_output_charged else it.output_tokens
        it.recall_output_charged = True
        input_tokens = _recalled_tokens(getattr(event, "result", None))
        with self._lock:
            key = (run.conversation_id, offload_id)
            self._expanded[key] = None
            while len(self._expanded) > _MAX_OFFLOAD_IDS:
                self._expanded.popitem(last=False)
        self.ledger.record_recall(
            run.conversation_id,
            offload_id,
            model=it.model or "unknown",
            input_tokens=input_tokens,
            output_tokens=output_tokens,
        )

    # -- POST seam ---------------------------------------------------------------------

    def _flush_post(
        self, run: _Run, it: _Iteration, final_calls: Mapping[str, ToolCall] | None
    ) -> None:
        """Record the POST seam once its outcome is known (or the iteration ends)."""
        if it.flushed or not it.dispatches:
            return
        it.flushed = True
        sctx = self._context(
            Seam.POST_MODEL,
            run,
            it,
            it.post_messages,
            resolved=it.dispatches[0].available,
            role=it.post_role,
        )
        obs = self._obs
        token = otel_context.attach(it.ctx)
        try:
            handle = obs.start_post_model(sctx, tuple(d.emitted for d in it.dispatches))
            records = []
            for d in it.dispatches:
                h = obs.start_dispatch(sctx, d.index, d.emitted)
                final = None if final_calls is None else final_calls.get(d.emitted.id)
                record = _dispatch_record(d, final, it.adopter_drops.get(d.emitted.id))
                obs.end_dispatch(h, record)
                records.append(record)
            obs.end_post_model(
                handle,
                PostModelResult(
                    tuple(r.final for r in records),
                    tuple(records),
                    max(d.duration_s for d in it.dispatches),
                ),
            )
        finally:
            otel_context.detach(token)

    # -- offload bookkeeping -------------------------------------------------------------

    def _offload_id(
        self, call: GateCall | None, inputs: OffloadGateInputs | None
    ) -> tuple[str, bool]:
        """One id per offloaded tool output of a conversation, however often
        symfonic re-decides it; and whether this decision is its first.

        An output without a tool call id gets a fresh id and is not
        followed: symfonic does not stub an output it cannot pair.
        """
        if call is None or not call.tool_call_id or inputs is None:
            return uuid.uuid4().hex[:16], False
        key = (call.conversation_id or "", call.tool_call_id)
        with self._lock:
            offload = self._offloads.get(key)
            if offload is not None:
                return offload.offload_id, False
            offload = CarriedStub(uuid.uuid4().hex[:16], inputs.output_tokens, inputs.stub_tokens)
            self._offloads[key] = offload
            while len(self._offloads) > _MAX_OFFLOAD_IDS:
                self._offloads.popitem(last=False)
            return offload.offload_id, True


def _handle_span(handle: Any) -> Any:
    """The span of an observer's span handle (None when it has none)."""
    return getattr(handle, "span", None)


def _span_context(handle: Any) -> trace.SpanContext | None:
    """The span context of an observer's span handle, when it has one."""
    span = _handle_span(handle)
    get = getattr(span, "get_span_context", None)
    if not callable(get):
        return None
    ctx = get()
    return ctx if isinstance(ctx, trace.SpanContext) and ctx.is_valid else None


def _tool_error_type(result: Any) -> str:
    """The exception class a failed tool call reports (``_OTHER`` when its text does not say)."""
    found = _TOOL_ERROR.match(result) if isinstance(result, str) else None
    return found.group(1) if found is not None else "_OTHER"


# --------------------------------------------------------------------------
# The observer and ledger an instrumentation gets by default.
# --------------------------------------------------------------------------


def _default_observer(
    policies: tuple[Any, ...],
    *,
    tracer_provider: trace.TracerProvider | None,
    meter_provider: Any | None,
    telemetry_config: TelemetryConfig | None,
) -> OTelObserver:
    """An :class:`OTelObserver` on these providers; the policies' names are known labels."""
    names = {getattr(p, "name", None) for p in policies}
    return OTelObserver(
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        config=telemetry_config,
        known_labels={c.ATTR_POLICY_NAME: {n for n in names if isinstance(n, str) and n}},
    )


def _default_ledger(pricing: PricingTable, *, observer: DecisionObserver) -> OffloadLedger:
    """An :class:`OffloadLedger` that reports to the instrumentation's observer."""
    return OffloadLedger(pricing=pricing, observer=observer)
