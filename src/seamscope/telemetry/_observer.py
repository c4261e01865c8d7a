"""OTelObserver: the decision core's hooks as spans, span events, metrics and logs.

Span tree of one iteration (all INTERNAL)::

    seamscope.iteration
    ├── seamscope.select_tools
    │   └── seamscope.stage            (one per stage, in order)
    ├── seamscope.seam.pre_model       (events: seamscope.policy.evaluated)
    ├── seamscope.seam.post_model
    │   └── seamscope.dispatch         (one per emitted call; events as above)
    └── seamscope.offload_gate

Status: a span is ERROR only when the decision it wraps failed itself: a
stage that raised (the pipeline replaced its verdict with a degraded
abstain). Adopter code that raised inside a seam (a match, guard,
args_transform, resolver or callback) was contained and the seam still
decided, so it is a span event carrying ``error.type``, and the span's
status stays unset. Exceptions of the loop itself that cross an iteration
span are recorded and the span is ERROR (see :meth:`OTelObserver.iteration`).

Attributes a sampler needs (names, indexes, the emitted tool, the model)
are set at span start; everything else is set at the end, in one call, and
only when the span is recording. Nothing here raises into the loop: every
hook catches, logs ``seamscope.telemetry.error`` and carries on, and a span
a hook opened is always ended and its context detached, whatever failed in
between. A value of the wrong type where the contract says string (a tool
call id, a tool name, a stage reason) is recorded as its ``str()`` and
logged as a ``seamscope.telemetry.error``.

Cost: with the no-op OpenTelemetry API (``NoOpTracerProvider`` /
``NoOpMeterProvider`` passed in, as ``configure()`` does under
``OTEL_SDK_DISABLED``) the observer skips span and metric work entirely;
metric attribute sets are built once per distinct label combination. On an
SDK meter provider with exemplars off (``configure()``'s default without an
OTLP metrics push), counts are kept as in-process totals that export the same
points (see ``_instruments``). Enum members are read through ``_value_``:
``.value`` is a Python-level property, read about thirty times an iteration.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from seamscope import __version__
from seamscope.decisions import (
    DispatchContext,
    DispatchRecord,
    GateCall,
    OffloadGateDecision,
    OffloadGateInputs,
    PolicyEvaluation,
    PostModelResult,
    PreModelResult,
    SelectionContext,
    SelectionResult,
    StageRecord,
    ToolCall,
)
from seamscope.decisions._enums import (
    DecisionKind,
    GuardResult,
    PaletteVerdict,
    PolicyResult,
)
from seamscope.decisions._messages import message_text
from seamscope.telemetry import conventions as c
from seamscope.telemetry._config import TelemetryConfig
from seamscope.telemetry._instruments import Instruments, LabelCap, bound, flag
from seamscope.telemetry._logging import log_event, telemetry_error

__all__ = ["LAST_GATE_SPAN", "OTelObserver"]

LAST_GATE_SPAN: contextvars.ContextVar[trace.SpanContext | None] = contextvars.ContextVar(
    "seamscope_last_gate_span", default=None
)
"""The span context of the latest offload-gate span in this context (for ledger links)."""

_INTERNAL = SpanKind.INTERNAL
_attach = otel_context.attach
_detach = otel_context.detach
_in_context = trace.set_span_in_context
_perf_counter = time.perf_counter

_SET_OFFERED = {c.ATTR_SELECTION_SET: c.SelectionSet.OFFERED.value}
_SET_SELECTED = {c.ATTR_SELECTION_SET: c.SelectionSet.SELECTED.value}
_KIND_SELECT = {c.ATTR_DECISION_KIND: DecisionKind.SELECT_TOOLS.value}
_KIND_STAGE = {c.ATTR_DECISION_KIND: DecisionKind.STAGE.value}
_KIND_PRE = {c.ATTR_DECISION_KIND: DecisionKind.PRE_MODEL.value}
_KIND_POST = {c.ATTR_DECISION_KIND: DecisionKind.POST_MODEL.value}
_KIND_DISPATCH = {c.ATTR_DECISION_KIND: DecisionKind.DISPATCH.value}
_KIND_GATE = {c.ATTR_DECISION_KIND: DecisionKind.OFFLOAD_GATE.value}

_MAX_CACHED_LABEL_SETS = 4096


class _Handle:
    """An open span, its context token (None: not attached) and its start clock."""

    __slots__ = ("recording", "repeat", "span", "start", "token")

    def __init__(self, span: trace.Span, token: object, recording: bool) -> None:
        self.span = span
        self.token = token
        self.recording = recording
        self.start = 0.0
        self.repeat = False  # a gate call re-deciding an output already decided


class _IterationScope:
    """The context manager of :meth:`OTelObserver.iteration` (a class: it is
    entered once per iteration, and a generator-based one costs more)."""

    __slots__ = ("_handle", "_index", "_observer", "agent_name", "conversation_id")

    def __init__(
        self, observer: OTelObserver, index: int, conversation: str | None, agent: str | None
    ) -> None:
        self._observer = observer
        self._index = index
        # read by OTelObserver._open, as on any decision context
        self.conversation_id = conversation
        self.agent_name = agent
        self._handle: _Handle | None = None

    def __enter__(self) -> trace.Span:
        observer = self._observer
        try:
            if observer._spans_off:
                return observer._tracer.start_span(c.SPAN_ITERATION)
            self._handle = observer._open(
                c.SPAN_ITERATION, {c.ATTR_ITERATION_INDEX: self._index}, self
            )
            return self._handle.span
        except Exception as exc:
            observer._failed("iteration", exc)
            return trace.INVALID_SPAN

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        handle = self._handle
        if handle is None:
            return
        if exc is not None:
            with contextlib.suppress(Exception):
                if handle.recording:
                    name = type(exc).__qualname__
                    handle.span.set_attribute(c.ATTR_ERROR_TYPE, name)
                    handle.span.set_status(Status(StatusCode.ERROR, name))
        self._observer._finish("iteration", handle)


class OTelObserver:
    """Records the decision core's work with OpenTelemetry and structlog.

    Pass providers explicitly or let the global API supply them; this class
    never sets global providers. One observer can serve many loops and
    threads (spans follow the current OpenTelemetry context).
    """

    never_raises = True

    def __init__(
        self,
        *,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: Any | None = None,
        config: TelemetryConfig | None = None,
    ) -> None:
        if config is not None and not isinstance(config, TelemetryConfig):
            raise TypeError("OTelObserver.config must be a TelemetryConfig")
        self.config = config or TelemetryConfig.create()
        provider = tracer_provider or trace.get_tracer_provider()
        self._tracer = provider.get_tracer("seamscope", __version__)
        # The no-op API records nothing: skip building what it would drop.
        self._spans_off = isinstance(self._tracer, trace.NoOpTracer)
        self.instruments = Instruments(meter_provider)
        self._metrics_on = self.instruments.enabled
        self._cap = LabelCap(self.config.metric_label_cap, self.config.known_labels)
        self._max_len = self.config.max_attribute_length
        self._max_items = self.config.max_array_length
        self._capture = self.config.capture_content
        # (instrument, label values) -> the add/record bound to that attribute set
        self._series: dict[tuple[Any, ...], Any] = {}
        if self._metrics_on:
            inst = self.instruments
            duration = inst.decision_duration
            self._duration_select = bound(duration, _KIND_SELECT)
            self._duration_stage = bound(duration, _KIND_STAGE)
            self._duration_pre = bound(duration, _KIND_PRE)
            self._duration_post = bound(duration, _KIND_POST)
            self._duration_dispatch = bound(duration, _KIND_DISPATCH)
            self._duration_gate = bound(duration, _KIND_GATE)
            self._count_offered = bound(inst.selection_tools, _SET_OFFERED)
            self._count_selected = bound(inst.selection_tools, _SET_SELECTED)

    # -- helpers ---------------------------------------------------------------

    def _text(self, value: str) -> str:
        return value if len(value) <= self._max_len else value[: self._max_len - 1] + "…"

    def _names(self, names: Sequence[str]) -> Sequence[str]:
        max_len = self._max_len
        if len(names) <= self._max_items and (not names or max(map(len, names)) <= max_len):
            return names  # within the limits: as is (a tuple or a list, both arrays)
        return [n if len(n) <= max_len else self._text(n) for n in names[: self._max_items]]

    def _str(self, hook: str, key: str, value: Any) -> str:
        """A string-typed value that arrived with another type: record str(value), log it."""
        log_event(
            "error",
            c.LOG_TELEMETRY_ERROR,
            hook=hook,
            error_type="TypeError",
            attribute=key,
            value_type=type(value).__qualname__,
        )
        try:
            return self._text(str(value))
        except Exception:
            return "?"

    def _content(self, value: Any) -> str:
        if not isinstance(value, str):
            try:
                value = json.dumps(value, default=str, sort_keys=True)
            except Exception:
                value = repr(value)
        return self._text(self.config.mask(value))

    def capture(self, span: trace.Span, key: str, value: Any) -> None:
        """Set a content attribute (``seamscope.content.*``) on ``span`` when content
        capture is on; the value passes through the mask and the length limit."""
        if not self.config.capture_content:
            return
        try:
            if span.is_recording():
                span.set_attribute(key, self._content(value))
        except Exception as exc:
            self._failed("capture", exc)

    def _open(self, name: str, attributes: dict[str, Any], ctx: Any) -> _Handle:
        """Start a span with ``attributes`` plus the conversation and agent of
        ``ctx`` (when it has them), and make it current."""
        conversation = getattr(ctx, "conversation_id", None)
        if conversation:
            attributes[c.ATTR_GEN_AI_CONVERSATION_ID] = conversation
        agent = getattr(ctx, "agent_name", None)
        if agent:
            attributes[c.ATTR_GEN_AI_AGENT_NAME] = agent
        span = self._tracer.start_span(name, kind=_INTERNAL, attributes=attributes)
        return _Handle(span, _attach(_in_context(span)), span.is_recording())

    def _finish(self, hook: str, handle: _Handle) -> None:
        """Detach and end: always, and each step on its own (never raises)."""
        token = handle.token
        if token is None:
            return
        try:
            _detach(token)  # type: ignore[arg-type]
        except Exception as exc:
            self._failed(hook, exc)
        try:
            handle.span.end()
        except Exception as exc:
            self._failed(hook, exc)

    @staticmethod
    def _failed(hook: str, exc: BaseException) -> None:
        telemetry_error(hook, exc)

    def _bound(self, key: tuple[Any, ...], instrument: Any, build: Any, *args: Any) -> Any:
        """``instrument``'s add/record for the attribute set of ``key`` (a tuple led
        by the instrument's name), built by ``build(*args)`` (and capped) once."""
        add = self._series.get(key)
        if add is None:
            add = bound(instrument, build(*args))
            if len(self._series) < _MAX_CACHED_LABEL_SETS:
                self._series[key] = add
        return add

    # -- iteration (called by the loop adapters) ----------------------------

    def iteration(
        self,
        index: int,
        *,
        conversation_id: str | None = None,
        agent_name: str | None = None,
    ) -> contextlib.AbstractContextManager[trace.Span]:
        """A ``seamscope.iteration`` span around one ReAct iteration (a context manager
        that gives the span).

        An exception of the loop crossing it is recorded (``error.type``,
        status ERROR) and re-raised unchanged. A failure of telemetry itself
        (a span processor that raises) is logged and never reaches the loop.
        """
        return _IterationScope(self, index, conversation_id, agent_name)

    # -- selection ---------------------------------------------------------------

    def start_selection(self, ctx: SelectionContext, offered: tuple[str, ...]) -> Any:
        if self._spans_off:
            return None
        try:
            return self._open(c.SPAN_SELECT_TOOLS, {c.ATTR_ITERATION_INDEX: ctx.iteration}, ctx)
        except Exception as exc:
            self._failed("start_selection", exc)
            return None

    def end_selection(self, handle: Any, result: SelectionResult) -> None:
        try:
            if self._metrics_on:
                self._duration_select(result.duration_s)
                self._count_offered(len(result.offered))
                self._count_selected(len(result.tools))
        except Exception as exc:
            self._failed("end_selection", exc)
        if handle is None:
            return
        try:
            if handle.recording:
                # result.selected and result.dropped, reading the tool names once
                selected = result.selected
                chosen = set(selected)
                dropped = tuple([n for n in result.offered if n not in chosen])
                attrs: dict[str, Any] = {
                    c.ATTR_SELECTION_OFFERED: self._names(result.offered),
                    c.ATTR_SELECTION_SELECTED: self._names(selected),
                    c.ATTR_SELECTION_DROPPED: self._names(dropped),
                }
                if result.forced_tool:
                    attrs[c.ATTR_SELECTION_FORCED_TOOL] = result.forced_tool
                attrs[c.ATTR_SELECTION_REINSTATED] = result.reinstated
                handle.span.set_attributes(attrs)
        except Exception as exc:
            self._failed("end_selection", exc)
        self._finish("end_selection", handle)

    def start_stage(self, ctx: SelectionContext, index: int, stage: Any) -> Any:
        if self._spans_off:
            return None
        try:
            return self._open(
                c.SPAN_STAGE,
                {
                    c.ATTR_STAGE_NAME: str(stage.name),
                    c.ATTR_STAGE_INDEX: index,
                    c.ATTR_STAGE_PROTECTS_FORCED: bool(stage.protects_forced),
                },
                ctx,
            )
        except Exception as exc:
            self._failed("start_stage", exc)
            return None

    def _stage_labels(self, record: StageRecord) -> dict[str, str]:
        return {
            c.ATTR_STAGE_NAME: self._cap(c.ATTR_STAGE_NAME, record.name),
            c.ATTR_STAGE_OUTCOME: record.outcome._value_,
            c.ATTR_STAGE_DEGRADED: flag(record.degraded),
        }

    def end_stage(self, handle: Any, record: StageRecord) -> None:
        reason = record.reason
        try:
            if type(reason) is not str:
                reason = self._str("end_stage", c.ATTR_STAGE_REASON, reason)
            if self._metrics_on:
                self._bound(
                    ("stage", record.name, record.outcome._value_, record.degraded),
                    self.instruments.stage_outcomes,
                    self._stage_labels,
                    record,
                )(1)
                self._duration_stage(record.duration_s)
            if record.degraded:
                fields: dict[str, Any] = {"stage": record.name, "reason": self._text(reason)}
                if record.error is not None:
                    fields["error_type"] = record.error.error_type
                log_event("warning", c.LOG_STAGE_DEGRADED, **fields)
        except Exception as exc:
            self._failed("end_stage", exc)
        if handle is None:
            return
        try:
            if handle.recording:
                span = handle.span
                span.set_attributes(
                    {
                        c.ATTR_STAGE_OUTCOME: record.outcome._value_,
                        c.ATTR_STAGE_REASON: self._text(reason),
                        c.ATTR_STAGE_DEGRADED: record.degraded,
                        c.ATTR_STAGE_DROPPED: self._names(record.dropped),
                        c.ATTR_STAGE_FORCED_REINSTATED: record.forced_reinstated,
                    }
                )
                if record.error is not None:
                    span.set_attribute(c.ATTR_ERROR_TYPE, record.error.error_type)
                    span.set_status(Status(StatusCode.ERROR, record.error.error_type))
        except Exception as exc:
            self._failed("end_stage", exc)
        self._finish("end_stage", handle)

    # -- seams ---------------------------------------------------------------------

    def start_pre_model(self, ctx: DispatchContext) -> Any:
        if self._spans_off:
            return None
        try:
            attrs = {c.ATTR_SEAM: ctx.seam._value_, c.ATTR_ITERATION_INDEX: ctx.iteration}
            if self._capture and ctx.messages:
                attrs[c.ATTR_MESSAGE_CONTENT] = self._content(message_text(ctx.messages[-1]))
            return self._open(c.SPAN_SEAM_PRE_MODEL, attrs, ctx)
        except Exception as exc:
            self._failed("start_pre_model", exc)
            return None

    def _evaluation_labels(self, evaluation: PolicyEvaluation) -> dict[str, str]:
        return {
            c.ATTR_SEAM: evaluation.seam._value_,
            c.ATTR_POLICY_NAME: self._cap(c.ATTR_POLICY_NAME, evaluation.policy),
            c.ATTR_POLICY_RESULT: evaluation.result._value_,
        }

    def on_policy_evaluated(self, handle: Any, evaluation: PolicyEvaluation) -> None:
        try:
            if self._metrics_on:
                self._bound(
                    (
                        "evaluation",
                        evaluation.seam._value_,
                        evaluation.policy,
                        evaluation.result._value_,
                    ),
                    self.instruments.policy_evaluations,
                    self._evaluation_labels,
                    evaluation,
                )(1)
            error = evaluation.error
            if error is not None:
                log_event(
                    "warning",
                    c.LOG_POLICY_ERROR,
                    policy=evaluation.policy,
                    seam=evaluation.seam._value_,
                    source=error.source,
                    error_type=error.error_type,
                )
            if handle is None or not handle.recording:
                return
            attrs: dict[str, Any] = {
                c.ATTR_POLICY_NAME: evaluation.policy,
                c.ATTR_SEAM: evaluation.seam._value_,
                c.ATTR_POLICY_RESULT: evaluation.result._value_,
            }
            guard = evaluation.guard
            if evaluation.result is PolicyResult.MATCHED and guard is not GuardResult.NONE:
                attrs[c.ATTR_DISPATCH_GUARD] = guard._value_
            if error is not None:
                attrs[c.ATTR_ERROR_TYPE] = error.error_type
                if self._capture:
                    attrs[c.ATTR_ERROR_MESSAGE] = self._content(error.message)
            handle.span.add_event(c.EVENT_POLICY_EVALUATED, attrs)
        except Exception as exc:
            self._failed("on_policy_evaluated", exc)

    def _adopter_errors(self, handle: Any, errors: Sequence[Any]) -> None:
        for error in errors:
            if error.source in ("match", "guard"):
                continue  # reported with their policy evaluation
            log_event(
                "warning",
                c.LOG_ADOPTER_ERROR,
                source=error.source,
                policy=error.policy,
                error_type=error.error_type,
            )
            if handle is not None and handle.recording:
                attrs: dict[str, Any] = {c.ATTR_ADOPTER_SOURCE: error.source}
                attrs[c.ATTR_ERROR_TYPE] = error.error_type
                if error.policy:
                    attrs[c.ATTR_POLICY_NAME] = error.policy
                if self._capture:
                    attrs[c.ATTR_ERROR_MESSAGE] = self._content(error.message)
                handle.span.add_event(c.EVENT_ADOPTER_ERROR, attrs)

    def _win_labels(self, seam: str, source: str, policy: str | None) -> dict[str, str]:
        return {
            c.ATTR_SEAM: seam,
            c.ATTR_SEAM_WINNER_SOURCE: source,
            c.ATTR_POLICY_NAME: self._cap(c.ATTR_POLICY_NAME, policy),
        }

    def end_pre_model(self, handle: Any, result: PreModelResult) -> None:
        policy = result.policy
        try:
            if self._metrics_on:
                source = result.source._value_
                self._bound(
                    ("win", "pre_model", source, policy),
                    self.instruments.policy_wins,
                    self._win_labels,
                    c.Seam.PRE_MODEL._value_,
                    source,
                    policy,
                )(1)
                self._duration_pre(result.duration_s)
            if result.errors:
                self._adopter_errors(handle, result.errors)
        except Exception as exc:
            self._failed("end_pre_model", exc)
        if handle is None:
            return
        try:
            if handle.recording:
                attrs: dict[str, Any] = {c.ATTR_SEAM_WINNER_SOURCE: result.source._value_}
                if policy:
                    attrs[c.ATTR_POLICY_WINNER] = policy
                attrs[c.ATTR_GEN_AI_REQUEST_MODEL] = result.model.model_name
                handle.span.set_attributes(attrs)
        except Exception as exc:
            self._failed("end_pre_model", exc)
        self._finish("end_pre_model", handle)

    def start_post_model(self, ctx: DispatchContext, calls: tuple[ToolCall, ...]) -> Any:
        if self._spans_off:
            return None
        try:
            return self._open(
                c.SPAN_SEAM_POST_MODEL,
                {
                    c.ATTR_SEAM: ctx.seam._value_,
                    c.ATTR_ITERATION_INDEX: ctx.iteration,
                    c.ATTR_SEAM_TOOL_CALLS: len(calls),
                },
                ctx,
            )
        except Exception as exc:
            self._failed("start_post_model", exc)
            return None

    def end_post_model(self, handle: Any, result: PostModelResult) -> None:
        try:
            if self._metrics_on:
                self._duration_post(result.duration_s)
        except Exception as exc:
            self._failed("end_post_model", exc)
        if handle is None:
            return
        try:
            if handle.recording:
                handle.span.set_attribute(c.ATTR_SEAM_REWRITTEN, result.rewritten)
        except Exception as exc:
            self._failed("end_post_model", exc)
        self._finish("end_post_model", handle)

    def start_dispatch(self, ctx: DispatchContext, index: int, call: ToolCall) -> Any:
        if self._spans_off:
            return None
        try:
            call_id = call.id
            if type(call_id) is not str:
                call_id = self._str("start_dispatch", c.ATTR_GEN_AI_TOOL_CALL_ID, call_id)
            name = call.name
            if type(name) is not str:
                name = self._str("start_dispatch", c.ATTR_DISPATCH_EMITTED_TOOL, name)
            return self._open(
                c.SPAN_DISPATCH,
                {c.ATTR_GEN_AI_TOOL_CALL_ID: call_id, c.ATTR_DISPATCH_EMITTED_TOOL: name},
                ctx,
            )
        except Exception as exc:
            self._failed("start_dispatch", exc)
            return None

    def _redirect_labels(self, policy: str | None, palette: str) -> dict[str, str]:
        return {
            c.ATTR_POLICY_NAME: self._cap(c.ATTR_POLICY_NAME, policy),
            c.ATTR_DISPATCH_PALETTE_GATE: palette,
        }

    def end_dispatch(self, handle: Any, record: DispatchRecord) -> None:
        try:
            if self._metrics_on:
                inst = self.instruments
                policy = record.policy
                source = record.source._value_
                self._bound(
                    ("win", "post_model", source, policy),
                    inst.policy_wins,
                    self._win_labels,
                    c.Seam.POST_MODEL._value_,
                    source,
                    policy,
                )(1)
                if policy is not None or record.adopter_override:
                    palette = record.palette._value_
                    self._bound(
                        ("redirect", policy, palette),
                        inst.redirects,
                        self._redirect_labels,
                        policy,
                        palette,
                    )(1)
                self._duration_dispatch(record.duration_s)
            if record.palette is PaletteVerdict.DROPPED:
                target = record.redirect_to
                if record.adopter_override or target is None:
                    target = None
                log_event(
                    "warning",
                    c.LOG_PALETTE_GATE_DROP,
                    policy=record.policy,
                    emitted_tool=record.emitted.name,
                    target=target or "(adopter override)",
                    tool_call_id=record.emitted.id,
                )
            if record.errors:
                self._adopter_errors(handle, record.errors)
        except Exception as exc:
            self._failed("end_dispatch", exc)
        if handle is None:
            return
        try:
            if handle.recording:
                attrs: dict[str, Any] = {}
                if record.policy:
                    attrs[c.ATTR_POLICY_WINNER] = record.policy
                if record.redirect_to:
                    attrs[c.ATTR_DISPATCH_REDIRECT_TO] = record.redirect_to
                final = record.final.name
                if type(final) is not str:
                    final = self._str("end_dispatch", c.ATTR_DISPATCH_FINAL_TOOL, final)
                attrs[c.ATTR_DISPATCH_GUARD] = record.guard._value_
                attrs[c.ATTR_DISPATCH_ADOPTER_OVERRIDE] = record.adopter_override
                attrs[c.ATTR_DISPATCH_PALETTE_GATE] = record.palette._value_
                attrs[c.ATTR_DISPATCH_FINAL_TOOL] = final
                attrs[c.ATTR_DISPATCH_ARGS_TRANSFORMED] = record.args_transformed
                attrs[c.ATTR_SEAM_WINNER_SOURCE] = record.source._value_
                if self._capture:
                    attrs[c.ATTR_DISPATCH_ARGS] = self._content(dict(record.final.args))
                handle.span.set_attributes(attrs)
        except Exception as exc:
            self._failed("end_dispatch", exc)
        self._finish("end_dispatch", handle)

    # -- offload gate ----------------------------------------------------------

    def start_offload_gate(self, inputs: OffloadGateInputs, call: GateCall | None) -> Any:
        start = _perf_counter()
        try:
            if self._spans_off:
                # the no-op tracer hands back the current span's context: kept
                # so the ledger links a settlement to it exactly as before
                handle = _Handle(self._tracer.start_span(c.SPAN_OFFLOAD_GATE), None, False)
            else:
                model = inputs.model_name
                if type(model) is not str:
                    model = self._str("start_offload_gate", c.ATTR_GEN_AI_REQUEST_MODEL, model)
                attrs: dict[str, Any] = {
                    c.ATTR_GEN_AI_REQUEST_MODEL: model,
                    c.ATTR_OFFLOAD_OUTPUT_TOKENS: float(inputs.output_tokens),
                }
                if call is not None:
                    call_id = call.tool_call_id
                    if call_id:
                        if type(call_id) is not str:
                            call_id = self._str(
                                "start_offload_gate", c.ATTR_GEN_AI_TOOL_CALL_ID, call_id
                            )
                        attrs[c.ATTR_GEN_AI_TOOL_CALL_ID] = call_id
                    tool = call.tool_name
                    if tool:
                        if type(tool) is not str:
                            tool = self._str("start_offload_gate", c.ATTR_GEN_AI_TOOL_NAME, tool)
                        attrs[c.ATTR_GEN_AI_TOOL_NAME] = tool
                handle = self._open(c.SPAN_OFFLOAD_GATE, attrs, call)
            handle.start = start
            handle.repeat = bool(call is not None and call.reevaluation)
            return handle
        except Exception as exc:
            self._failed("start_offload_gate", exc)
            return None

    def _model_labels(self, model: str) -> dict[str, str]:
        return {c.ATTR_GEN_AI_REQUEST_MODEL: self._cap(c.ATTR_GEN_AI_REQUEST_MODEL, model)}

    def _gate_labels(self, model: str, decision: OffloadGateDecision) -> dict[str, str]:
        return {
            c.ATTR_GEN_AI_REQUEST_MODEL: self._cap(c.ATTR_GEN_AI_REQUEST_MODEL, model),
            c.ATTR_OFFLOAD_FIRE: flag(decision.fire),
            c.ATTR_OFFLOAD_REASON_CODE: decision.reason_code._value_,
        }

    def end_offload_gate(self, handle: Any, decision: OffloadGateDecision) -> None:
        try:
            if self._metrics_on:
                inst = self.instruments
                name = decision.model_name
                self._bound(
                    ("gate", name, decision.fire, decision.reason_code._value_),
                    inst.offload_decisions,
                    self._gate_labels,
                    name,
                    decision,
                )(1)
                first = handle is None or not handle.repeat
                if first and decision.fire and decision.net_saving_usd > 0:
                    self._bound(
                        ("predicted", name),
                        inst.offload_predicted_net_saving,
                        self._model_labels,
                        name,
                    )(decision.net_saving_usd)
                if handle is not None:
                    self._duration_gate(_perf_counter() - handle.start)
            if (
                (handle is None or not handle.repeat)
                and decision.fire
                and decision.net_saving_usd > 0
            ):
                log_event(
                    "info",
                    c.LOG_OFFLOAD_DECIDED,
                    model=decision.model_name,
                    net_saving_usd=decision.net_saving_usd,
                    reason_code=decision.reason_code._value_,
                    offload_id=decision.offload_id,
                )
        except Exception as exc:
            self._failed("end_offload_gate", exc)
        if handle is None:
            return
        try:
            LAST_GATE_SPAN.set(handle.span.get_span_context())
            if handle.recording:
                handle.span.set_attributes(gate_attributes(decision, self._text))
        except Exception as exc:
            self._failed("end_offload_gate", exc)
        self._finish("end_offload_gate", handle)


def gate_attributes(decision: OffloadGateDecision, text: Any = str) -> Mapping[str, Any]:
    """The ``seamscope.offload.*`` attributes of a gate decision."""
    attrs: dict[str, Any] = {
        c.ATTR_OFFLOAD_FIRE: decision.fire,
        c.ATTR_OFFLOAD_NET_SAVING_USD: decision.net_saving_usd,
        c.ATTR_OFFLOAD_REPREFILL_SAVING_USD: decision.reprefill_saving_usd,
        c.ATTR_OFFLOAD_STUB_CARRY_COST_USD: decision.stub_carry_cost_usd,
        c.ATTR_OFFLOAD_EXPECTED_RECALL_HOP_COST_USD: decision.expected_recall_hop_cost_usd,
        c.ATTR_OFFLOAD_REASON: text(decision.reason),
        c.ATTR_OFFLOAD_REASON_CODE: decision.reason_code._value_,
        c.ATTR_OFFLOAD_OUTPUT_TOKENS: decision.output_tokens,
        c.ATTR_OFFLOAD_HORIZON: decision.horizon,
        c.ATTR_OFFLOAD_RECALL_PROBABILITY: decision.recall_probability,
        c.ATTR_OFFLOAD_PRICING_SOURCE: decision.pricing_source._value_,
        c.ATTR_GEN_AI_REQUEST_MODEL: decision.model_name,
    }
    if decision.offload_id:
        attrs[c.ATTR_OFFLOAD_ID] = decision.offload_id
    return attrs
