"""symfonic-core's ``SymfonicAgent``, observed by seamscope (extra ``seamscope[symfonic]``).

::

    inst = instrument_symfonic(agent, tracer_provider=tp, meter_provider=mp,
                               agent_name="analyst")
    with inst.conversation("conv-7"):
        await agent.run("how are sales doing?")
    inst.uninstrument()        # the agent and symfonic are exactly as before

The decisions symfonic really takes appear as seamscope's decision spans,
span events and metrics, with the same contract as seamscope's own loop
(:mod:`seamscope.telemetry.conventions`); nothing of symfonic is forked and
nothing it decides changes. Per ``agent.run`` (one user turn)::

    invoke_agent {agent}
    └─ seamscope.iteration                     (one per react-node call)
       ├─ seamscope.seam.pre_model             (events: seamscope.policy.evaluated)
       ├─ seamscope.offload_gate               (one per gate call symfonic makes)
       ├─ chat {model}                         (CLIENT)
       ├─ seamscope.seam.post_model            (only when the model emitted tool calls)
       │  └─ seamscope.dispatch                (one per emitted call; events as above)
       └─ execute_tool {tool}

The offload ledger (``ledger=``, by default an :class:`OffloadLedger` on the
same providers priced by :func:`symfonic_pricing`) follows the offloads
symfonic fires in each ``inst.conversation(...)`` block to their realized
savings and costs:

* the first fired gate decision of an output in the conversation starts an
  offload (``record_offload``, linked to that ``seamscope.offload_gate``
  span); symfonic re-decides the output on every later iteration, under the
  same offload id;
* each react-node model call is recorded with the usage symfonic reports
  on ``on_llm_end`` (input, output, cache-read and cache-creation tokens)
  and, as carried, the offloads whose stub was in the messages symfonic
  sent (``on_llm_start``), less those the model has recalled since;
* a ``recall_tool_result(mem_id=...)`` call is matched to its offload by
  the memory id the stub named, and recorded with the recalled text's
  tokens (chars / 4) and the output tokens of the model call that asked
  for it;
* when the outermost block of a conversation id exits, its offloads
  settle: one ``seamscope.offload.settle`` span each, linked to the gate
  span. Without a conversation id the ledger is not fed.

Where it hooks, from the least to the most intrusive (each is undone
exactly by :meth:`SymfonicInstrumentation.uninstrument`):

* **symfonic's callback interface.** A handler placed first in the agent's
  deps-level ``CallbackManager`` receives ``on_agent_start/end``,
  ``on_node_start/error``, ``on_llm_start/end``, ``on_tool_call_dispatch``
  (the call after the policies, with the palette in ``available_tools``),
  ``on_before_tool_call`` (what really dispatches) and ``on_tool_result``
  (the ledger reads the messages, usage and recall results they carry).
  It never rewrites or vetoes anything. The agent's manager is replaced by
  a new one holding this handler followed by the original handlers; the
  original object is registered back on uninstall.
* **The configured ``tool_call_policies``.** Each policy is rebuilt as an
  instance of a subclass of its own class with wrapped ``match``/
  ``guard``/``args_transform`` and a ``matches_tool`` that reports the
  emitted tool name (symfonic's POST seam has no hook, and its context
  lacks the emitted message). The agent gets a copy of its frozen config
  holding those policies and its model resolver the same policies; the
  original config object and policy tuple are put back on uninstall.
* **The PRE seam.** The agent's ``_AgentModelResolver.resolve`` (an
  instance attribute shadowing the method) and its ``role_model_resolver``
  are wrapped: what ``resolve`` returns is the ``ModelConfig`` symfonic
  hands to ``provider.get_chat_model`` (``gen_ai.request.model``).
* **The offload gate.** ``symfonic.core.tool_offload_gate.
  evaluate_offload_gate``, which symfonic looks up on every call, is
  wrapped (once per process, however many agents are instrumented) to
  record the priced decision symfonic otherwise discards. The wrapper
  returns symfonic's own decision object; the original function is put
  back when the last instrumentation goes.
* **One logging handler** on ``symfonic.core.nodes.react``: symfonic's
  WARNING is the only trace of an adopter rewrite its dispatch palette
  gate drops.

symfonic's own OpenTelemetry layer is left as configured (off by default);
this module never sets global providers. Telemetry never changes or breaks
the agent: every hook (and every call into the ledger) is contained, and
adopter exceptions are re-raised to symfonic unchanged. Where symfonic's
behaviour differs from the design it implements, what symfonic really did
is recorded; ``docs/symfonic.md`` lists the differences and the limits of
the ledger's view.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import logging
import re
import sys
import threading
import time
import uuid
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from decimal import Decimal
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from seamscope import __version__
from seamscope.decisions import (
    DispatchRecord,
    GateCall,
    GuardResult,
    ModelConfig,
    ModelPrice,
    ModelUsage,
    OffloadGateDecision,
    OffloadGateInputs,
    OffloadReasonCode,
    PaletteVerdict,
    PolicyEvaluation,
    PolicyResult,
    PostModelResult,
    PreModelResult,
    PricingSource,
    PricingTable,
    Seam,
    ToolCall,
    WinnerSource,
    build_dispatch_context,
    guard_observer,
)
from seamscope.decisions._seams import ContainedError, contained_error
from seamscope.telemetry import conventions as c
from seamscope.telemetry._config import TelemetryConfig
from seamscope.telemetry._genai import GenAISpans
from seamscope.telemetry._logging import telemetry_error
from seamscope.telemetry._observer import OTelObserver
from seamscope.telemetry.ledger import CarriedStub, OffloadLedger

try:
    import symfonic.core.tool_offload_gate as _sym_gate
    from symfonic.agent.engine import _AgentModelResolver
    from symfonic.core.callbacks import CallbackManager
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "seamscope.adapters.symfonic needs symfonic-core: pip install 'seamscope[symfonic]'"
    ) from exc

__all__ = ["SymfonicInstrumentation", "instrument_symfonic", "symfonic_pricing"]

_log = logging.getLogger("seamscope.adapters.symfonic")

_REACT_NODE = "react"
_REACT_LOGGER = "symfonic.core.nodes.react"
_ADOPTER_DROP_PREFIX = "on_tool_call_dispatch: rewrite targets unregistered tool"
_MAX_RUNS = 1024
_MAX_OFFLOAD_IDS = 4096
_RECALL_TOOL = "recall_tool_result"
_STUB_PREFIX = "[symfonic.tool_memory "
_STUB_MEM_ID = re.compile(r"archived as mem=(\S+)")
_CHARS_PER_TOKEN = 4  # symfonic's own estimate (its gate prices chars / 4)

_TAP_ATTR = "_seamscope_tap"

_ACTIVE: contextvars.ContextVar[tuple[SymfonicInstrumentation, str] | None] = (
    contextvars.ContextVar("seamscope_symfonic_active", default=None)
)
"""The instrumentation and run id of the react node running in this context.

Set when the PRE seam runs (first thing in symfonic's react node), cleared at
its ``on_llm_end``: the offload gate, the POST seam and symfonic's WARNINGs
run in between, synchronously, in the same context.
"""

_PRE: contextvars.ContextVar[_PreRecorder | None] = contextvars.ContextVar(
    "seamscope_symfonic_pre", default=None
)
"""The PRE-seam recorder while symfonic's ``resolve`` runs (set and reset around it)."""

_CONVERSATION: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "seamscope_symfonic_conversation", default=None
)


# --------------------------------------------------------------------------
# What the hooks gather while symfonic decides.
# --------------------------------------------------------------------------


@dataclasses.dataclass(eq=False)
class _PreRecorder:
    """Policy predicate and resolver calls during one ``resolve``."""

    owner: SymfonicInstrumentation
    results: dict[int, tuple[bool, BaseException | None]] = dataclasses.field(default_factory=dict)
    resolver_called: bool = False
    resolver_result: Any = None
    resolver_error: BaseException | None = None


@dataclasses.dataclass(eq=False)
class _PostEval:
    """One policy at symfonic's POST seam, for one emitted call."""

    index: int
    when_ok: bool
    matched: bool | None = None
    match_error: BaseException | None = None
    guard: bool | None = None
    guard_error: BaseException | None = None
    transform_called: bool = False
    transform_input: dict[str, Any] | None = None
    transform_error: BaseException | None = None


@dataclasses.dataclass(eq=False)
class _Group:
    """The policy evaluations of one emitted tool call (in symfonic's order)."""

    emitted: str
    started: float
    evals: list[_PostEval] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(eq=False)
class _Dispatch:
    """One emitted call as the policies left it (our handler runs first)."""

    index: int
    emitted: ToolCall
    after_policy: ToolCall
    policy: Any
    guard: GuardResult
    transformed: bool
    policy_dropped: bool
    evaluations: tuple[PolicyEvaluation, ...]
    errors: tuple[ContainedError, ...]
    available: tuple[str, ...]
    duration_s: float


@dataclasses.dataclass(eq=False)
class _Iteration:
    index: int
    span: trace.Span
    ctx: otel_context.Context
    pre_done: bool = False
    model: str | None = None
    chat: trace.Span | None = None
    groups: list[_Group] = dataclasses.field(default_factory=list)
    dispatches: list[_Dispatch] = dataclasses.field(default_factory=list)
    post_messages: tuple[Any, ...] | None = None
    post_role: str | None = None
    flushed: bool = False
    adopter_drops: dict[str, str] = dataclasses.field(default_factory=dict)
    tools: dict[str, trace.Span] = dataclasses.field(default_factory=dict)
    # the offload ledger: offloads whose stub this iteration's prompt carried,
    # the model call's output tokens, and the recalls it emitted (call id ->
    # offload id)
    carried: list[CarriedStub] | None = None
    output_tokens: int = 0
    recall_output_charged: bool = False
    recalls: dict[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(eq=False)
class _Run:
    run_id: str
    span: trace.Span | None
    ctx: otel_context.Context
    conversation_id: str | None
    iterations: int = 0
    current: _Iteration | None = None
    error_type: str | None = None


@dataclasses.dataclass(eq=False)
class _SeamCall:
    """An open PRE seam or gate call: its run, span handle and context token."""

    run: _Run | None
    iteration: _Iteration | None
    token: Any
    handle: Any
    started: float
    recorder: _PreRecorder | None = None
    inputs: OffloadGateInputs | None = None
    call: GateCall | None = None


# --------------------------------------------------------------------------
# Policies: a subclass of the policy's own class, so isinstance still holds.
# --------------------------------------------------------------------------

_TAPPED_CLASSES: dict[type, type] = {}
_TAPPED_LOCK = threading.Lock()


def _tapped_class(base: type) -> type:
    """A subclass of ``base`` whose ``matches_tool`` reports to the instrumentation."""
    with _TAPPED_LOCK:
        cls = _TAPPED_CLASSES.get(base)
        if cls is not None:
            return cls

        def matches_tool(self: Any, tool_name: str) -> bool:
            result: bool = base.matches_tool(self, tool_name)  # type: ignore[attr-defined]
            tap = self.__dict__.get(_TAP_ATTR)
            if tap is not None:
                tap[0]._on_matches_tool(tap[1], tool_name, result)
            return result

        cls = type(
            base.__name__,
            (base,),
            {
                "matches_tool": matches_tool,
                "__module__": base.__module__,
                "__qualname__": base.__qualname__,
                "__doc__": base.__doc__,
            },
        )
        _TAPPED_CLASSES[base] = cls
        return cls


def _wrappable(policy: Any) -> bool:
    return (
        dataclasses.is_dataclass(policy)
        and not isinstance(policy, type)
        and callable(getattr(policy, "match", None))
        and callable(getattr(type(policy), "matches_tool", None))
    )


def _qualname(exc: BaseException) -> str:
    return contained_error("x", exc).error_type


def _model_name(model: Any) -> str:
    name = getattr(model, "model_name", None)
    if isinstance(name, str) and name:
        return name
    text = str(model) if model is not None else ""
    return text or "unknown"


def _as_args(value: Any) -> dict[str, Any]:
    if isinstance(value, Mapping):
        return dict(value)
    return {}


# --------------------------------------------------------------------------
# The offload gate wrapper: one per process, shared by every instrumentation.
# --------------------------------------------------------------------------


class _GatePatch:
    lock = threading.Lock()
    original: Any = None
    wrapper: Any = None
    users = 0

    @classmethod
    def acquire(cls) -> None:
        with cls.lock:
            if cls.users == 0:
                original = _sym_gate.evaluate_offload_gate
                cls.original = original
                cls.wrapper = _gate_wrapper(original)
                _sym_gate.evaluate_offload_gate = cls.wrapper
            cls.users += 1

    @classmethod
    def release(cls) -> None:
        with cls.lock:
            if cls.users == 0:
                return
            cls.users -= 1
            if cls.users:
                return
            if _sym_gate.evaluate_offload_gate is cls.wrapper:
                _sym_gate.evaluate_offload_gate = cls.original
            else:
                _log.warning(
                    "symfonic.core.tool_offload_gate.evaluate_offload_gate was replaced "
                    "after seamscope wrapped it; leaving the newer object in place "
                    "(seamscope's wrapper is now a pass-through)"
                )
            cls.original = None
            cls.wrapper = None


def _gate_wrapper(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def evaluate_offload_gate(inputs: Any) -> Any:
        active = _ACTIVE.get()
        if active is None or not active[0].installed:
            return original(inputs)
        return active[0]._gate(original, inputs, active[1])

    return evaluate_offload_gate


def _gate_site() -> tuple[str | None, str | None]:
    """(tool_call_id, tool_name) of the ToolMessage symfonic is gating, if visible.

    symfonic passes the gate only the economics; the message being gated
    is the loop variable ``msg`` of its caller's caller
    (``_maybe_compact_tool_results``). Read-only and best effort.
    """
    try:
        frame: Any = sys._getframe(1)
        for _ in range(10):
            if frame is None:
                break
            if frame.f_code.co_name == "_maybe_compact_tool_results":
                msg = frame.f_locals.get("msg")
                call_id = str(getattr(msg, "tool_call_id", "") or "") or None
                name = str(getattr(msg, "name", "") or "") or None
                return call_id, name
            frame = frame.f_back
    except Exception:
        pass
    return None, None


def _reason_code(inputs: Any, decision: Any) -> OffloadReasonCode:
    """The closed reason of a symfonic gate decision, from its own branches."""
    if decision is not None and bool(getattr(decision, "fire", False)):
        return OffloadReasonCode.NET_POSITIVE
    if float(inputs.output_tokens) < float(inputs.large_offload_threshold_tokens):
        return OffloadReasonCode.BELOW_THRESHOLD
    table = getattr(_sym_gate, "MODEL_PRICING", None)
    if isinstance(table, Mapping) and table.get(inputs.model_name) is None:
        return OffloadReasonCode.UNPRICED_MODEL
    return OffloadReasonCode.NET_NOT_POSITIVE


def _convert_decision(
    inputs: Any, decision: Any, offload_id: str | None, reason: str | None = None
) -> OffloadGateDecision:
    """symfonic's gate decision in seamscope's shape; figures exactly as symfonic's.

    USD figures are symfonic's floats; ``net_saving`` is that float as a
    Decimal. ``horizon`` and ``recall_probability`` are clamped as symfonic
    clamps them.
    """
    code = _reason_code(inputs, decision)
    priced = code in (OffloadReasonCode.NET_POSITIVE, OffloadReasonCode.NET_NOT_POSITIVE)
    net = float(getattr(decision, "net_saving_usd", 0.0) or 0.0)
    return OffloadGateDecision(
        fire=bool(getattr(decision, "fire", False)),
        net_saving_usd=net,
        reprefill_saving_usd=float(getattr(decision, "reprefill_saving_usd", 0.0) or 0.0),
        stub_carry_cost_usd=float(getattr(decision, "stub_carry_cost_usd", 0.0) or 0.0),
        expected_recall_hop_cost_usd=float(
            getattr(decision, "expected_recall_hop_cost_usd", 0.0) or 0.0
        ),
        reason=reason if reason is not None else str(getattr(decision, "reason", "")),
        reason_code=code,
        pricing_source=PricingSource.SYMFONIC if priced else PricingSource.NONE,
        model_name=str(inputs.model_name),
        output_tokens=float(inputs.output_tokens),
        horizon=max(0, int(inputs.horizon)),
        recall_probability=max(0.0, min(1.0, float(inputs.recall_probability))),
        stub_tokens=int(inputs.stub_tokens),
        net_saving=Decimal(repr(net)),
        offload_id=offload_id,
    )


def symfonic_pricing(*, use_genai_prices: bool = True) -> PricingTable:
    """symfonic's ``MODEL_PRICING`` as a seamscope :class:`PricingTable`.

    Every row becomes an override (input, output, cache-read and
    cache-write rates exactly as symfonic lists them, USD per 1M tokens),
    so the ledger prices a model call with the prices the offload gate
    decided with. symfonic's 1-hour cache-write rate has no counterpart
    and is left out; a row seamscope cannot read is skipped. Models
    symfonic does not list fall back to genai-prices unless
    ``use_genai_prices`` is False. The table is read once, when called.
    """
    overrides: dict[str, ModelPrice] = {}
    table = getattr(_sym_gate, "MODEL_PRICING", None)
    if isinstance(table, Mapping):
        for model, row in table.items():
            if not isinstance(model, str) or not model or not isinstance(row, Mapping):
                continue
            try:
                overrides[model] = ModelPrice(
                    row["input"], row["output"], row.get("cache_read"), row.get("cache_write")
                )
            except (KeyError, ValueError):
                continue
    return PricingTable(overrides, use_genai_prices=use_genai_prices)


def _usage(raw: Any) -> ModelUsage | None:
    """The token usage symfonic reports on ``LLMEndEvent.usage`` (None when absent).

    symfonic flattens the AIMessage's ``usage_metadata``: cache reads and
    writes come as ``cache_read_input_tokens`` and
    ``cache_creation_input_tokens``. LangChain counts them inside
    ``input_tokens``; a provider that does not is corrected so the total
    covers them.
    """
    if not isinstance(raw, Mapping):
        return None

    def tokens(*keys: str) -> int:
        for key in keys:
            try:
                value = int(raw.get(key) or 0)
            except (TypeError, ValueError):
                continue
            if value:
                return max(0, value)
        return 0

    read = tokens("cache_read_input_tokens", "cache_read_tokens")
    write = tokens("cache_creation_input_tokens", "cache_creation_tokens")
    return ModelUsage(
        max(tokens("input_tokens"), read + write), tokens("output_tokens"), read, write
    )


def _content_text(content: Any) -> str:
    """A message content as text, the way symfonic measures it."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, Mapping) and isinstance(block.get("text"), str):
                parts.append(block["text"])
            else:
                parts.append(str(block))
        return "".join(parts)
    return "" if content is None else str(content)


def _stubs(messages: Any) -> Iterator[tuple[str, str]]:
    """(tool_call_id, mem_id) of every ToolMessage that is symfonic's offload stub.

    symfonic replaces an offloaded output by its stub only in what it sends
    to the model, keeping the ``tool_call_id``; the stub names the memory id
    its ``recall_tool_result`` tool takes.
    """
    for message in tuple(messages or ()):
        if getattr(message, "type", None) != "tool":
            continue
        content = getattr(message, "content", None)
        if not isinstance(content, str) or not content.startswith(_STUB_PREFIX):
            continue
        call_id = str(getattr(message, "tool_call_id", "") or "")
        found = _STUB_MEM_ID.search(content)
        if call_id and found is not None:
            yield call_id, found.group(1)


# --------------------------------------------------------------------------
# symfonic callbacks (async only; never rewrites, never vetoes).
# --------------------------------------------------------------------------


class _Handler:
    """The callback handler symfonic calls; it only forwards to the instrumentation.

    Not a ``BaseCallbackHandler`` subclass on purpose: symfonic builds an
    optional hook's event only when some handler defines the hook, so this
    defines only the hooks it needs (plus the required ones).
    """

    def __init__(self, instrumentation: SymfonicInstrumentation) -> None:
        self._inst = instrumentation

    def __repr__(self) -> str:
        return "seamscope.adapters.symfonic handler"

    async def on_agent_start(self, event: Any) -> None:
        self._inst._agent_start(event)

    async def on_agent_end(self, event: Any) -> None:
        self._inst._agent_end(event)

    async def on_node_start(self, event: Any) -> None:
        self._inst._node_start(event)

    async def on_node_end(self, event: Any) -> None:
        return None

    async def on_node_error(self, event: Any) -> None:
        self._inst._node_error(event)

    async def on_llm_start(self, event: Any) -> None:
        self._inst._llm_start(event)

    async def on_llm_end(self, event: Any) -> None:
        self._inst._llm_end(event)

    async def on_token_composition(self, event: Any) -> None:
        return None

    async def on_tool_call_dispatch(self, event: Any, state: Any) -> None:
        self._inst._dispatch(event)
        return None

    async def on_before_tool_call(self, event: Any, state: Any) -> None:
        self._inst._before_tool(event, state)
        return None

    async def on_tool_result(self, event: Any) -> None:
        self._inst._tool_result(event)


class _AdopterDropLog(logging.Handler):
    """Sees symfonic's WARNING when its dispatch palette gate drops an adopter rewrite."""

    def __init__(self, instrumentation: SymfonicInstrumentation) -> None:
        super().__init__(level=logging.WARNING)
        self._inst = instrumentation

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if not str(record.msg).startswith(_ADOPTER_DROP_PREFIX):
                return
            args = record.args
            if isinstance(args, tuple) and len(args) == 4:
                self._inst._adopter_dropped(str(args[3]), str(args[0]))
        except Exception:
            pass


# --------------------------------------------------------------------------
# The instrumentation.
# --------------------------------------------------------------------------


def _contained(method: Callable[..., Any]) -> Callable[..., Any]:
    """Telemetry never raises into symfonic: log and carry on."""

    @functools.wraps(method)
    def call(self: SymfonicInstrumentation, *args: Any) -> Any:
        try:
            return method(self, *args)
        except Exception as exc:
            self._failed(method.__name__, exc)
            return None

    return call


class SymfonicInstrumentation:
    """seamscope's hooks installed in one ``SymfonicAgent``; undo with :meth:`uninstrument`.

    Build it with :func:`instrument_symfonic`. It is also a context manager
    (uninstruments on exit). ``ledger`` is the :class:`OffloadLedger` that
    follows the offloads symfonic fires in a conversation.
    """

    def __init__(
        self,
        agent: Any,
        *,
        observer: Any,
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
        self._gated: OrderedDict[tuple[str, str], None] = OrderedDict()
        # (conversation id, symfonic memory id) -> offload id, from the stubs
        # the model was sent; (conversation id, offload id) of recalled offloads.
        self._mem_ids: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._expanded: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._open_conversations: dict[str, int] = {}
        self._lock = threading.Lock()
        self._installed = False
        self._handler = _Handler(self)
        self._log_handler = _AdopterDropLog(self)
        self._restore: list[Callable[[], None]] = []
        self._pre_policies: tuple[Any, ...] = ()
        self._post_policies: tuple[Any, ...] = ()
        self._snapshot_default: Any = None

    # -- public --------------------------------------------------------------

    @property
    def installed(self) -> bool:
        """Whether the hooks are in place."""
        return self._installed

    @contextlib.contextmanager
    def conversation(self, conversation_id: str | None) -> Iterator[None]:
        """Runs started inside carry ``gen_ai.conversation.id`` = ``conversation_id``.

        The block is the conversation for the offload ledger: when the
        outermost block of that id exits, its offloads are settled
        (:meth:`OffloadLedger.end_conversation`) and forgotten here, so a
        later block with the same id starts a new conversation. Without a
        conversation id the ledger is not fed.
        """
        token = _CONVERSATION.set(conversation_id)
        opened = bool(conversation_id) and self._open_conversation(str(conversation_id))
        try:
            yield
        finally:
            _CONVERSATION.reset(token)
            if opened:
                self._close_conversation(str(conversation_id))

    def uninstrument(self) -> None:
        """Put back every object that was replaced; idempotent.

        Each replaced attribute is restored only if it still holds what this
        instrumentation put there (otherwise it is left alone, with a WARNING).
        Spans still open are ended.
        """
        if not self._installed:
            return
        self._installed = False
        while self._restore:
            undo = self._restore.pop()
            try:
                undo()
            except Exception as exc:  # pragma: no cover - defensive
                self._failed("uninstrument", exc)
        with self._lock:
            runs = list(self._runs.values())
            self._runs.clear()
        for run in runs:
            self._close_run(run)

    def __enter__(self) -> SymfonicInstrumentation:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.uninstrument()

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
            for keys in (self._offloads, self._gated, self._mem_ids, self._expanded):
                for key in [k for k in keys if k[0] == conversation_id]:
                    del keys[key]
        self.ledger.end_conversation(conversation_id)

    # -- install ---------------------------------------------------------------

    def _install(self) -> None:
        agent = self.agent
        deps = getattr(agent, "_deps", None)
        config = getattr(agent, "_config", None)
        resolver = deps.get(_AgentModelResolver) if deps is not None else None
        if deps is None or config is None or resolver is None:
            raise TypeError(
                "instrument_symfonic expects a SymfonicAgent built by symfonic-core 9.12 "
                "(it has no _deps/_config/_AgentModelResolver)"
            )
        for attr in ("_tool_call_policies", "_resolver", "_snapshot_default"):
            if not hasattr(resolver, attr):
                raise TypeError(f"unsupported symfonic-core: _AgentModelResolver has no {attr}")
        manager = deps.get(CallbackManager)
        self._snapshot_default = resolver._snapshot_default
        try:
            self._install_policies(agent, config, resolver)
            self._install_resolve(resolver)
            self._install_callbacks(deps, manager)
            self._install_log_handler()
            _GatePatch.acquire()
            # Released by uninstrument(), or when an instrumented agent that
            # was never uninstrumented is garbage-collected with its hooks.
            self._restore.append(weakref.finalize(self, _GatePatch.release))
        except BaseException:
            self._installed = True
            self.uninstrument()
            raise
        self._installed = True

    def _install_policies(self, agent: Any, config: Any, resolver: Any) -> None:
        cache: dict[tuple[int, int], Any] = {}

        def wrap_all(policies: tuple[Any, ...]) -> tuple[Any, ...]:
            out = []
            for index, policy in enumerate(policies):
                key = (id(policy), index)
                if key not in cache:
                    cache[key] = self._wrap_policy(policy, index) if _wrappable(policy) else policy
                out.append(cache[key])
            return tuple(out)

        post = tuple(getattr(config, "tool_call_policies", ()) or ())
        pre = tuple(resolver._tool_call_policies or ())
        self._post_policies = post
        self._pre_policies = pre
        wrapped_post = wrap_all(post)
        wrapped_pre = wrap_all(pre)
        if any(w is not p for w, p in zip(wrapped_post, post, strict=True)):
            new_config = config.model_copy(update={"tool_call_policies": wrapped_post})
            agent._config = new_config

            def undo_config() -> None:
                if agent._config is new_config:
                    agent._config = config
                else:
                    _log.warning("SymfonicAgent._config was replaced; not restoring it")

            self._restore.append(undo_config)
        original_pre = resolver._tool_call_policies
        resolver._tool_call_policies = wrapped_pre

        def undo_pre() -> None:
            if resolver._tool_call_policies is wrapped_pre:
                resolver._tool_call_policies = original_pre
            else:
                _log.warning("_AgentModelResolver._tool_call_policies was replaced; not restoring")

        self._restore.append(undo_pre)

    def _wrap_policy(self, policy: Any, index: int) -> Any:
        inst = self
        fields = {f.name: getattr(policy, f.name) for f in dataclasses.fields(policy) if f.init}
        match = policy.match

        @functools.wraps(match)
        def wrapped_match(ctx: Any) -> Any:
            return inst._match(match, index, ctx)

        fields["match"] = wrapped_match
        guard = getattr(policy, "guard", None)
        if callable(guard):

            @functools.wraps(guard)
            def wrapped_guard(ctx: Any) -> Any:
                return inst._guard(guard, index, ctx)

            fields["guard"] = wrapped_guard
        transform = getattr(policy, "args_transform", None)
        if callable(transform):

            @functools.wraps(transform)
            def wrapped_transform(args: Any, ctx: Any) -> Any:
                return inst._transform(transform, index, args, ctx)

            fields["args_transform"] = wrapped_transform
        wrapped = _tapped_class(type(policy))(**fields)
        for field in dataclasses.fields(policy):
            if not field.init:
                object.__setattr__(wrapped, field.name, getattr(policy, field.name))
        object.__setattr__(wrapped, _TAP_ATTR, (self, index))
        return wrapped

    def _install_resolve(self, resolver: Any) -> None:
        inst = self
        had_own = "resolve" in vars(resolver)
        previous = vars(resolver).get("resolve")
        original_resolve = resolver.resolve

        @functools.wraps(original_resolve)
        def resolve(ctx: Any) -> Any:
            return inst._resolve(original_resolve, ctx)

        resolver.resolve = resolve

        def undo_resolve() -> None:
            if vars(resolver).get("resolve") is not resolve:
                _log.warning("_AgentModelResolver.resolve was replaced; not restoring it")
                return
            if had_own:
                resolver.resolve = previous
            else:
                del resolver.resolve

        self._restore.append(undo_resolve)
        role_resolver = resolver._resolver
        if role_resolver is None:
            return

        @functools.wraps(role_resolver)
        def wrapped_resolver(ctx: Any) -> Any:
            return inst._role_resolver(role_resolver, ctx)

        resolver._resolver = wrapped_resolver

        def undo_resolver() -> None:
            if resolver._resolver is wrapped_resolver:
                resolver._resolver = role_resolver
            else:
                _log.warning("_AgentModelResolver._resolver was replaced; not restoring it")

        self._restore.append(undo_resolver)

    def _install_callbacks(self, deps: Any, manager: Any) -> None:
        handlers = list(getattr(manager, "_handlers", ()) or ()) if manager is not None else []
        ours = CallbackManager([self._handler, *handlers])
        deps.register(CallbackManager, ours)

        def undo_callbacks() -> None:
            if deps.get(CallbackManager) is not ours:
                _log.warning("the agent's CallbackManager was replaced; not restoring it")
                return
            if manager is not None:
                deps.register(CallbackManager, manager)
            else:
                capabilities = getattr(deps, "_capabilities", None)
                if isinstance(capabilities, dict):
                    capabilities.pop(CallbackManager, None)

        self._restore.append(undo_callbacks)

    def _install_log_handler(self) -> None:
        logger = logging.getLogger(_REACT_LOGGER)
        logger.addHandler(self._log_handler)
        self._restore.append(lambda: logger.removeHandler(self._log_handler))

    # -- helpers -----------------------------------------------------------------

    def _failed(self, hook: str, exc: BaseException) -> None:
        telemetry_error(f"symfonic.{hook}", exc)

    def _span(
        self,
        name: str,
        kind: SpanKind,
        attrs: dict[str, Any],
        parent: otel_context.Context | None,
    ) -> trace.Span:
        return self._tracer.start_span(name, context=parent, kind=kind, attributes=attrs)

    def _conversation_attrs(self, run: _Run | None, attrs: dict[str, Any]) -> dict[str, Any]:
        if run is not None and run.conversation_id:
            attrs[c.ATTR_GEN_AI_CONVERSATION_ID] = run.conversation_id
        if self.agent_name:
            attrs[c.ATTR_GEN_AI_AGENT_NAME] = self.agent_name
        return attrs

    def _new_run(self, run_id: str, span: trace.Span | None, conversation: str | None) -> _Run:
        ctx = trace.set_span_in_context(span) if span is not None else otel_context.get_current()
        run = _Run(run_id, span, ctx, conversation)
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
        run = self._runs.get(str(run_id))
        if run is None and create:
            run = self._new_run(str(run_id), None, _CONVERSATION.get())
        return run

    def _active_iteration(self) -> _Iteration | None:
        active = _ACTIVE.get()
        if active is None or active[0] is not self:
            return None
        run = self._runs.get(active[1])
        return None if run is None else run.current

    def _new_iteration(self, run: _Run) -> _Iteration:
        if run.current is not None:
            self._close_iteration(run, run.current)
        index = run.iterations
        run.iterations += 1
        attrs = self._conversation_attrs(run, {c.ATTR_ITERATION_INDEX: index})
        span = self._span(c.SPAN_ITERATION, SpanKind.INTERNAL, attrs, run.ctx)
        it = _Iteration(index, span, trace.set_span_in_context(span, run.ctx))
        run.current = it
        return it

    def _close_iteration(self, run: _Run, it: _Iteration) -> None:
        try:
            self._flush_post(run, it, None)
        finally:
            if it.chat is not None:
                _end(it.chat)
                it.chat = None
            for span in it.tools.values():
                _end(span)
            it.tools.clear()
            _end(it.span)
            if run.current is it:
                run.current = None

    def _close_run(self, run: _Run) -> None:
        try:
            if run.current is not None:
                self._close_iteration(run, run.current)
        except Exception as exc:
            self._failed("close_run", exc)
        if run.span is not None:
            if run.error_type:
                with contextlib.suppress(Exception):
                    run.span.set_attribute(c.ATTR_ERROR_TYPE, run.error_type)
                    run.span.set_status(Status(StatusCode.ERROR, run.error_type))
            _end(run.span)

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
        conversation = _CONVERSATION.get()
        attrs: dict[str, Any] = {c.ATTR_GEN_AI_OPERATION_NAME: "invoke_agent"}
        if self.agent_name:
            attrs[c.ATTR_GEN_AI_AGENT_NAME] = self.agent_name
        if conversation:
            attrs[c.ATTR_GEN_AI_CONVERSATION_ID] = conversation
        name = f"invoke_agent {self.agent_name}" if self.agent_name else "invoke_agent"
        span = self._span(name, SpanKind.INTERNAL, attrs, otel_context.get_current())
        self._new_run(str(event.run_id), span, conversation)

    @_contained
    def _agent_end(self, event: Any) -> None:
        with self._lock:
            run = self._runs.pop(str(event.run_id), None)
        if run is not None:
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
            it.span.set_attribute(c.ATTR_ERROR_TYPE, error_type)
            it.span.set_status(Status(StatusCode.ERROR, error_type))

    @_contained
    def _llm_start(self, event: Any) -> None:
        if getattr(event, "node_name", None) != _REACT_NODE:
            return
        run = self._run(event.run_id, create=True)
        if run is None:
            return
        it = run.current or self._new_iteration(run)
        if it.chat is not None:
            _end(it.chat)
            it.chat = None
        if run.conversation_id:
            it.carried = self._carried(run.conversation_id, getattr(event, "messages", ()))
        model = it.model or str(getattr(event, "model", "") or "") or "unknown"
        attrs = self._conversation_attrs(
            run, {c.ATTR_GEN_AI_OPERATION_NAME: "chat", c.ATTR_GEN_AI_REQUEST_MODEL: model}
        )
        it.chat = self._span(f"chat {model}", SpanKind.CLIENT, attrs, it.ctx)

    def _carried(self, conversation_id: str, messages: Any) -> list[CarriedStub]:
        """The offloads whose stub (not the output) the prompt carries.

        Read from the messages symfonic sends: a stub of an output whose
        fired decision was recorded in this conversation, unless the model
        recalled that output since (its content is back in the prompt).
        Each comes with its sizes, so the ledger still counts the saving of
        an offload it already settled (idle, evicted). Also learns each
        stub's memory id, for the recall tool.
        """
        carried: list[CarriedStub] = []
        with self._lock:
            for call_id, mem_id in _stubs(messages):
                offload = self._offloads.get((conversation_id, call_id))
                if offload is None:
                    continue
                key = (conversation_id, mem_id)
                self._mem_ids[key] = offload.offload_id
                self._mem_ids.move_to_end(key)
                while len(self._mem_ids) > _MAX_OFFLOAD_IDS:
                    self._mem_ids.popitem(last=False)
                if (conversation_id, offload.offload_id) not in self._expanded:
                    carried.append(offload)
        return carried

    @_contained
    def _llm_end(self, event: Any) -> None:
        if getattr(event, "node_name", None) != _REACT_NODE:
            return
        active = _ACTIVE.get()
        if active is not None and active[0] is self:
            _ACTIVE.set(None)
        run = self._run(event.run_id)
        it = run.current if run is not None else None
        if run is None or it is None:
            return
        usage = _usage(getattr(event, "usage", None))
        it.output_tokens = 0 if usage is None else usage.output_tokens
        span, it.chat = it.chat, None
        if span is not None:
            try:
                if usage is not None:
                    GenAISpans.record_usage(
                        span, usage, str(getattr(event, "model", "") or "") or None
                    )
            finally:
                _end(span)
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
    def _dispatch(self, event: Any) -> None:
        run = self._run(event.run_id)
        it = run.current if run is not None else None
        if it is None:
            return
        index = len(it.dispatches)
        group = it.groups[index] if index < len(it.groups) else None
        available = tuple(str(t) for t in (getattr(event, "available_tools", ()) or ()))
        after = ToolCall(str(event.call_id), str(event.tool_name), _as_args(event.args))
        (evaluations, errors, winner, guard, transformed, transform_input) = self._post_outcome(
            group
        )
        dropped = winner is not None and winner.redirect_to not in available
        if group is not None and after.name != (
            group.emitted if (winner is None or dropped) else winner.redirect_to
        ):
            # Not the call these evaluations were about: record what is certain.
            self._failed("dispatch_mismatch", LookupError(after.name))
            group, evaluations, errors, winner = None, (), (), None
            guard, transformed, transform_input, dropped = GuardResult.NONE, False, None, False
        elif group is None and len(it.groups) == 0:
            # No redirect policy applies: symfonic's walk skipped every policy.
            evaluations = tuple(
                PolicyEvaluation(p.name, Seam.POST_MODEL, PolicyResult.SKIPPED)
                for p in self._post_policies
                if _wrappable(p) and getattr(p, "redirect_to", None) is None
            )
        if group is None:
            emitted = after
            started = time.perf_counter()
        else:
            args = transform_input if transform_input is not None else after.args
            emitted = ToolCall(after.id, group.emitted, dict(args))
            started = group.started
        it.dispatches.append(
            _Dispatch(
                index=index,
                emitted=emitted,
                after_policy=after,
                policy=winner,
                guard=guard,
                transformed=transformed,
                policy_dropped=dropped,
                evaluations=tuple(evaluations),
                errors=tuple(errors),
                available=available,
                duration_s=time.perf_counter() - started,
            )
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
                offload_id = self._mem_ids.get((run.conversation_id, mem_id))
                if offload_id is not None:
                    it.recalls[call_id] = offload_id
        previous = it.tools.pop(call_id, None)
        if previous is not None:
            _end(previous)
        it.tools[call_id] = self._span(f"execute_tool {tool}", SpanKind.INTERNAL, attrs, it.ctx)

    @_contained
    def _tool_result(self, event: Any) -> None:
        run = self._run(event.run_id)
        it = run.current if run is not None else None
        if run is None or it is None:
            return
        call_id = str(getattr(event, "call_id", "") or "")
        is_error = bool(getattr(event, "is_error", False))
        span = it.tools.pop(call_id, None)
        if span is not None:
            if is_error:
                span.set_status(Status(StatusCode.ERROR))
            _end(span)
        offload_id = it.recalls.pop(call_id, None)
        if offload_id is None or is_error or not run.conversation_id:
            return
        # The recalled text re-enters the prompt; the model call that asked
        # for it is paid once, however many recalls it emitted.
        output_tokens = 0 if it.recall_output_charged else it.output_tokens
        it.recall_output_charged = True
        text = _content_text(getattr(event, "result", None))
        with self._lock:
            key = (run.conversation_id, offload_id)
            self._expanded[key] = None
            while len(self._expanded) > _MAX_OFFLOAD_IDS:
                self._expanded.popitem(last=False)
        self.ledger.record_recall(
            run.conversation_id,
            offload_id,
            model=it.model or "unknown",
            input_tokens=len(text) // _CHARS_PER_TOKEN,
            output_tokens=output_tokens,
        )

    @_contained
    def _adopter_dropped(self, call_id: str, target: str) -> None:
        it = self._active_iteration()
        if it is not None:
            it.adopter_drops[call_id] = target

    # -- PRE seam ---------------------------------------------------------------------

    def _resolve(self, original: Callable[[Any], Any], ctx: Any) -> Any:
        call = self._pre_begin(ctx)
        if call is None:
            return original(ctx)
        token = _PRE.set(call.recorder)
        try:
            result = original(ctx)
        except BaseException as exc:
            _PRE.reset(token)
            self._pre_end(call, None, exc)
            raise
        _PRE.reset(token)
        self._pre_end(call, result, None)
        return result

    @_contained
    def _pre_begin(self, ctx: Any) -> _SeamCall | None:
        if not self._installed:
            return None
        run = self._run(getattr(ctx, "run_id", ""), create=True)
        if run is None:
            return None
        it = run.current
        if it is None or it.pre_done:
            it = self._new_iteration(run)
        it.pre_done = True
        _ACTIVE.set((self, run.run_id))
        sctx = self._context(
            Seam.PRE_MODEL,
            run,
            it,
            getattr(ctx, "messages", ()),
            resolved=getattr(ctx, "resolved_tool_names", None),
            forced=getattr(ctx, "forced_tool_choice", None),
            role=getattr(ctx, "role", None),
        )
        token = otel_context.attach(it.ctx)
        try:
            handle = self._obs.start_pre_model(sctx)
        except Exception:
            otel_context.detach(token)
            raise
        return _SeamCall(run, it, token, handle, time.perf_counter(), _PreRecorder(self))

    @_contained
    def _pre_end(self, call: _SeamCall, result: Any, error: BaseException | None) -> None:
        try:
            self._pre_record(call, result, error)
        finally:
            otel_context.detach(call.token)

    def _pre_record(self, call: _SeamCall, result: Any, error: BaseException | None) -> None:
        rec = call.recorder
        assert rec is not None and call.iteration is not None
        evaluations: list[PolicyEvaluation] = []
        errors: list[ContainedError] = []
        winner: Any = None
        for index, policy in enumerate(self._pre_policies):
            if not _wrappable(policy):
                continue
            if getattr(policy, "model", None) is None:
                evaluations.append(
                    PolicyEvaluation(policy.name, Seam.PRE_MODEL, PolicyResult.SKIPPED)
                )
                continue
            outcome = rec.results.get(index)
            if outcome is None:
                break  # not evaluated: an earlier policy won (or resolve stopped)
            matched, exc = outcome
            if exc is not None:
                err = contained_error("match", exc, policy.name)
                errors.append(err)
                evaluations.append(
                    PolicyEvaluation(policy.name, Seam.PRE_MODEL, PolicyResult.ERROR, error=err)
                )
                continue
            evaluations.append(
                PolicyEvaluation(
                    policy.name,
                    Seam.PRE_MODEL,
                    PolicyResult.MATCHED if matched else PolicyResult.NOT_MATCHED,
                )
            )
            if matched:
                winner = policy
                break
        model: Any = result
        if winner is not None:
            source = WinnerSource.POLICY
        elif rec.resolver_called and rec.resolver_error is None and rec.resolver_result is not None:
            source = WinnerSource.RESOLVER
        else:
            source = WinnerSource.DEFAULT
        if error is not None:
            # symfonic's react node degrades to the snapshot default model.
            errors.append(contained_error("resolver", rec.resolver_error or error))
            model = self._snapshot_default
        name = _model_name(model)
        call.iteration.model = name
        obs = self._obs
        for ev in evaluations:
            obs.on_policy_evaluated(call.handle, ev)
        obs.end_pre_model(
            call.handle,
            PreModelResult(
                ModelConfig(name),
                source,
                None if winner is None else winner.name,
                tuple(evaluations),
                tuple(errors),
                time.perf_counter() - call.started,
            ),
        )

    def _role_resolver(self, original: Callable[[Any], Any], ctx: Any) -> Any:
        rec = _PRE.get()
        if rec is None or rec.owner is not self:
            return original(ctx)
        rec.resolver_called = True
        try:
            result = original(ctx)
        except Exception as exc:
            rec.resolver_error = exc
            raise
        rec.resolver_result = result
        return result

    # -- policy predicates (both seams) ------------------------------------------------

    def _post_eval(self, index: int, stage: str) -> _PostEval | None:
        it = self._active_iteration()
        if it is None or not it.groups or not it.groups[-1].evals:
            return None
        ev = it.groups[-1].evals[-1]
        if ev.index != index or not ev.when_ok:
            return None
        if stage == "match":
            return ev if ev.matched is None and ev.match_error is None else None
        if stage == "guard":
            return ev if ev.matched and ev.guard is None and ev.guard_error is None else None
        return ev if ev.matched and not ev.transform_called else None

    def _match(self, original: Callable[[Any], Any], index: int, ctx: Any) -> Any:
        rec = _PRE.get()
        if rec is not None and rec.owner is self:
            try:
                result = original(ctx)
            except Exception as exc:
                rec.results[index] = (False, exc)
                raise
            rec.results[index] = (_truth(result), None)
            return result
        try:
            ev = self._post_eval(index, "match")
            if ev is not None:
                it = self._active_iteration()
                if it is not None and it.post_messages is None:
                    it.post_messages = tuple(getattr(ctx, "messages", ()) or ())
                    role = getattr(ctx, "role", None)
                    it.post_role = role if isinstance(role, str) else None
        except Exception:
            ev = None
        if ev is None:
            return original(ctx)
        try:
            result = original(ctx)
        except Exception as exc:
            ev.match_error = exc
            raise
        ev.matched = _truth(result)
        return result

    def _guard(self, original: Callable[[Any], Any], index: int, ctx: Any) -> Any:
        try:
            ev = self._post_eval(index, "guard")
        except Exception:
            ev = None
        if ev is None:
            return original(ctx)
        try:
            result = original(ctx)
        except Exception as exc:
            ev.guard_error = exc
            raise
        ev.guard = _truth(result)
        return result

    def _transform(self, original: Callable[..., Any], index: int, args: Any, ctx: Any) -> Any:
        try:
            ev = self._post_eval(index, "transform")
            if ev is not None:
                ev.transform_called = True
                ev.transform_input = _as_args(args)
        except Exception:
            ev = None
        if ev is None:
            return original(args, ctx)
        try:
            return original(args, ctx)
        except Exception as exc:
            ev.transform_error = exc
            raise

    def _on_matches_tool(self, index: int, tool_name: str, ok: bool) -> None:
        try:
            it = self._active_iteration()
            if it is None:
                return
            groups = it.groups
            if not groups or not groups[-1].evals or index <= groups[-1].evals[-1].index:
                groups.append(_Group(str(tool_name), time.perf_counter()))
            groups[-1].evals.append(_PostEval(index, bool(ok)))
        except Exception as exc:
            self._failed("matches_tool", exc)

    # -- POST seam ---------------------------------------------------------------------

    def _post_outcome(
        self, group: _Group | None
    ) -> tuple[
        tuple[PolicyEvaluation, ...],
        tuple[ContainedError, ...],
        Any,
        GuardResult,
        bool,
        dict[str, Any] | None,
    ]:
        """symfonic's POST-seam walk for one call, as seamscope records it."""
        if group is None:
            return (), (), None, GuardResult.NONE, False, None
        by_index = {ev.index: ev for ev in group.evals}
        evaluations: list[PolicyEvaluation] = []
        errors: list[ContainedError] = []
        winner: Any = None
        guard = GuardResult.NONE
        winner_eval: _PostEval | None = None
        for index, policy in enumerate(self._post_policies):
            if not _wrappable(policy):
                continue
            name = policy.name
            if getattr(policy, "redirect_to", None) is None:
                evaluations.append(PolicyEvaluation(name, Seam.POST_MODEL, PolicyResult.SKIPPED))
                continue
            ev = by_index.get(index)
            if ev is None:
                break
            if not ev.when_ok:
                evaluations.append(PolicyEvaluation(name, Seam.POST_MODEL, PolicyResult.SKIPPED))
                continue
            if ev.match_error is not None:
                err = contained_error("match", ev.match_error, name)
                errors.append(err)
                evaluations.append(
                    PolicyEvaluation(name, Seam.POST_MODEL, PolicyResult.ERROR, error=err)
                )
                continue
            if not ev.matched:
                evaluations.append(
                    PolicyEvaluation(name, Seam.POST_MODEL, PolicyResult.NOT_MATCHED)
                )
                continue
            if ev.guard_error is not None:
                err = contained_error("guard", ev.guard_error, name)
                errors.append(err)
                guard = GuardResult.ERROR
                evaluations.append(
                    PolicyEvaluation(
                        name, Seam.POST_MODEL, PolicyResult.ERROR, GuardResult.ERROR, err
                    )
                )
                continue
            if ev.guard is None:
                verdict = GuardResult.NONE
            else:
                verdict = GuardResult.PASSED if ev.guard else GuardResult.FAILED
            guard = verdict
            evaluations.append(
                PolicyEvaluation(name, Seam.POST_MODEL, PolicyResult.MATCHED, verdict)
            )
            if verdict is not GuardResult.FAILED:
                winner, winner_eval = policy, ev
                break
        transformed = False
        transform_input: dict[str, Any] | None = None
        if winner_eval is not None and winner_eval.transform_called:
            transform_input = winner_eval.transform_input
            if winner_eval.transform_error is None:
                transformed = True
            else:
                errors.append(
                    contained_error("args_transform", winner_eval.transform_error, winner.name)
                )
        return tuple(evaluations), tuple(errors), winner, guard, transformed, transform_input

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
                for ev in d.evaluations:
                    obs.on_policy_evaluated(h, ev)
                final = None if final_calls is None else final_calls.get(d.emitted.id)
                record = self._dispatch_record(d, final, it.adopter_drops.get(d.emitted.id))
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

    @staticmethod
    def _dispatch_record(
        d: _Dispatch, final: ToolCall | None, adopter_drop: str | None
    ) -> DispatchRecord:
        after = d.after_policy
        if final is None:
            final = after
        adopter_override = adopter_drop is not None or (
            final.name != after.name or dict(final.args) != dict(after.args)
        )
        palette = (
            PaletteVerdict.DROPPED
            if d.policy_dropped or adopter_drop is not None
            else PaletteVerdict.KEPT
        )
        if adopter_override:
            source = WinnerSource.ADOPTER
        elif d.policy is not None:
            source = WinnerSource.POLICY
        else:
            source = WinnerSource.NONE
        return DispatchRecord(
            index=d.index,
            emitted=d.emitted,
            final=final,
            policy=None if d.policy is None else d.policy.name,
            redirect_to=None if d.policy is None else d.policy.redirect_to,
            guard=d.guard,
            args_transformed=d.transformed,
            adopter_override=adopter_override,
            palette=palette,
            source=source,
            evaluations=d.evaluations,
            errors=d.errors,
            duration_s=d.duration_s,
        )

    # -- offload gate ---------------------------------------------------------------------

    def _gate(self, original: Callable[[Any], Any], inputs: Any, run_id: str) -> Any:
        call = self._gate_begin(inputs, run_id)
        if call is None:
            return original(inputs)
        try:
            decision = original(inputs)
        except BaseException as exc:
            self._gate_end(call, inputs, None, exc)
            raise
        self._gate_end(call, inputs, decision, None)
        return decision

    @_contained
    def _gate_begin(self, inputs: Any, run_id: str) -> _SeamCall | None:
        run = self._runs.get(run_id)
        it = run.current if run is not None else None
        parent = it.ctx if it is not None else (run.ctx if run is not None else None)
        call_id, tool = _gate_site()
        s_inputs = OffloadGateInputs(
            output_tokens=float(inputs.output_tokens),
            horizon=int(inputs.horizon),
            recall_probability=float(inputs.recall_probability),
            model_name=str(inputs.model_name),
            large_offload_threshold_tokens=int(inputs.large_offload_threshold_tokens),
            stub_tokens=int(inputs.stub_tokens),
            recall_input_tokens=int(inputs.recall_input_tokens),
            recall_output_tokens=int(inputs.recall_output_tokens),
        )
        conversation = None if run is None else run.conversation_id
        repeat = False
        if call_id:
            key = (conversation or "", call_id)
            with self._lock:
                repeat = key in self._gated
                self._gated[key] = None
                while len(self._gated) > _MAX_OFFLOAD_IDS:
                    self._gated.popitem(last=False)
        # symfonic re-decides an earlier output on every iteration: count its
        # predicted saving once
        gate_call = GateCall(
            conversation,
            self.agent_name,
            tool,
            call_id,
            reevaluation=repeat,
        )
        token = otel_context.attach(parent) if parent is not None else None
        try:
            handle = self._obs.start_offload_gate(s_inputs, gate_call)
        except Exception:
            if token is not None:
                otel_context.detach(token)
            raise
        return _SeamCall(
            run, it, token, handle, time.perf_counter(), inputs=s_inputs, call=gate_call
        )

    @_contained
    def _gate_end(
        self, call: _SeamCall, inputs: Any, decision: Any, error: BaseException | None
    ) -> None:
        try:
            reason = None
            if error is not None:
                kind = _qualname(error)
                reason = f"evaluate_offload_gate raised {kind}; symfonic does not offload"
                span = getattr(call.handle, "span", None)
                if span is not None:
                    span.set_attribute(c.ATTR_ERROR_TYPE, kind)
                    span.set_status(Status(StatusCode.ERROR, kind))
            offload_id, first = None, False
            if decision is not None and bool(getattr(decision, "fire", False)):
                offload_id, first = self._offload_id(call.call, call.inputs)
            converted = _convert_decision(inputs, decision, offload_id, reason)
            self._obs.end_offload_gate(call.handle, converted)
            conversation = None if call.call is None else call.call.conversation_id
            if first and conversation:
                # symfonic re-decides the output on every later iteration: the
                # ledger follows it from the first fired decision, linked to
                # that decision's span
                self.ledger.record_offload(
                    converted,
                    conversation_id=conversation,
                    gate_span=_span_context(call.handle),
                )
        finally:
            if call.token is not None:
                otel_context.detach(call.token)

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


def _span_context(handle: Any) -> trace.SpanContext | None:
    """The span context of an observer's span handle, when it has one."""
    span = getattr(handle, "span", None)
    get = getattr(span, "get_span_context", None)
    if not callable(get):
        return None
    ctx = get()
    return ctx if isinstance(ctx, trace.SpanContext) and ctx.is_valid else None


def _end(span: trace.Span) -> None:
    """End a span; a failing span processor never stops the cleanup around it."""
    with contextlib.suppress(Exception):
        span.end()


def _truth(value: Any) -> bool:
    try:
        return bool(value)
    except Exception:
        return False


def _final_calls(state: Any) -> dict[str, ToolCall] | None:
    """The calls symfonic dispatches, by id: the last AIMessage the tool node reads."""
    if not isinstance(state, Mapping):
        return None
    messages = state.get("messages") or ()
    if not messages:
        return None
    calls = getattr(messages[-1], "tool_calls", None)
    if not isinstance(calls, list):
        return None
    out: dict[str, ToolCall] = {}
    for tc in calls:
        if isinstance(tc, Mapping):
            call_id = str(tc.get("id") or "")
            out[call_id] = ToolCall(call_id, str(tc.get("name") or ""), _as_args(tc.get("args")))
    return out


def instrument_symfonic(
    agent: Any,
    *,
    agent_name: str | None = None,
    telemetry: Any | None = None,
    tracer_provider: trace.TracerProvider | None = None,
    meter_provider: Any | None = None,
    telemetry_config: TelemetryConfig | None = None,
    observer: Any | None = None,
    ledger: OffloadLedger | None = None,
) -> SymfonicInstrumentation:
    """Record a ``SymfonicAgent``'s real decisions as seamscope telemetry.

    ``agent`` is a built ``symfonic.agent.SymfonicAgent`` (symfonic reads
    its policies and resolver at construction, so a bare ``FrameworkConfig``
    cannot be instrumented: build the agent first). ``telemetry`` may be a
    :class:`~seamscope.telemetry.TelemetryHandle` from ``configure()``;
    otherwise the providers passed, or the global API's, are used (never
    set). ``observer`` replaces the :class:`OTelObserver` built from them.

    ``ledger`` follows the offloads symfonic fires in each conversation
    (``inst.conversation(...)``) to their realized savings and costs. By
    default it is an :class:`OffloadLedger` on the same providers, sharing
    the observer's instruments, priced by :func:`symfonic_pricing`.

    Raises TypeError for an object that is not a supported SymfonicAgent
    or a ``ledger`` that is not an OffloadLedger, and RuntimeError if the
    agent is already instrumented.
    """
    if ledger is not None and not isinstance(ledger, OffloadLedger):
        raise TypeError(f"instrument_symfonic: ledger must be an OffloadLedger, got {ledger!r}")
    if telemetry is not None:
        tracer_provider = tracer_provider or telemetry.tracer_provider
        meter_provider = meter_provider or telemetry.meter_provider
        observer = observer or telemetry.observer
    config = getattr(agent, "_config", None)
    if config is None or not hasattr(agent, "_deps"):
        raise TypeError(
            f"instrument_symfonic expects a SymfonicAgent, got {type(agent).__name__}"
            " (a FrameworkConfig is read at agent construction: build the agent first)"
        )
    with _AGENTS_LOCK:
        existing = _AGENTS.get(id(agent))
        if existing is not None and existing.installed and existing.agent is agent:
            raise RuntimeError("this SymfonicAgent is already instrumented")
        if observer is None:
            names = {
                getattr(p, "name", "")
                for p in tuple(getattr(config, "tool_call_policies", ()) or ())
            }
            observer = OTelObserver(
                tracer_provider=tracer_provider,
                meter_provider=meter_provider,
                config=telemetry_config or TelemetryConfig.create(known_labels=names - {""}),
            )
        if ledger is None:
            ledger = OffloadLedger(
                pricing=symfonic_pricing(),
                tracer_provider=tracer_provider,
                meter_provider=meter_provider,
                instruments=getattr(observer, "instruments", None),
            )
        inst = SymfonicInstrumentation(
            agent,
            observer=observer,
            tracer_provider=tracer_provider,
            agent_name=agent_name,
            ledger=ledger,
        )
        inst._install()
        _AGENTS[id(agent)] = inst
        inst._restore.insert(0, functools.partial(_forget, id(agent), inst))
    return inst


_AGENTS: weakref.WeakValueDictionary[int, SymfonicInstrumentation] = weakref.WeakValueDictionary()
_AGENTS_LOCK = threading.Lock()


def _forget(key: int, inst: SymfonicInstrumentation) -> None:
    with _AGENTS_LOCK:
        if _AGENTS.get(key) is inst:
            del _AGENTS[key]
