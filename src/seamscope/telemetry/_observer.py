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
are set at span start; everything else is set at the end, and only when
the span is recording. Nothing here raises into the loop: every hook
catches, logs ``seamscope.telemetry.error`` and carries on.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
from collections.abc import Iterator, Mapping, Sequence
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
    PaletteVerdict,
    PolicyResult,
    StageOutcomeKind,
)
from seamscope.decisions._messages import message_text
from seamscope.telemetry import conventions as c
from seamscope.telemetry._config import TelemetryConfig
from seamscope.telemetry._instruments import Instruments, LabelCap, flag
from seamscope.telemetry._logging import log_event

__all__ = ["LAST_GATE_SPAN", "OTelObserver"]

LAST_GATE_SPAN: contextvars.ContextVar[trace.SpanContext | None] = contextvars.ContextVar(
    "seamscope_last_gate_span", default=None
)
"""The span context of the latest offload-gate span in this context (for ledger links)."""

_INTERNAL = SpanKind.INTERNAL


class _Handle:
    """An open span, its context token and its duration clock's start."""

    __slots__ = ("recording", "span", "token")

    def __init__(self, span: trace.Span, token: object) -> None:
        self.span = span
        self.token = token
        self.recording = span.is_recording()


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
        self.instruments = Instruments(meter_provider)
        self._cap = LabelCap(self.config.metric_label_cap, self.config.known_labels)
        self._max_len = self.config.max_attribute_length
        self._max_items = self.config.max_array_length

    # -- helpers ---------------------------------------------------------------

    def _text(self, value: str) -> str:
        return value if len(value) <= self._max_len else value[: self._max_len - 1] + "…"

    def _names(self, names: Sequence[str]) -> list[str]:
        return [self._text(n) for n in names[: self._max_items]]

    def _content(self, value: Any) -> str:
        if not isinstance(value, str):
            try:
                value = json.dumps(value, default=str, sort_keys=True)
            except Exception:
                value = repr(value)
        return self._text(self.config.mask(value))

    def _start(self, name: str, attributes: dict[str, Any]) -> _Handle:
        span = self._tracer.start_span(name, kind=_INTERNAL, attributes=attributes)
        token = otel_context.attach(trace.set_span_in_context(span))
        return _Handle(span, token)

    @staticmethod
    def _finish(handle: _Handle) -> None:
        try:
            otel_context.detach(handle.token)  # type: ignore[arg-type]
        finally:
            handle.span.end()

    def _failed(self, hook: str, exc: BaseException) -> None:
        try:
            log_event("error", c.LOG_TELEMETRY_ERROR, hook=hook, error_type=type(exc).__qualname__)
        except Exception:  # pragma: no cover - logging itself broken
            pass

    def _duration(self, kind: DecisionKind, seconds: float) -> None:
        self.instruments.decision_duration.record(seconds, {c.ATTR_DECISION_KIND: kind.value})

    @staticmethod
    def _conversation(attrs: dict[str, Any], ctx: Any) -> dict[str, Any]:
        conversation = getattr(ctx, "conversation_id", None)
        agent = getattr(ctx, "agent_name", None)
        if conversation:
            attrs[c.ATTR_GEN_AI_CONVERSATION_ID] = conversation
        if agent:
            attrs[c.ATTR_GEN_AI_AGENT_NAME] = agent
        return attrs

    # -- iteration (called by the loop adapters) ----------------------------

    @contextlib.contextmanager
    def iteration(
        self,
        index: int,
        *,
        conversation_id: str | None = None,
        agent_name: str | None = None,
    ) -> Iterator[trace.Span]:
        """A ``seamscope.iteration`` span around one ReAct iteration.

        An exception of the loop crossing it is recorded (``error.type``,
        status ERROR) and re-raised unchanged.
        """
        attrs: dict[str, Any] = {c.ATTR_ITERATION_INDEX: index}
        if conversation_id:
            attrs[c.ATTR_GEN_AI_CONVERSATION_ID] = conversation_id
        if agent_name:
            attrs[c.ATTR_GEN_AI_AGENT_NAME] = agent_name
        with self._tracer.start_as_current_span(
            c.SPAN_ITERATION,
            kind=_INTERNAL,
            attributes=attrs,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                yield span
            except BaseException as exc:
                with contextlib.suppress(Exception):
                    span.set_attribute(c.ATTR_ERROR_TYPE, type(exc).__qualname__)
                    span.set_status(Status(StatusCode.ERROR, type(exc).__qualname__))
                raise

    # -- selection ---------------------------------------------------------------

    def start_selection(self, ctx: SelectionContext, offered: tuple[str, ...]) -> Any:
        try:
            attrs = self._conversation({c.ATTR_ITERATION_INDEX: ctx.iteration}, ctx)
            return self._start(c.SPAN_SELECT_TOOLS, attrs)
        except Exception as exc:
            self._failed("start_selection", exc)
            return None

    def end_selection(self, handle: Any, result: SelectionResult) -> None:
        try:
            if handle is None:
                return
            if handle.recording:
                span = handle.span
                span.set_attribute(c.ATTR_SELECTION_OFFERED, self._names(result.offered))
                span.set_attribute(c.ATTR_SELECTION_SELECTED, self._names(result.selected))
                span.set_attribute(c.ATTR_SELECTION_DROPPED, self._names(result.dropped))
                if result.forced_tool:
                    span.set_attribute(c.ATTR_SELECTION_FORCED_TOOL, result.forced_tool)
                span.set_attribute(c.ATTR_SELECTION_REINSTATED, result.reinstated)
            self._duration(DecisionKind.SELECT_TOOLS, result.duration_s)
            self._finish(handle)
        except Exception as exc:
            self._failed("end_selection", exc)

    def start_stage(self, ctx: SelectionContext, index: int, stage: Any) -> Any:
        try:
            attrs = self._conversation(
                {
                    c.ATTR_STAGE_NAME: str(stage.name),
                    c.ATTR_STAGE_INDEX: index,
                    c.ATTR_STAGE_PROTECTS_FORCED: bool(stage.protects_forced),
                },
                ctx,
            )
            return self._start(c.SPAN_STAGE, attrs)
        except Exception as exc:
            self._failed("start_stage", exc)
            return None

    def end_stage(self, handle: Any, record: StageRecord) -> None:
        try:
            self.instruments.stage_outcomes.add(
                1,
                {
                    c.ATTR_STAGE_NAME: self._cap(c.ATTR_STAGE_NAME, record.name),
                    c.ATTR_STAGE_OUTCOME: record.outcome.value,
                    c.ATTR_STAGE_DEGRADED: flag(record.degraded),
                },
            )
            self._duration(DecisionKind.STAGE, record.duration_s)
            if record.degraded:
                fields: dict[str, Any] = {"stage": record.name, "reason": record.reason}
                if record.error is not None:
                    fields["error_type"] = record.error.error_type
                log_event("warning", c.LOG_STAGE_DEGRADED, **fields)
            if handle is None:
                return
            span = handle.span
            if handle.recording:
                span.set_attribute(c.ATTR_STAGE_OUTCOME, record.outcome.value)
                span.set_attribute(c.ATTR_STAGE_REASON, self._text(record.reason))
                span.set_attribute(c.ATTR_STAGE_DEGRADED, record.degraded)
                span.set_attribute(c.ATTR_STAGE_DROPPED, self._names(record.dropped))
                span.set_attribute(c.ATTR_STAGE_FORCED_REINSTATED, record.forced_reinstated)
                if record.error is not None:
                    span.set_attribute(c.ATTR_ERROR_TYPE, record.error.error_type)
                    span.set_status(Status(StatusCode.ERROR, record.error.error_type))
            self._finish(handle)
        except Exception as exc:
            self._failed("end_stage", exc)

    # -- seams ---------------------------------------------------------------------

    def start_pre_model(self, ctx: DispatchContext) -> Any:
        try:
            attrs = self._conversation(
                {c.ATTR_SEAM: ctx.seam.value, c.ATTR_ITERATION_INDEX: ctx.iteration}, ctx
            )
            if self.config.capture_content and ctx.messages:
                attrs[c.ATTR_MESSAGE_CONTENT] = self._content(message_text(ctx.messages[-1]))
            return self._start(c.SPAN_SEAM_PRE_MODEL, attrs)
        except Exception as exc:
            self._failed("start_pre_model", exc)
            return None

    def on_policy_evaluated(self, handle: Any, evaluation: PolicyEvaluation) -> None:
        try:
            self.instruments.policy_evaluations.add(
                1,
                {
                    c.ATTR_SEAM: evaluation.seam.value,
                    c.ATTR_POLICY_NAME: self._cap(c.ATTR_POLICY_NAME, evaluation.policy),
                    c.ATTR_POLICY_RESULT: evaluation.result.value,
                },
            )
            error = evaluation.error
            if error is not None:
                log_event(
                    "warning",
                    c.LOG_POLICY_ERROR,
                    policy=evaluation.policy,
                    seam=evaluation.seam.value,
                    source=error.source,
                    error_type=error.error_type,
                )
            if handle is None or not handle.recording:
                return
            attrs: dict[str, Any] = {
                c.ATTR_POLICY_NAME: evaluation.policy,
                c.ATTR_SEAM: evaluation.seam.value,
                c.ATTR_POLICY_RESULT: evaluation.result.value,
            }
            if evaluation.result is PolicyResult.MATCHED and evaluation.guard.value != "none":
                attrs[c.ATTR_DISPATCH_GUARD] = evaluation.guard.value
            if error is not None:
                attrs[c.ATTR_ERROR_TYPE] = error.error_type
                if self.config.capture_content:
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
                if self.config.capture_content:
                    attrs[c.ATTR_ERROR_MESSAGE] = self._content(error.message)
                handle.span.add_event(c.EVENT_ADOPTER_ERROR, attrs)

    def end_pre_model(self, handle: Any, result: PreModelResult) -> None:
        try:
            policy = result.policy
            self.instruments.policy_wins.add(
                1,
                {
                    c.ATTR_SEAM: c.Seam.PRE_MODEL.value,
                    c.ATTR_SEAM_WINNER_SOURCE: result.source.value,
                    c.ATTR_POLICY_NAME: self._cap(c.ATTR_POLICY_NAME, policy),
                },
            )
            self._duration(DecisionKind.PRE_MODEL, result.duration_s)
            self._adopter_errors(handle, result.errors)
            if handle is None:
                return
            if handle.recording:
                span = handle.span
                span.set_attribute(c.ATTR_SEAM_WINNER_SOURCE, result.source.value)
                if policy:
                    span.set_attribute(c.ATTR_POLICY_WINNER, policy)
                span.set_attribute(c.ATTR_GEN_AI_REQUEST_MODEL, result.model.model_name)
            self._finish(handle)
        except Exception as exc:
            self._failed("end_pre_model", exc)

    def start_post_model(self, ctx: DispatchContext, calls: tuple[ToolCall, ...]) -> Any:
        try:
            attrs = self._conversation(
                {
                    c.ATTR_SEAM: ctx.seam.value,
                    c.ATTR_ITERATION_INDEX: ctx.iteration,
                    c.ATTR_SEAM_TOOL_CALLS: len(calls),
                },
                ctx,
            )
            return self._start(c.SPAN_SEAM_POST_MODEL, attrs)
        except Exception as exc:
            self._failed("start_post_model", exc)
            return None

    def end_post_model(self, handle: Any, result: PostModelResult) -> None:
        try:
            self._duration(DecisionKind.POST_MODEL, result.duration_s)
            if handle is None:
                return
            if handle.recording:
                handle.span.set_attribute(c.ATTR_SEAM_REWRITTEN, result.rewritten)
            self._finish(handle)
        except Exception as exc:
            self._failed("end_post_model", exc)

    def start_dispatch(self, ctx: DispatchContext, index: int, call: ToolCall) -> Any:
        try:
            attrs = self._conversation(
                {
                    c.ATTR_GEN_AI_TOOL_CALL_ID: call.id,
                    c.ATTR_DISPATCH_EMITTED_TOOL: call.name,
                },
                ctx,
            )
            return self._start(c.SPAN_DISPATCH, attrs)
        except Exception as exc:
            self._failed("start_dispatch", exc)
            return None

    def end_dispatch(self, handle: Any, record: DispatchRecord) -> None:
        try:
            inst = self.instruments
            policy_label = self._cap(c.ATTR_POLICY_NAME, record.policy)
            inst.policy_wins.add(
                1,
                {
                    c.ATTR_SEAM: c.Seam.POST_MODEL.value,
                    c.ATTR_SEAM_WINNER_SOURCE: record.source.value,
                    c.ATTR_POLICY_NAME: policy_label,
                },
            )
            attempted = record.policy is not None or record.adopter_override
            if attempted:
                inst.redirects.add(
                    1,
                    {
                        c.ATTR_POLICY_NAME: policy_label,
                        c.ATTR_DISPATCH_PALETTE_GATE: record.palette.value,
                    },
                )
            self._duration(DecisionKind.DISPATCH, record.duration_s)
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
            self._adopter_errors(handle, record.errors)
            if handle is None:
                return
            if handle.recording:
                span = handle.span
                if record.policy:
                    span.set_attribute(c.ATTR_POLICY_WINNER, record.policy)
                if record.redirect_to:
                    span.set_attribute(c.ATTR_DISPATCH_REDIRECT_TO, record.redirect_to)
                span.set_attribute(c.ATTR_DISPATCH_GUARD, record.guard.value)
                span.set_attribute(c.ATTR_DISPATCH_ADOPTER_OVERRIDE, record.adopter_override)
                span.set_attribute(c.ATTR_DISPATCH_PALETTE_GATE, record.palette.value)
                span.set_attribute(c.ATTR_DISPATCH_FINAL_TOOL, record.final.name)
                span.set_attribute(c.ATTR_DISPATCH_ARGS_TRANSFORMED, record.args_transformed)
                span.set_attribute(c.ATTR_SEAM_WINNER_SOURCE, record.source.value)
                if self.config.capture_content:
                    span.set_attribute(c.ATTR_DISPATCH_ARGS, self._content(dict(record.final.args)))
            self._finish(handle)
        except Exception as exc:
            self._failed("end_dispatch", exc)

    # -- offload gate ----------------------------------------------------------

    def start_offload_gate(self, inputs: OffloadGateInputs, call: GateCall | None) -> Any:
        try:
            attrs: dict[str, Any] = {
                c.ATTR_GEN_AI_REQUEST_MODEL: inputs.model_name,
                c.ATTR_OFFLOAD_OUTPUT_TOKENS: float(inputs.output_tokens),
            }
            if call is not None:
                self._conversation(attrs, call)
                if call.tool_call_id:
                    attrs[c.ATTR_GEN_AI_TOOL_CALL_ID] = call.tool_call_id
                if call.tool_name:
                    attrs[c.ATTR_GEN_AI_TOOL_NAME] = call.tool_name
            return self._start(c.SPAN_OFFLOAD_GATE, attrs)
        except Exception as exc:
            self._failed("start_offload_gate", exc)
            return None

    def end_offload_gate(self, handle: Any, decision: OffloadGateDecision) -> None:
        try:
            inst = self.instruments
            model = self._cap(c.ATTR_GEN_AI_REQUEST_MODEL, decision.model_name)
            inst.offload_decisions.add(
                1,
                {
                    c.ATTR_GEN_AI_REQUEST_MODEL: model,
                    c.ATTR_OFFLOAD_FIRE: flag(decision.fire),
                    c.ATTR_OFFLOAD_REASON_CODE: decision.reason_code.value,
                },
            )
            if decision.fire and decision.net_saving_usd > 0:
                inst.offload_predicted_net_saving.add(
                    decision.net_saving_usd, {c.ATTR_GEN_AI_REQUEST_MODEL: model}
                )
                log_event(
                    "info",
                    c.LOG_OFFLOAD_DECIDED,
                    model=decision.model_name,
                    net_saving_usd=decision.net_saving_usd,
                    reason_code=decision.reason_code.value,
                    offload_id=decision.offload_id,
                )
            if handle is None:
                return
            LAST_GATE_SPAN.set(handle.span.get_span_context())
            if handle.recording:
                handle.span.set_attributes(gate_attributes(decision, self._text))
            self._finish(handle)
        except Exception as exc:
            self._failed("end_offload_gate", exc)


def gate_attributes(decision: OffloadGateDecision, text: Any = str) -> Mapping[str, Any]:
    """The ``seamscope.offload.*`` attributes of a gate decision."""
    attrs: dict[str, Any] = {
        c.ATTR_OFFLOAD_FIRE: decision.fire,
        c.ATTR_OFFLOAD_NET_SAVING_USD: decision.net_saving_usd,
        c.ATTR_OFFLOAD_REPREFILL_SAVING_USD: decision.reprefill_saving_usd,
        c.ATTR_OFFLOAD_STUB_CARRY_COST_USD: decision.stub_carry_cost_usd,
        c.ATTR_OFFLOAD_EXPECTED_RECALL_HOP_COST_USD: decision.expected_recall_hop_cost_usd,
        c.ATTR_OFFLOAD_REASON: text(decision.reason),
        c.ATTR_OFFLOAD_REASON_CODE: decision.reason_code.value,
        c.ATTR_OFFLOAD_OUTPUT_TOKENS: decision.output_tokens,
        c.ATTR_OFFLOAD_HORIZON: decision.horizon,
        c.ATTR_OFFLOAD_RECALL_PROBABILITY: decision.recall_probability,
        c.ATTR_OFFLOAD_PRICING_SOURCE: decision.pricing_source.value,
        c.ATTR_GEN_AI_REQUEST_MODEL: decision.model_name,
    }
    if decision.offload_id:
        attrs[c.ATTR_OFFLOAD_ID] = decision.offload_id
    return attrs


_ = StageOutcomeKind  # re-exported enum used by type checkers in callers
