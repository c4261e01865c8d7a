"""The framework-free API: seamscope inside a hand-written agent loop.

One :class:`DecisionLayer` holds the policies, the selection pipeline, the
offload gate, the ledger and the telemetry. A loop calls it at each point
of a ReAct iteration::

    layer = DecisionLayer(default_model="claude-opus-4-6", policies=[...],
                          stages=[...], catalog=catalog, agent_name="analyst")

    with layer.turn("conv-7", messages) as turn:         # invoke_agent span
        while True:
            with turn.iteration() as it:                  # seamscope.iteration
                selection = it.select_tools(all_tools)    # select_tools + stages
                pre = it.pre_model()                      # PRE seam
                with it.chat(pre.model.model_name) as call:   # chat {model}
                    reply = my_model(pre.model, messages, selection.tools)
                    call.report(usage)                    # gen_ai.usage.*, ledger
                post = it.post_model(reply)               # POST seam + dispatches
                for tool_call in post.calls:
                    with it.execute_tool(tool_call):      # execute_tool {tool}
                        output = run(tool_call)
                    decision = it.offload(tool_call, output)   # offload gate
                    ...

Telemetry comes from the providers passed in (or the global API); nothing
here sets global providers. Decisions never depend on telemetry: an
observer that fails is contained and the loop takes the same decisions.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import threading
import time
import warnings
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from decimal import Decimal
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace

from seamscope._internal import (
    GenAISpans,
    Invocation,
    OTelObserver,
    Priors,
    RoleModelResolver,
    TelemetryConfig,
    TelemetryHandle,
    ToolCallDispatchCallback,
    attached,
    build_dispatch_context,
    check_telemetry_options,
    checks,
    evaluate_offload_gate,
    guard_observer,
    held_scope,
    telemetry_error,
)
from seamscope.decisions import (
    DecisionObserver,
    DispatchContext,
    Message,
    ModelConfig,
    ModelUsage,
    OffloadGate,
    OffloadGateDecision,
    OffloadLedger,
    OffloadStore,
    PostModelResult,
    PreModelResult,
    PricingTable,
    SeamRouter,
    SelectionContext,
    SelectionPipeline,
    SelectionResult,
    SelectionStage,
    Settlement,
    ToolCall,
    ToolCallPolicy,
    ToolCatalog,
)
from seamscope.decisions.records import (
    DEFAULT_LARGE_OFFLOAD_THRESHOLD_TOKENS,
    CarriedStub,
    Compaction,
    GateCall,
    MiddlewareDecision,
    OffloadMechanism,
    PricingSource,
    Seam,
    SettleTrigger,
    StoredOffload,
    tool_name,
)
from seamscope.loop._stub import offload_stub, unsent_stub_tokens
from seamscope.loop._tokens import estimate_tokens
from seamscope.telemetry import conventions as c

__all__ = ["ChatCall", "DecisionLayer", "Iteration", "Turn", "estimate_tokens"]

_RECALL_LOCK = threading.Lock()  # parallel tool calls of one iteration may recall at once


_GATE_FIELDS = (("OffloadGate.priors", "offload_priors"), ("OffloadGate.shadow", "offload_shadow"))


def _layer_refusal(text: str) -> str:
    """A component's refusal, naming the DecisionLayer field the caller passed."""
    for gate_field, field in _GATE_FIELDS:
        if text.startswith(gate_field):
            return f"DecisionLayer.{field}: {text}"
    return f"DecisionLayer: {text}"


class DecisionLayer:
    """Policies, selection, the offload gate, the ledger and telemetry in one object.

    Configuration errors raise ValueError at construction, naming the field.
    ``telemetry`` may be a :class:`~seamscope.telemetry.TelemetryHandle`
    (from ``configure()``): its providers and observer are used. Otherwise
    providers are the ones passed, or the global API's. ``offload_priors``
    and ``offload_shadow`` go to the :class:`OffloadGate` as ``priors`` and
    ``shadow``.

    ``reuse_selection`` (default False): within one turn, an iteration whose
    selection inputs are those of the previous iteration (the offered tool
    names in order, the fixed tools' names, the role, the forced tool, the
    agent and the catalog object) gets the previous
    :class:`SelectionResult` back without running the stages
    (``result.reused`` is True; the ``seamscope.select_tools`` span is
    recorded with ``seamscope.selection.reused``, and no stage span). Valid
    only for stages that decide from these inputs alone: a stage that reads
    the messages or the state, or calls a resolver whose answer may change
    within a turn, must not be reused, which is why it is opt-in.

    ``offload_store``: where fired offloads live (their content for recall,
    their accounts, their settlement): an :class:`~seamscope.decisions.OffloadStore`
    or a URL (``memory://``, ``sqlite:///path.db``, ``redis://host:6379/0``);
    None: the URL in ``SEAMSCOPE_OFFLOAD_STORE`` when it is set, else an
    in-memory store of this process (:class:`~seamscope.stores.MemoryStore`).
    A store other processes see (SQLite, Redis) makes every worker serving
    a conversation recall its outputs, count the stubs its prompts carry and
    settle each offload once (docs/many-workers.md).
    """

    def __init__(
        self,
        *,
        default_model: ModelConfig | str,
        policies: Sequence[ToolCallPolicy] = (),
        role_model_resolver: RoleModelResolver | None = None,
        on_tool_call_dispatch: ToolCallDispatchCallback | None = None,
        stages: Sequence[SelectionStage] = (),
        catalog: ToolCatalog | None = None,
        horizon: int = 5,
        recall_probability: float = 0.5,
        offload_threshold_tokens: int = DEFAULT_LARGE_OFFLOAD_THRESHOLD_TOKENS,
        pricing: PricingTable | None = None,
        agent_name: str | None = None,
        provider_name: str | None = None,
        telemetry: TelemetryHandle | None = None,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
        telemetry_config: TelemetryConfig | None = None,
        observer: DecisionObserver | None = None,
        ledger: OffloadLedger | None = None,
        offload_id_factory: Callable[[], str] | None = None,
        offload_priors: Priors | str | os.PathLike[str] | None = None,
        offload_shadow: OffloadGate | None = None,
        reuse_selection: bool = False,
        offload_store: OffloadStore | str | None = None,
    ) -> None:
        checks.flag("DecisionLayer", "reuse_selection", reuse_selection)
        self.offload_store: OffloadStore = resolve_store("DecisionLayer", offload_store)
        check_telemetry_options(
            "DecisionLayer", tracer_provider=tracer_provider, meter_provider=meter_provider
        )
        if telemetry is not None:
            if not isinstance(telemetry, TelemetryHandle):
                raise TypeError(
                    "DecisionLayer.telemetry must be the TelemetryHandle configure() "
                    f"returns, got {type(telemetry).__name__}"
                )
            if tracer_provider is not None or meter_provider is not None:
                raise ValueError(
                    "DecisionLayer: give either telemetry (a TelemetryHandle) or "
                    "tracer_provider/meter_provider, not both: spans would split "
                    "across two providers"
                )
            tracer_provider = telemetry.tracer_provider
            meter_provider = telemetry.meter_provider
            observer = observer or telemetry.observer
        for field, value in (("agent_name", agent_name), ("provider_name", provider_name)):
            if value is not None and (not isinstance(value, str) or not value):
                raise ValueError(
                    f"DecisionLayer.{field} must be a non-empty str or None, got {value!r}"
                )
        if offload_id_factory is not None and not callable(offload_id_factory):
            raise ValueError(
                "DecisionLayer.offload_id_factory must be callable or None, "
                f"got {type(offload_id_factory).__name__}"
            )
        if (
            isinstance(offload_threshold_tokens, bool)
            or not isinstance(offload_threshold_tokens, int)
            or offload_threshold_tokens < 0
        ):
            raise ValueError(
                "DecisionLayer.offload_threshold_tokens must be an int >= 0, "
                f"got {offload_threshold_tokens!r}"
            )
        for field, items in (("policies", policies), ("stages", stages)):
            if isinstance(items, str | bytes) or not isinstance(items, Iterable):
                raise checks.fail("DecisionLayer", field, "a sequence (not a str)", items)
        # said once the layer is built (a refused construction says only why)
        spans_go_nowhere = (
            observer is None
            and tracer_provider is None
            and isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
        )
        if telemetry_config is not None and not isinstance(telemetry_config, TelemetryConfig):
            raise TypeError(
                "DecisionLayer.telemetry_config must be a TelemetryConfig, got "
                f"{type(telemetry_config).__name__}"
            )
        if observer is None:
            # the configured policy and stage names are kept first under the label cap
            observer = OTelObserver(
                tracer_provider=tracer_provider,
                meter_provider=meter_provider,
                config=telemetry_config,
                known_labels={
                    c.ATTR_POLICY_NAME: [p.name for p in policies if isinstance(p, ToolCallPolicy)],
                    c.ATTR_STAGE_NAME: [
                        n for n in (getattr(s, "name", None) for s in stages) if isinstance(n, str)
                    ],
                },
            )
        try:
            # the components check their own fields; their messages name them
            self.observer: DecisionObserver = guard_observer(observer)
            self.router = SeamRouter(
                policies,
                default_model=default_model,
                role_model_resolver=role_model_resolver,
                on_tool_call_dispatch=on_tool_call_dispatch,
                observer=observer,
            )
            self.pipeline = SelectionPipeline(stages, catalog=catalog, observer=observer)
            self.gate = OffloadGate(
                horizon=horizon,
                recall_probability=recall_probability,
                large_offload_threshold_tokens=offload_threshold_tokens,
                pricing=pricing,
                observer=observer,
                id_factory=offload_id_factory,
                priors=offload_priors,
                shadow=offload_shadow,
            )
        except (ValueError, TypeError) as exc:
            raise type(exc)(_layer_refusal(str(exc))) from exc
        if ledger is not None and not isinstance(ledger, OffloadLedger):
            raise TypeError(
                f"DecisionLayer.ledger must be an OffloadLedger, got {type(ledger).__name__}"
            )
        if ledger is None:
            ledger = OffloadLedger(pricing=pricing, observer=self.observer)
        self.ledger = ledger
        self.catalog = catalog
        self.reuse_selection = reuse_selection
        self.agent_name = agent_name
        self.provider_name = provider_name
        limits = telemetry_config or getattr(observer, "config", None)
        if not isinstance(limits, TelemetryConfig):
            limits = TelemetryConfig.create()
        self.genai = GenAISpans(
            tracer_provider,
            max_length=limits.max_attribute_length,
            max_items=limits.max_array_length,
            mask=limits.mask,
        )
        if spans_go_nowhere:
            warnings.warn(
                "DecisionLayer: no tracer provider was given and none is set globally: "
                "spans go nowhere until one is (pass telemetry=configure(...) or "
                "tracer_provider=...)",
                RuntimeWarning,
                stacklevel=2,
            )

    def start_turn(
        self,
        conversation_id: str | None,
        messages: list[Any] | None = None,
        *,
        role: str | None = None,
        state: Mapping[str, Any] | None = None,
        scope: Mapping[str, Any] | None = None,
        parent: otel_context.Context | None = None,
        agent_span: bool = True,
        agent_name: str | None = None,
    ) -> Turn:
        """One user turn, started now: its ``invoke_agent`` span (``agent_span``
        False: none, the framework records its own) under ``parent`` (default:
        the current context), named by ``agent_name`` (default: the layer's).

        The held form of :meth:`turn`, for a loop whose turn outlives one
        ``with`` block (a framework's hooks): start iterations with
        :meth:`Turn.start_iteration`, end the turn with :meth:`Turn.end`.
        ``messages`` is the loop's own list; the layer reads it (the loop
        appends to it) and never copies content into telemetry. A
        conversation id that is not a str is used as its ``str()`` and logged
        as a ``seamscope.telemetry.error`` (never raised into the loop).
        """
        if conversation_id is not None and not isinstance(conversation_id, str):
            telemetry_error(
                "turn", None, field="conversation_id", value_type=type(conversation_id).__name__
            )
            conversation_id = _as_str(conversation_id)
        turn = Turn(self, conversation_id, [] if messages is None else messages, role, state, scope)
        turn.agent_name = agent_name
        if parent is not None:
            turn.base = parent
        if agent_span:
            turn.start_agent()
        return turn

    @contextlib.contextmanager
    def turn(
        self,
        conversation_id: str | None,
        messages: list[Any],
        *,
        role: str | None = None,
        state: Mapping[str, Any] | None = None,
        scope: Mapping[str, Any] | None = None,
    ) -> Iterator[Turn]:
        """One user turn: an ``invoke_agent`` span around its iterations, current
        for the block (:meth:`start_turn`'s ``with`` form); the block's exception
        ends the turn with its ``error.type`` and is re-raised unchanged."""
        turn = self.start_turn(conversation_id, messages, role=role, state=state, scope=scope)
        with turn:
            yield turn

    def end_conversation(
        self, conversation_id: str, *, store: OffloadStore | str | None = None
    ) -> list[Settlement]:
        """Settle the conversation's offloads in the ledger (with a shared
        offload store: every worker's, each once fleet-wide). ``store``: the
        one the conversation's offloads live in when it is not the layer's
        (an adapter's own; a store or a URL)."""
        chosen = self.offload_store if store is None else resolve_store("end_conversation", store)
        return self.ledger.end_conversation(conversation_id, store=chosen)


class Turn:
    """The iterations of one user turn, and its spans: the ``invoke_agent``
    (:attr:`invocation`, None when the turn has none) and the open iteration.

    Made by :meth:`DecisionLayer.start_turn` (or its ``with`` form,
    :meth:`DecisionLayer.turn`). One iteration is open at a time: starting
    the next ends the last. :attr:`trace_context` is the OpenTelemetry
    context a hook runs the turn's decisions under. Ending is idempotent and never
    raises; a framework calling hooks from several tasks serializes them
    (its run's lock).
    """

    def __init__(
        self,
        layer: DecisionLayer,
        conversation_id: str | None,
        messages: list[Any],
        role: str | None,
        state: Mapping[str, Any] | None,
        scope: Mapping[str, Any] | None,
    ) -> None:
        self.layer = layer
        self.conversation_id = conversation_id
        self.messages = messages
        self.role = role
        self.state: Mapping[str, Any] = {} if state is None else state
        self.scope = scope
        self.iterations = 0
        self.last_selection: tuple[_SelectionKey, SelectionResult] | None = None
        """The last selection of this turn and what it was selected from
        (read when the layer's ``reuse_selection`` is on)."""
        self.agent_name: str | None = None
        """The agent running the next iterations when it is not the layer's
        (a framework's handoff); None: the layer's ``agent_name``."""
        self.offload_scope: str | None = None
        """Whose offloads a recall may read when it is not the conversation id
        (an adapter's run without a conversation id)."""
        self.store: OffloadStore = layer.offload_store
        """Where this turn's offloads live (an adapter may give the framework's
        own store, e.g. the LangGraph store a LangChain agent was built with)."""
        self.invocation: Invocation | None = None
        """The turn's ``invoke_agent`` span (None: the turn has none)."""
        self.base: otel_context.Context = otel_context.get_current()
        """The context the turn started under (its ``invoke_agent``'s parent)."""
        self.open: Iteration | None = None
        """The open iteration (None: none yet, or it ended)."""

    @property
    def agent(self) -> str | None:
        """The name of the agent that runs this turn's current iteration."""
        return self.agent_name or self.layer.agent_name

    @property
    def agent_context(self) -> otel_context.Context:
        """The context with the turn's ``invoke_agent`` current (else :attr:`base`),
        also once it ended (a continuation starts under it)."""
        return self.base if self.invocation is None else self.invocation.context

    @property
    def trace_context(self) -> otel_context.Context:
        """The OpenTelemetry context the turn's decisions run under: the open
        iteration's, else :attr:`agent_context`."""
        it = self.open
        if it is None or it.invocation.ended:
            return self.agent_context
        return it.invocation.context

    def start_agent(
        self, agent_name: str | None = None, *, parent: otel_context.Context | None = None
    ) -> None:
        """Start the turn's ``invoke_agent`` span now, when it has none yet (a
        framework that names the agent only once its run starts): named by
        ``agent_name`` (default: :attr:`agent`), under ``parent`` (default:
        :attr:`base`, which it then becomes)."""
        if self.invocation is not None:
            return
        if parent is not None:
            self.base = parent
        self.invocation = self.layer.genai.start_agent(
            agent_name or self.agent, parent=self.base, conversation_id=self.conversation_id
        )

    def start_iteration(self) -> Iteration:
        """End the open iteration and start the next one (a ``seamscope.iteration``
        span under the ``invoke_agent``): the held form of :meth:`iteration`."""
        self.end_iteration(None)
        index = self.iterations
        self.iterations += 1
        token = otel_context.attach(self.agent_context)
        try:
            scope = self.layer.observer.iteration(
                index, conversation_id=self.conversation_id, agent_name=self.agent
            )
            invocation = scope if isinstance(scope, Invocation) else held_scope(scope)
        finally:
            otel_context.detach(token)
        self.open = Iteration(self, index, invocation)
        return self.open

    @contextlib.contextmanager
    def iteration(self) -> Iterator[Iteration]:
        """One ReAct iteration: a ``seamscope.iteration`` span, current for the
        block (:meth:`start_iteration`'s ``with`` form)."""
        it = self.start_iteration()
        with it.invocation:
            yield it

    def end_iteration(self, exc: BaseException | str | None = None) -> None:
        """End the open iteration (with ``exc``'s ``error.type``, if any)."""
        it, self.open = self.open, None
        if it is not None:
            it.invocation.end(exc)

    def end(self, exc: BaseException | str | None = None) -> None:
        """End the open iteration, then the ``invoke_agent`` span (failed with
        ``exc``, stopped when None)."""
        self.end_iteration(exc)
        if self.invocation is not None:
            self.invocation.end(exc)

    def stop(self) -> None:
        """:meth:`end` with no error."""
        self.end(None)

    def fail(self, exc: BaseException | str) -> None:
        """:meth:`end` with ``exc``'s ``error.type`` and status ERROR."""
        self.end(exc)

    def __enter__(self) -> Turn:
        if self.invocation is not None:
            self.invocation.attach()
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        self.end(exc)


class ChatCall:
    """An open ``chat {model}`` span (:attr:`invocation`); report the call's
    usage on it, end it with :meth:`stop` or :meth:`fail`.

    ``named``: ``model`` is the model really called (from the PRE seam's
    choice or the model object); False when it is only the layer's default,
    so the response's model, when reported, names the call instead.
    """

    def __init__(
        self, iteration: Iteration, model: str, invocation: Invocation, *, named: bool = True
    ) -> None:
        self._iteration = iteration
        self.model = model
        self.invocation = invocation
        self.span = invocation.span
        self.named = named
        self.usage: ModelUsage | None = None

    @property
    def context(self) -> otel_context.Context:
        """The context with the ``chat`` span current."""
        return self.invocation.context

    def stop(self) -> None:
        """End the ``chat`` span (a second end does nothing)."""
        self.invocation.stop()

    def fail(self, exc: BaseException | str) -> None:
        """End the ``chat`` span with ``exc``'s ``error.type`` and status ERROR."""
        self.invocation.fail(exc)

    @property
    def iteration(self) -> Iteration:
        """The iteration this model call belongs to."""
        return self._iteration

    def report(
        self,
        usage: ModelUsage,
        *,
        response_model: str | None = None,
        carried: Iterable[str | CarriedStub] | None = None,
        present: Iterable[CarriedStub] = (),
    ) -> None:
        """Record usage on the span and in the ledger (carried stubs, cache).

        ``carried``: the offload ids whose stub (not the full output) this
        call's prompt held, or :class:`CarriedStub` records of offloads an
        offload store holds (made on any worker); None means every live
        offload of the conversation. ``present``: store-held offloads whose
        stub the prompt holds though a recall brought their output back.
        A ``usage`` that is not a :class:`ModelUsage` is logged as a
        ``seamscope.telemetry.error`` and ignored (never raised into the loop).
        """
        if not isinstance(usage, ModelUsage):
            telemetry_error("report", None, field="usage", value_type=type(usage).__name__)
            return
        self.usage = usage
        if not self.named and isinstance(response_model, str) and response_model:
            # nothing said which model was called but the response: it names the call
            self.model = response_model
            self.named = True
            GenAISpans.rename_chat(self.span, response_model)
            self._iteration.model = response_model
        GenAISpans.record_usage(
            self.span, usage, response_model, max_length=self._iteration.turn.layer.genai.max_length
        )
        turn = self._iteration.turn
        if carried is not None:
            carried = tuple(carried)
        if turn.conversation_id:
            account = turn.layer.ledger.record_model_call(
                turn.conversation_id,
                model=self.model,
                usage=usage,
                carried=carried,
                present=present,
                store=turn.store,
            )
            compacted = bool(carried) if carried is not None else bool(account.by_mechanism)
        else:
            compacted = bool(carried)
        if compacted:
            GenAISpans.mark_compacted(self.span)


class Iteration:
    """The decision points of one ReAct iteration, and its span
    (:attr:`invocation`, ``seamscope.iteration``)."""

    def __init__(self, turn: Turn, index: int, invocation: Invocation) -> None:
        self.turn = turn
        self.index = index
        self.invocation = invocation
        self.selection: SelectionResult | None = None
        self.pre: PreModelResult | None = None
        self.post: PostModelResult | None = None
        self.model: str | None = None
        self.unavailable: str | None = None
        """The PRE seam's choice when it is not callable here (another model ran)."""
        self._recall_output_charged = False
        # the last stub offload() kept: (offload id, text, tokens)
        self._stub: tuple[str | None, str, float] | None = None

    # contexts ------------------------------------------------------------------

    def _routed(self) -> tuple[str, ...]:
        return () if self.selection is None else self.selection.selected

    def context(self, seam: Seam, emitted_message: Any | None = None) -> DispatchContext:
        """The DispatchContext of a seam, built by the core's one helper."""
        turn = self.turn
        return build_dispatch_context(
            seam,
            turn.messages,
            resolved_tool_names=self._routed(),
            forced_tool_choice=None if self.selection is None else self.selection.forced_tool,
            scope=turn.scope,
            iteration=self.index,
            role=turn.role,
            conversation_id=turn.conversation_id,
            agent_name=turn.agent,
            emitted_message=emitted_message,
        )

    # decision points ----------------------------------------------------------

    def select_tools(self, tools: Sequence[Any], *, fixed: Sequence[Any] = ()) -> SelectionResult:
        """Run the selection pipeline over the tools offered this iteration.

        ``fixed``: tools the framework binds whatever the stages decide (a
        structured-output tool); they are recorded as offered and selected.
        """
        turn = self.turn
        ctx = SelectionContext(
            messages=tuple(turn.messages),
            state=turn.state,
            role=turn.role,
            iteration=self.index,
            conversation_id=turn.conversation_id,
            agent_name=turn.agent,
        )
        layer = turn.layer
        if not layer.reuse_selection:
            self.selection = layer.pipeline.run(tools, ctx, fixed=fixed)
            return self.selection
        key = _selection_key(tools, fixed, ctx, layer.catalog)
        last = turn.last_selection
        if key is not None and last is not None and _same_inputs(last[0], key):
            self.selection = layer.pipeline.reuse(last[1], tools, ctx)
        else:
            self.selection = layer.pipeline.run(tools, ctx, fixed=fixed)
        turn.last_selection = None if key is None else (key, self.selection)
        return self.selection

    def pre_model(self) -> PreModelResult:
        """The PRE seam: which model reasons this iteration."""
        self.pre = self.turn.layer.router.pre_model(self.context(Seam.PRE_MODEL))
        self.model = self.pre.model.model_name
        return self.pre

    def _chat_name(self, model: str | None, named: bool) -> tuple[str, bool]:
        name = model or self.model
        if not name:
            name, named = self.turn.layer.router.default_model.model_name, False
        self.model = name
        return name, named

    def _record_tools(self, span: trace.Span, tools: Sequence[Any] | None) -> None:
        """``gen_ai.tool.definitions``: the tools sent with this request (default:
        this iteration's selection; none recorded when no selection ran)."""
        if tools is None:
            if self.selection is None:
                return
            tools = self.selection.tools
        layer = self.turn.layer
        try:
            detail = bool(layer.observer.capture_content)
        except Exception:
            detail = False
        layer.genai.record_tools(span, tools, detail=detail)

    @property
    def trace_context(self) -> otel_context.Context:
        """The OpenTelemetry context with this iteration's span current: a hook
        attaches it (:meth:`current`) for the iteration's decisions."""
        return self.invocation.context

    def current(self) -> contextlib.AbstractContextManager[object]:
        """This iteration's context current for one block of a hook (its span
        stays open)."""
        return attached(self.invocation.context)

    def start_chat(
        self,
        model: str | None = None,
        *,
        named: bool = True,
        parent: otel_context.Context | None = None,
        tools: Sequence[Any] | None = None,
        span: bool = True,
    ) -> ChatCall:
        """A ``chat {model}`` span around one model call, started now: report on
        the ChatCall, end it with its ``stop()``/``fail()`` from whichever task
        ends the call.

        ``model``: the model really called (default: the PRE seam's choice,
        else the layer's default model); ``named`` False says the name is
        only the default, so the response's model names the call if reported.
        ``parent``: the context the span is a child of (default: this
        iteration's). ``tools``: the tools really sent with the request, when
        not this iteration's selection (``gen_ai.tool.definitions``).
        ``span`` False: no span of seamscope's (the framework records its own
        inference span); the call is still reported to the ledger.
        """
        name, named = self._chat_name(model, named)
        layer = self.turn.layer
        parent = self.invocation.context if parent is None else parent
        if not span:
            return ChatCall(self, name, Invocation(trace.INVALID_SPAN, parent), named=named)
        try:
            invocation = layer.genai.start_chat(
                name,
                parent=parent,
                provider=layer.provider_name,
                conversation_id=self.turn.conversation_id,
                agent_name=self.turn.agent,
            )
        except Exception as exc:  # telemetry failed: the call goes on without its span
            telemetry_error("chat", exc)
            return ChatCall(self, name, Invocation(trace.INVALID_SPAN, parent), named=named)
        if self.unavailable is not None:
            GenAISpans.mark_unavailable(invocation.span, self.unavailable)
        self._record_tools(invocation.span, tools)
        return ChatCall(self, name, invocation, named=named)

    @contextlib.contextmanager
    def chat(
        self,
        model: str | None = None,
        *,
        named: bool = True,
        tools: Sequence[Any] | None = None,
    ) -> Iterator[ChatCall]:
        """:meth:`start_chat`'s ``with`` form: the ``chat`` span current for the
        block, its exception recorded and re-raised unchanged."""
        call = self.start_chat(model, named=named, parent=otel_context.get_current(), tools=tools)
        with call.invocation:
            yield call

    def post_model(
        self,
        emitted: Any,
        *,
        calls: Sequence[Any] | None = None,
        runnable: Collection[str] | None = None,
    ) -> PostModelResult:
        """The POST seam over the emitted assistant message (or its tool calls).

        The context includes the just-emitted message, as the design says.
        ``calls``: the emitted calls the loop will dispatch, when not all of
        the message's are (the framework consumes a structured-output call
        itself); the records' indexes refer to this sequence. ``runnable``:
        the tools the framework lets run when it refuses any other call (its
        dispatch is recorded ``refused``: nothing ran); None: all run.
        """
        if isinstance(emitted, Message) or not isinstance(emitted, Sequence):
            message = emitted
            routed = tuple(getattr(emitted, "tool_calls", ()) or ())
        else:
            message = Message("assistant", "", tuple(emitted))
            routed = tuple(emitted)
        calls = routed if calls is None else tuple(calls)
        calls = tuple(_as_tool_call(call) for call in calls)
        self.post = self.turn.layer.router.post_model(
            self.context(Seam.POST_MODEL, emitted_message=message), calls, runnable=runnable
        )
        return self.post

    def start_tool(
        self, call: ToolCall, *, parent: otel_context.Context | None = None
    ) -> Invocation:
        """An ``execute_tool {tool}`` span for one tool call whose body starts now
        (default parent: this iteration's context); record its output with
        :meth:`tool_result`, end it with ``stop()``/``fail()``. Never raises:
        telemetry that fails gives an invocation of no span."""
        parent = self.invocation.context if parent is None else parent
        try:
            return self.turn.layer.genai.start_tool(
                call.name, parent=parent, call_id=call.id, conversation_id=self.turn.conversation_id
            )
        except Exception as exc:  # telemetry failed: the tool runs without its span
            telemetry_error("execute_tool", exc)
            return Invocation(trace.INVALID_SPAN, parent)

    @contextlib.contextmanager
    def execute_tool(self, call: ToolCall) -> Iterator[trace.Span]:
        """:meth:`start_tool`'s ``with`` form: the ``execute_tool`` span current
        for the block (it gives the span), its exception recorded and re-raised."""
        with self.start_tool(call, parent=otel_context.get_current()) as invocation:
            yield invocation.span

    def tool_result(self, target: Invocation | trace.Span, output: Any) -> None:
        """Record a tool's output on its ``execute_tool`` span, only if content
        capture is on (masked and truncated by the observer's config)."""
        span = target.span if isinstance(target, Invocation) else target
        self.turn.layer.observer.capture(span, c.ATTR_TOOL_CALL_RESULT, output)

    @property
    def default_model(self) -> str:
        """The layer's default model (what names a call nothing else names)."""
        return self.turn.layer.router.default_model.model_name

    @property
    def threshold_tokens(self) -> float:
        """The offload gate's threshold: an output below it is never offloaded."""
        return self.turn.layer.gate.threshold_tokens

    def sent_stub(self, decision: OffloadGateDecision, tool: str) -> str:
        """The stub sent in place of a fired decision's output (the one
        :meth:`offload` kept and priced; made again only for another decision)."""
        made = self._stub
        if made is not None and made[0] == decision.offload_id:
            return made[1]
        return offload_stub(decision, tool)

    def _sent_stub_tokens(self, decision: OffloadGateDecision, tool: str) -> float:
        made = self._stub
        if made is not None and made[0] == decision.offload_id:
            return made[2]
        return estimate_tokens(offload_stub(decision, tool))

    def offload(
        self, call: ToolCall, output: str | float, *, tokens: float | None = None
    ) -> OffloadGateDecision:
        """Ask the offload gate about one tool output (text, or its token count;
        ``tokens``: the text's count when the caller measured it already).

        A fired decision is followed by the ledger under its offload id, its
        stub priced at the size of the stub really sent
        (:func:`~seamscope.loop.offload_stub`, chars / 4), not the
        gate's assumed size. A text output that fires is first kept in the
        turn's offload store (:attr:`Turn.store`), where any worker's recall
        finds it; when the store does not keep it, no offload is made (the
        decision does not fire, reason code ``store_failed``: the output
        stays in the prompt). Outputs the store's size bound drops to make
        room are settled then.
        """
        if isinstance(output, str):
            tokens = estimate_tokens(output) if tokens is None else tokens
        elif isinstance(output, int | float) and not isinstance(output, bool):
            tokens = float(output)
        else:
            # not a text nor a size: the gate cannot price it (it never fires on NaN)
            telemetry_error("offload", None, field="output", value_type=type(output).__name__)
            tokens = math.nan
        turn = self.turn
        layer = turn.layer
        model = self.model or layer.router.default_model.model_name
        evicted: list[str] = []

        def keep(fired: OffloadGateDecision) -> None:
            if not isinstance(output, str) or not fired.offload_id:
                return
            stub = offload_stub(fired, call.name)
            self._stub = (fired.offload_id, stub, estimate_tokens(stub))
            now = time.time()
            evicted.extend(
                turn.store.put(
                    StoredOffload(
                        offload_id=fired.offload_id,
                        conversation_id=turn.offload_scope or turn.conversation_id or "",
                        call_id=call.id,
                        tool_name=call.name,
                        model=fired.model_name,
                        stub=stub,
                        output_tokens=fired.output_tokens,
                        stub_tokens=self._stub[2],
                        predicted_net_saving=fired.net_saving,
                        horizon=fired.horizon,
                        recall_probability=fired.recall_probability,
                        created_at=now,
                    ),
                    output,
                )
            )

        decision, link = layer.gate.evaluate_linked(
            tokens,
            model,
            GateCall(turn.conversation_id, turn.agent, call.name, call.id),
            keep=keep,
        )
        shadow_fires = decision.shadow is not None and decision.shadow.fire
        if (decision.fire or shadow_fires) and turn.conversation_id:
            layer.ledger.record_offload(
                decision,
                conversation_id=turn.conversation_id,
                link=link,
                stub_tokens=self._sent_stub_tokens(decision, call.name)
                if decision.fire
                else unsent_stub_tokens(decision, call.name),  # the shadow's, if it fires
                tool_name=call.name,
                store=turn.store if isinstance(output, str) else None,
            )
        for offload_id in evicted:
            # the store dropped its content to make room: settled now, as it went
            layer.ledger.settle_offload(
                turn.conversation_id or "",
                offload_id,
                trigger=SettleTrigger.EVICTED,
                store=turn.store,
            )
        return decision

    # a framework's own decisions ------------------------------------------------

    def middleware_decision(
        self, decision: MiddlewareDecision, *, store: OffloadStore | None = None
    ) -> None:
        """Record a decision a framework's own middleware took; a compaction
        starts being followed by the ledger like a fired offload (its
        settlement links to the compaction's span). ``store``: the shared
        offload store the adapter wrote the compaction's record to (any
        worker then prices it: :meth:`OffloadLedger.record_compaction
        <seamscope.decisions.OffloadLedger.record_compaction>`)."""
        turn = self.turn
        layer = turn.layer
        # every decision span names the conversation and the agent of its loop
        if decision.conversation_id is None and turn.conversation_id:
            decision = replace(decision, conversation_id=turn.conversation_id)
        if decision.agent_name is None and turn.agent:
            decision = replace(decision, agent_name=turn.agent)
        # a trusted observer written before this hook existed may lack it
        hook = getattr(layer.observer, "on_middleware_decision", None)
        link = hook(decision) if callable(hook) else None
        compaction = decision.compaction
        if compaction is not None and turn.conversation_id:
            layer.ledger.record_compaction(
                compaction, conversation_id=turn.conversation_id, link=link, store=store
            )

    def compaction(
        self,
        compaction_id: str,
        mechanism: OffloadMechanism,
        *,
        removed_tokens: float,
        kept_tokens: float,
        tool_call_ids: Sequence[str] = (),
        messages_removed: int = 0,
        cost: Decimal = Decimal(0),
        rereadable: bool = True,
        model: str | None = None,
    ) -> Compaction:
        """A compaction priced with the gate's formula on its sizes: the removed
        tokens saved per later call over the gate's horizon, the kept tokens
        carried instead, and (``rereadable``) the gate's recall prior for the
        model fetching the cleared data again. ``model``: whose rates price
        it (default: this iteration's model)."""
        layer = self.turn.layer
        name = model or self.model or layer.router.default_model.model_name
        kept = max(0.0, float(kept_tokens))  # an estimate, never rounded
        inputs = replace(
            layer.gate.inputs(float(removed_tokens), name),
            large_offload_threshold_tokens=0,
            stub_tokens=kept,
        )
        if not rereadable:
            inputs = replace(inputs, recall_probability=0.0)
        predicted = evaluate_offload_gate(inputs, pricing=layer.gate.pricing)
        return Compaction(
            compaction_id,
            mechanism,
            name,
            float(removed_tokens),
            kept,
            tuple(tool_call_ids),
            int(messages_removed),
            cost,
            None if predicted.pricing_source is PricingSource.NONE else predicted,
        )

    def model_call_cost(self, model: str, usage: ModelUsage) -> Decimal:
        """What one model call cost at ``model``'s rates (0 when unpriced)."""
        quote = self.turn.layer.gate.pricing.lookup(model)
        if quote is None:
            return Decimal(0)
        price = quote.price
        return (
            usage.uncached_tokens * price.input_rate
            + usage.cache_read_tokens * price.cache_read_rate
            + usage.cache_write_tokens * price.cache_write_rate
            + usage.output_tokens * price.output_rate
        )

    def recall(
        self,
        offload_id: str,
        *,
        input_tokens: float,
        output_tokens: int,
        call_id: str | None = None,
    ) -> None:
        """The model recalled an offloaded output: a real cost in the ledger.

        ``output_tokens``: the output of the model call that emitted the recall.
        Parallel recalls of one model call share that output, so it is charged
        with the first recall of the iteration only. ``call_id``: the tool call
        that brought it back (on the ``seamscope.offload.recalled`` event).
        """
        turn = self.turn
        with _RECALL_LOCK:
            if self._recall_output_charged:
                output_tokens = 0
            self._recall_output_charged = True
        if turn.conversation_id:
            turn.layer.ledger.record_recall(
                turn.conversation_id,
                offload_id,
                model=self.model or turn.layer.router.default_model.model_name,
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                store=turn.store,
                tool_call_id=call_id,
            )


_SelectionKey = tuple[
    tuple[str, ...], tuple[str, ...], str | None, str | None, str | None, ToolCatalog | None
]


def _names(tools: object) -> tuple[str, ...] | None:
    """The tools' names in order; None (never reused) when the tools are not a
    list or tuple or when one has no name (two unnamed tools cannot be told apart)."""
    if not isinstance(tools, list | tuple):
        return None
    names = tuple([t if type(t) is str else tool_name(t) for t in tools])
    if any(n is None for n in names):
        return None
    return tuple([n for n in names if n is not None])


def _selection_key(
    tools: object, fixed: object, ctx: SelectionContext, catalog: ToolCatalog | None
) -> _SelectionKey | None:
    """What a selection is reused on; None when it cannot be compared."""
    offered = _names(tools)
    fixed_names = _names(fixed)
    if offered is None or fixed_names is None:
        return None
    return (offered, fixed_names, ctx.role, ctx.forced_tool, ctx.agent_name, catalog)


def _same_inputs(last: _SelectionKey, key: _SelectionKey) -> bool:
    """The same names, role, forced tool and agent, and the very catalog object."""
    return last[:5] == key[:5] and last[5] is key[5]


def resolve_store(owner: str, store: object) -> OffloadStore:
    """The offload store a constructor was given: a store, a URL, or None (the
    URL in ``SEAMSCOPE_OFFLOAD_STORE``, else an in-memory store). A bad value
    raises ValueError naming ``owner.offload_store`` (a URL's password never
    shown)."""
    from seamscope.stores import MemoryStore, store_from_env, store_from_url

    try:
        if store is None:
            return store_from_env() or MemoryStore()
        if isinstance(store, str):
            return store_from_url(store)
    except ValueError as exc:
        raise ValueError(f"{owner}.offload_store: {exc}") from None
    if not isinstance(store, OffloadStore):
        raise ValueError(
            f"{owner}.offload_store must be an OffloadStore, a store URL or None, "
            f"got {type(store).__name__}"
        )
    return store


def _as_str(value: object) -> str:
    try:
        return str(value)
    except Exception:
        return "?"


def _as_tool_call(call: Any) -> ToolCall:
    """A ToolCall from what a loop passes: a ToolCall, a mapping or an object with
    ``id``/``name``/``args``. Arguments given as a JSON string are parsed; ``None``
    or anything that is not an object becomes ``{}`` (the original is kept under
    ``"__raw__"`` when it was not empty), so the POST seam never raises on them."""
    if isinstance(call, ToolCall):
        return call
    if isinstance(call, Mapping):
        raw_id, name, args = call.get("id"), call.get("name"), call.get("args")
    else:
        raw_id = getattr(call, "id", None)
        name = getattr(call, "name", None)
        args = getattr(call, "args", None)
    return ToolCall("" if raw_id is None else str(raw_id), str(name or ""), _as_args(args))


def _as_args(args: Any) -> dict[str, Any]:
    if isinstance(args, Mapping):
        return dict(args)
    if isinstance(args, str):
        try:
            parsed = json.loads(args) if args.strip() else {}
        except ValueError:
            return {"__raw__": args}
        return dict(parsed) if isinstance(parsed, Mapping) else {"__raw__": parsed}
    return {} if args is None else {"__raw__": args}
