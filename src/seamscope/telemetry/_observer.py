"""OTelObserver: the decision core's hooks as spans, span events, metrics and logs.

Span tree of one iteration (all INTERNAL)::

    seamscope.iteration
    ├── seamscope.select_tools
    │   └── seamscope.stage            (one per stage, in order)
    ├── seamscope.seam.pre_model       (events: seamscope.policy.evaluated)
    ├── seamscope.seam.post_model
    │   └── seamscope.dispatch         (one per emitted call; events as above)
    └── seamscope.offload_gate
    seamscope.offload.settle           (when an offload settles, linked to its gate span)

Status: a span is ERROR only when the decision it wraps failed itself: a
stage that raised (the pipeline replaced its verdict with a degraded
abstain). Adopter code that raised inside a seam (a match, guard,
args_transform, resolver or callback) was contained and the seam still
decided, so it is a span event carrying ``error.type``, and the span's
status stays unset. Any exception of the loop that crosses an iteration
span (``KeyboardInterrupt`` too) ends it with ``error.type`` and status
ERROR, then goes on unchanged.

What is recorded, and how much (see ``_attributes`` for the bounds):

* Attributes a sampler needs (names, indexes, the emitted tool, the model)
  are set at span start; the rest at the end, in one call, only when the
  span is recording.
* Policy evaluations: one event per matched, error or guard-stopped
  policy (bounded), counts and a bounded name array for the rest.
* Metrics: plain SDK instruments; one duration per decision kind per
  iteration (``select_tools``, ``pre_model``, ``post_model``, each gate
  call), one add per distinct attribute set per decision. Every attribute
  value that can grow (policy, stage, model names) passes the label cap.

Nothing here raises into the loop: every hook catches, logs
``seamscope.telemetry.error`` and carries on, and a span a hook opened is
always ended and its context detached, whatever failed in between (the
span handles and the iteration scope are in ``_spans``). With the
no-op OpenTelemetry API (``NoOpTracerProvider``/``NoOpMeterProvider``, as
``configure()`` passes under ``OTEL_SDK_DISABLED``) span and metric work is
skipped entirely.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.trace import Link, SpanKind

from seamscope import __version__
from seamscope.decisions._messages import message_text
from seamscope.decisions._policy import DispatchContext
from seamscope.decisions.records import (
    ContainedError,
    DispatchRecord,
    GateCall,
    GuardResult,
    LedgerEntry,
    MiddlewareDecision,
    OffloadGateDecision,
    OffloadGateInputs,
    OffloadOutcome,
    PaletteVerdict,
    PolicyEvaluation,
    PolicyResult,
    PostModelResult,
    PreModelResult,
    Seam,
    SelectionResult,
    Settlement,
    SettleTrigger,
    ShadowSettlement,
    StageRecord,
    ToolCall,
)
from seamscope.decisions.selection import SelectionContext, SelectionStage
from seamscope.telemetry import _attributes as a
from seamscope.telemetry import conventions as c
from seamscope.telemetry._accounts import (
    annotate_span,
    record_account,
    record_evidence,
    record_shadow,
)
from seamscope.telemetry._arguments import check_observer_options
from seamscope.telemetry._config import TelemetryConfig
from seamscope.telemetry._instruments import Instruments, LabelCap, flag
from seamscope.telemetry._invocation import Invocation, held, record_error, start
from seamscope.telemetry._logging import log_event, telemetry_error
from seamscope.telemetry._middleware import record_middleware_decision

__all__ = ["OTelObserver"]

_INTERNAL = SpanKind.INTERNAL
# evaluations counted per policy; the others per seam and result only
_PER_POLICY = frozenset({PolicyResult.MATCHED, PolicyResult.ERROR})
_MAX_REMEMBERED_LABELS = 4096


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
        meter_provider: metrics.MeterProvider | None = None,
        config: TelemetryConfig | None = None,
        known_labels: Mapping[str, Iterable[str]] | None = None,
    ) -> None:
        """``known_labels``: configured values per metric attribute key (e.g. the
        policy names under ``seamscope.policy.name``), kept first under the
        label cap (``config.known_labels`` are kept first for every key)."""
        if config is not None and not isinstance(config, TelemetryConfig):
            raise TypeError(
                f"OTelObserver.config must be a TelemetryConfig, got {type(config).__name__}"
            )
        check_observer_options(
            "OTelObserver",
            tracer_provider=tracer_provider,
            meter_provider=meter_provider,
            known_labels=known_labels,
        )
        self.config = config or TelemetryConfig.create()
        provider = tracer_provider or trace.get_tracer_provider()
        self._tracer = provider.get_tracer("seamscope", __version__)
        self._spans_off = isinstance(self._tracer, trace.NoOpTracer)
        self.instruments = Instruments(meter_provider)
        self._metrics_on = self.instruments.enabled
        self._durations_on = self.config.decision_duration_metric
        cfg = self.config
        self._cap = LabelCap(
            cfg.metric_label_cap, cfg.known_labels, known_labels, self.instruments.labels
        )
        self._labels: dict[tuple[str, str], str] = {}
        self._limits = a.Limits(
            cfg.max_attribute_length, cfg.max_array_length, cfg.capture_content, cfg.mask
        )

    # -- the protocol's loop-level part --------------------------------------------

    @property
    def capture_content(self) -> bool:
        return self.config.capture_content

    def iteration(
        self, index: int, *, conversation_id: str | None, agent_name: str | None
    ) -> contextlib.AbstractContextManager[object]:
        """A ``seamscope.iteration`` span around one ReAct iteration, started now
        under the current context (an :class:`Invocation`, an owner: the
        decision spans opened inside it end with its failure). The loop's
        exceptions cross it unchanged."""
        if self._spans_off:
            return held(contextlib.nullcontext())
        return self._open(
            "iteration",
            c.SPAN_ITERATION,
            {c.ATTR_ITERATION_INDEX: index},
            conversation_id,
            agent_name,
            owner=True,
        )

    def capture(self, target: object, key: str, value: object) -> None:
        """Set a content attribute (``seamscope.content.*``) on ``target`` (a span
        or a handle of this observer) when content capture is on; the value
        passes through the mask and the length limit."""
        if not self.config.capture_content:
            return
        try:
            span = target.span if isinstance(target, Invocation) else target
            if isinstance(span, trace.Span) and span.is_recording():
                span.set_attribute(key, self._limits.content(value))
        except Exception as exc:
            telemetry_error("capture", exc)

    # -- helpers -------------------------------------------------------------------

    def _open(
        self,
        hook: str,
        name: str,
        attributes: dict[str, Any],
        conversation: str | None,
        agent: str | None,
        *,
        owner: bool = False,
    ) -> Invocation:
        text = self._limits.text
        if conversation:
            attributes[c.ATTR_GEN_AI_CONVERSATION_ID] = text(conversation)
        if agent:
            attributes[c.ATTR_GEN_AI_AGENT_NAME] = text(agent)
        return start(self._tracer, name, attributes, owner=owner, join=not owner, hook=hook)

    def _start(
        self, hook: str, name: str, attributes: dict[str, Any], ctx: object
    ) -> Invocation | None:
        """A decision span, current until its end hook (its stages nest in it)."""
        if self._spans_off:
            return None
        try:
            invocation = self._open(
                hook,
                name,
                attributes,
                getattr(ctx, "conversation_id", None),
                getattr(ctx, "agent_name", None),
            )
            invocation.attach()
            return invocation
        except Exception as exc:
            telemetry_error(hook, exc)
            return None

    def _measure(self, hook: str, record: Callable[[], None]) -> None:
        """Run ``record()`` (metric measurements) when metrics are on; its
        failure is logged and costs nothing else."""
        if not self._metrics_on:
            return
        try:
            record()
        except Exception as exc:
            telemetry_error(hook, exc)

    def _note(self, hook: str, log: Callable[[], object]) -> object:
        """Run ``log()`` (log events); its failure is logged and costs nothing else."""
        try:
            return log()
        except Exception as exc:
            telemetry_error(hook, exc)
            return None

    def _label(self, key: str, value: str | None) -> str:
        """The metric attribute value for ``value`` under ``key``: cut, then capped.
        Remembered (for the first 4096 pairs), so a policy evaluated every
        iteration is labelled once."""
        if value is None:
            return "none"
        pair = (key, value)
        label = self._labels.get(pair)
        if label is None:
            label = self._cap(key, self._limits.text(value))
            if len(self._labels) < _MAX_REMEMBERED_LABELS:
                self._labels[pair] = label
        return label

    def _add(self, instrument: metrics.Counter, amount: float, attrs: dict[str, str]) -> None:
        instrument.add(amount, attrs)

    def _duration(self, kind: c.DecisionKind, seconds: float) -> None:
        """The opt-in duration histogram (``config.decision_duration_metric``):
        by default the collector's spanmetrics derive it from the spans."""
        if self._durations_on:
            self.instruments.decision_duration.record(seconds, {c.ATTR_DECISION_KIND: kind.value})

    def _count_evaluations(
        self,
        seam: Seam,
        records: Sequence[PreModelResult] | Sequence[DispatchRecord],
    ) -> None:
        """One add per distinct attribute set over a seam decision's records:
        the evaluations recorded in full per (policy, result); the ones that
        did not match or apply per result only (no policy attribute)."""
        counts: dict[tuple[str | None, str], int] = {}
        for record in records:
            passed = record.passed_over
            key: tuple[str | None, str]
            if passed.not_matched:
                key = (None, PolicyResult.NOT_MATCHED.value)
                counts[key] = counts.get(key, 0) + passed.not_matched
            if passed.skipped:
                key = (None, PolicyResult.SKIPPED.value)
                counts[key] = counts.get(key, 0) + passed.skipped
            for ev in record.evaluations:
                result = ev.result
                if result in _PER_POLICY or ev.guard is not GuardResult.NONE:
                    key = (self._label(c.ATTR_POLICY_NAME, ev.policy), result.value)
                else:  # a framework's own evaluations, given one by one
                    key = (None, result.value)
                counts[key] = counts.get(key, 0) + 1
        if not counts:
            return
        counter = self.instruments.policy_evaluations
        seam_value = seam.value
        for (policy, outcome), n in counts.items():
            attrs = {c.ATTR_SEAM: seam_value, c.ATTR_POLICY_RESULT: outcome}
            if policy is not None:
                attrs[c.ATTR_POLICY_NAME] = policy
            self._add(counter, n, attrs)

    def _count_win(self, seam: Seam, source: str, policy: str | None) -> None:
        self._add(
            self.instruments.policy_wins,
            1,
            {
                c.ATTR_SEAM: seam.value,
                c.ATTR_SEAM_WINNER_SOURCE: source,
                c.ATTR_POLICY_NAME: self._label(c.ATTR_POLICY_NAME, policy),
            },
        )

    def _log_errors(
        self, evaluations: Sequence[PolicyEvaluation], errors: Sequence[ContainedError]
    ) -> None:
        for ev in evaluations:
            if ev.error is not None:
                log_event(
                    "warning",
                    c.LOG_POLICY_ERROR,
                    policy=self._limits.text(ev.policy),
                    seam=ev.seam.value,
                    source=ev.error.source,
                    error_type=ev.error.error_type,
                )
        for error in a.adopter_errors(errors):
            log_event(
                "warning",
                c.LOG_ADOPTER_ERROR,
                source=error.source,
                policy=error.policy,
                error_type=error.error_type,
            )

    def _error_events(self, errors: Sequence[ContainedError]) -> list[a.Event]:
        return [a.adopter_error_event(e, self._limits) for e in a.adopter_errors(errors)]

    # -- selection -------------------------------------------------------------------

    def start_selection(self, ctx: SelectionContext, offered: tuple[str, ...]) -> object:
        return self._start(
            "start_selection", c.SPAN_SELECT_TOOLS, {c.ATTR_ITERATION_INDEX: ctx.iteration}, ctx
        )

    def end_selection(self, handle: object, result: SelectionResult) -> None:
        def record() -> None:
            self._duration(c.DecisionKind.SELECT_TOOLS, result.duration_s)
            tools = self.instruments.selection_tools
            offered = {c.ATTR_SELECTION_SET: c.SelectionSet.OFFERED.value}
            self._add(tools, len(result.offered), offered)
            selected = {c.ATTR_SELECTION_SET: c.SelectionSet.SELECTED.value}
            self._add(tools, len(result.tools), selected)

        self._measure("end_selection", record)
        _close("end_selection", handle, lambda: (a.selection_attributes(result, self._limits), ()))

    def start_stage(self, ctx: SelectionContext, index: int, stage: SelectionStage) -> object:
        try:
            attrs: dict[str, Any] = {
                c.ATTR_STAGE_NAME: self._limits.text(stage.name),
                c.ATTR_STAGE_INDEX: index,
                c.ATTR_STAGE_PROTECTS_FORCED: bool(stage.protects_forced),
            }
        except Exception as exc:
            telemetry_error("start_stage", exc)
            attrs = {c.ATTR_STAGE_INDEX: index}
        return self._start("start_stage", c.SPAN_STAGE, attrs, ctx)

    def end_stage(self, handle: object, record: StageRecord) -> None:
        def measure() -> None:
            self._add(
                self.instruments.stage_outcomes,
                1,
                {
                    c.ATTR_STAGE_NAME: self._label(c.ATTR_STAGE_NAME, record.name),
                    c.ATTR_STAGE_OUTCOME: record.outcome.value,
                    c.ATTR_STAGE_DEGRADED: flag(record.degraded),
                },
            )

        def log() -> None:
            text = self._limits.text
            if record.degraded:
                fields: dict[str, Any] = {"stage": text(record.name), "reason": text(record.reason)}
                if record.error is not None:
                    fields["error_type"] = record.error.error_type
                log_event("warning", c.LOG_STAGE_DEGRADED, **fields)
            if record.rejected:
                log_event(
                    "warning",
                    c.LOG_STAGE_REJECTED,
                    stage=text(record.name),
                    rejected=self._limits.names(record.rejected),
                )

        def build() -> tuple[a.Attributes, Sequence[a.Event]]:
            if record.error is not None and isinstance(handle, Invocation):
                record_error(handle.span, record.error.error_type)
            return a.stage_attributes(record, self._limits), ()

        self._measure("end_stage", measure)
        self._note("end_stage", log)
        _close("end_stage", handle, build)

    # -- seams -------------------------------------------------------------------------

    def start_pre_model(self, ctx: DispatchContext) -> object:
        attrs: dict[str, Any] = {c.ATTR_SEAM: Seam.PRE_MODEL.value}
        try:
            attrs[c.ATTR_ITERATION_INDEX] = ctx.iteration
            if self.config.capture_content and ctx.messages:
                attrs[c.ATTR_MESSAGE_CONTENT] = self._limits.content(message_text(ctx.messages[-1]))
        except Exception as exc:
            telemetry_error("start_pre_model", exc)
        return self._start("start_pre_model", c.SPAN_SEAM_PRE_MODEL, attrs, ctx)

    def end_pre_model(self, handle: object, result: PreModelResult) -> None:
        def measure() -> None:
            self._count_evaluations(Seam.PRE_MODEL, (result,))
            self._count_win(Seam.PRE_MODEL, result.source.value, result.policy)
            self._duration(c.DecisionKind.PRE_MODEL, result.duration_s)

        def build() -> tuple[a.Attributes, Sequence[a.Event]]:
            attrs, events = a.policy_summary(result.evaluations, self._limits, result.passed_over)
            attrs.update(a.pre_model_attributes(result, self._limits))
            return attrs, events + self._error_events(result.errors)

        self._measure("end_pre_model", measure)
        self._note("end_pre_model", lambda: self._log_errors(result.evaluations, result.errors))
        _close("end_pre_model", handle, build)

    def start_post_model(self, ctx: DispatchContext, calls: tuple[ToolCall, ...]) -> object:
        attrs: dict[str, Any] = {c.ATTR_SEAM: Seam.POST_MODEL.value}
        try:
            attrs[c.ATTR_ITERATION_INDEX] = ctx.iteration
            attrs[c.ATTR_SEAM_TOOL_CALLS] = len(calls)
        except Exception as exc:
            telemetry_error("start_post_model", exc)
        return self._start("start_post_model", c.SPAN_SEAM_POST_MODEL, attrs, ctx)

    def end_post_model(self, handle: object, result: PostModelResult) -> None:
        """The seam's metrics for all its calls at once (one add per distinct
        attribute set), its span's rewritten count."""

        def measure() -> None:
            records = result.records
            self._count_evaluations(Seam.POST_MODEL, records)
            wins: dict[tuple[str, str], int] = {}
            redirects: dict[tuple[str, str], int] = {}
            for record in records:
                policy = self._label(c.ATTR_POLICY_NAME, record.policy)
                key = (record.source.value, policy)
                wins[key] = wins.get(key, 0) + 1
                if record.policy is not None or record.adopter_override:
                    key = (policy, record.palette.value)
                    redirects[key] = redirects.get(key, 0) + 1
            for (source, policy), n in wins.items():
                self._add(
                    self.instruments.policy_wins,
                    n,
                    {
                        c.ATTR_SEAM: Seam.POST_MODEL.value,
                        c.ATTR_SEAM_WINNER_SOURCE: source,
                        c.ATTR_POLICY_NAME: policy,
                    },
                )
            for (policy, palette), n in redirects.items():
                self._add(
                    self.instruments.redirects,
                    n,
                    {c.ATTR_POLICY_NAME: policy, c.ATTR_DISPATCH_PALETTE_GATE: palette},
                )
            self._duration(c.DecisionKind.POST_MODEL, result.duration_s)

        self._measure("end_post_model", measure)
        _close("end_post_model", handle, lambda: ({c.ATTR_SEAM_REWRITTEN: result.rewritten}, ()))

    def start_dispatch(self, ctx: DispatchContext, index: int, call: ToolCall) -> object:
        text = self._limits.text
        try:
            attrs: dict[str, str | bool] = {
                c.ATTR_GEN_AI_TOOL_CALL_ID: self._typed("start_dispatch", "id", call.id),
                c.ATTR_DISPATCH_EMITTED_TOOL: text(
                    self._typed("start_dispatch", "name", call.name)
                ),
            }
            offered = ctx.resolved_tool_names
            if offered and call.name not in offered:
                # called though never offered this iteration: it still runs
                attrs[c.ATTR_DISPATCH_OFFERED] = False
        except Exception as exc:
            telemetry_error("start_dispatch", exc)
            attrs = {}
        return self._start("start_dispatch", c.SPAN_DISPATCH, attrs, ctx)

    def _typed(self, hook: str, field: str, value: object) -> str:
        """A string-typed field that arrived with another type: its ``str()``,
        logged as a telemetry error; a string is cut to the length limit."""
        if type(value) is not str:
            log_event(
                "error",
                c.LOG_TELEMETRY_ERROR,
                hook=hook,
                error_type="TypeError",
                field=field,
                value_type=type(value).__qualname__,
            )
        return self._limits.text(value)

    def end_dispatch(self, handle: object, record: DispatchRecord) -> None:
        """The dispatch span and its logs (its metrics are counted with the
        POST seam's, in :meth:`end_post_model`)."""

        def log() -> None:
            self._log_errors(record.evaluations, record.errors)
            if record.palette is PaletteVerdict.DROPPED:
                text = self._limits.text
                target = None if record.adopter_override else record.redirect_to
                log_event(
                    "warning",
                    c.LOG_PALETTE_GATE_DROP,
                    policy=record.policy,
                    emitted_tool=text(record.emitted.name),
                    target=text(target or "(adopter override)"),
                    tool_call_id=text(record.emitted.id),
                )

        def build() -> tuple[a.Attributes, Sequence[a.Event]]:
            attrs, events = a.policy_summary(record.evaluations, self._limits, record.passed_over)
            attrs.update(a.dispatch_attributes(record, self._limits))
            return attrs, events + self._error_events(record.errors)

        self._note("end_dispatch", log)
        _close("end_dispatch", handle, build)

    # -- offload gate ----------------------------------------------------------------

    def start_offload_gate(self, inputs: OffloadGateInputs, call: GateCall | None) -> object:
        if self._spans_off:
            return None
        try:
            text = self._limits.text
            attrs: dict[str, Any] = {
                c.ATTR_GEN_AI_REQUEST_MODEL: text(inputs.model_name),
                c.ATTR_OFFLOAD_OUTPUT_TOKENS: float(inputs.output_tokens),
            }
            if call is not None:
                if call.tool_call_id is not None:  # an empty id too, as the dispatch records it
                    attrs[c.ATTR_GEN_AI_TOOL_CALL_ID] = text(call.tool_call_id)
                if call.tool_name:
                    attrs[c.ATTR_GEN_AI_TOOL_NAME] = text(call.tool_name)
                if call.mechanism is not None:  # a framework's offload, not the gate's own
                    attrs[c.ATTR_OFFLOAD_MECHANISM] = call.mechanism.value
            invocation = self._open(
                "start_offload_gate",
                c.SPAN_OFFLOAD_GATE,
                attrs,
                None if call is None else call.conversation_id,
                None if call is None else call.agent_name,
            )
            invocation.attach()
            invocation.start = time.perf_counter()
            return _Gate(invocation, bool(call is not None and call.reevaluation))
        except Exception as exc:
            telemetry_error("start_offload_gate", exc)
            return None

    def end_offload_gate(self, handle: object, decision: OffloadGateDecision) -> object:
        """Record the decision; the link returned is the gate span's context."""
        gate = handle if isinstance(handle, _Gate) else None
        first = gate is None or not gate.repeat
        predicted = first and decision.fire and decision.net_saving_usd > 0

        def measure() -> None:
            model = self._label(c.ATTR_GEN_AI_REQUEST_MODEL, decision.model_name)
            self._add(
                self.instruments.offload_decisions,
                1,
                {
                    c.ATTR_GEN_AI_REQUEST_MODEL: model,
                    c.ATTR_OFFLOAD_FIRE: flag(decision.fire),
                    c.ATTR_OFFLOAD_REASON_CODE: decision.reason_code.value,
                },
            )
            shadow = decision.shadow
            if shadow is not None and shadow.fire != decision.fire:
                tool = self._label(c.ATTR_GEN_AI_TOOL_NAME, shadow.tool_name)
                self._add(
                    self.instruments.offload_shadow_disagreements,
                    1,
                    {c.ATTR_GEN_AI_REQUEST_MODEL: model, c.ATTR_GEN_AI_TOOL_NAME: tool},
                )
            if predicted:
                self._add(
                    self.instruments.offload_predicted_net_saving,
                    decision.net_saving_usd,
                    {c.ATTR_GEN_AI_REQUEST_MODEL: model},
                )
            if gate is not None:
                elapsed = time.perf_counter() - gate.invocation.start
                self._duration(c.DecisionKind.OFFLOAD_GATE, elapsed)

        def log() -> None:
            if predicted:
                log_event(
                    "info",
                    c.LOG_OFFLOAD_DECIDED,
                    model=self._limits.text(decision.model_name),
                    net_saving_usd=decision.net_saving_usd,
                    reason_code=decision.reason_code.value,
                    offload_id=decision.offload_id,
                )

        self._measure("end_offload_gate", measure)
        self._note("end_offload_gate", log)
        link = None
        if gate is not None:
            link = self._note("end_offload_gate", gate.invocation.span.get_span_context)
        _close(
            "end_offload_gate",
            None if gate is None else gate.invocation,
            lambda: (a.gate_attributes(decision, self._limits), ()),
        )
        return link

    # -- a framework's own middlewares -------------------------------------------------

    def on_middleware_decision(self, decision: MiddlewareDecision) -> object:
        """A framework middleware's decision: a span of the family its kind belongs
        to (see :mod:`._middleware`), a metric and a log event. Returns the
        span's context (a compaction's settlement links to it)."""
        try:
            return record_middleware_decision(
                decision,
                tracer=None if self._spans_off else self._tracer,
                limits=self._limits,
                count=(
                    None
                    if not self._metrics_on
                    else lambda attrs: self._add(
                        self.instruments.middleware_decisions,
                        1,
                        {k: self._label(k, v) for k, v in attrs.items()},
                    )
                ),
                spend=(
                    None
                    if not self._metrics_on
                    else lambda amount, attrs: self._add(
                        self.instruments.middleware_cost,
                        amount,
                        {k: self._label(k, v) for k, v in attrs.items()},
                    )
                ),
            )
        except Exception as exc:
            telemetry_error("on_middleware_decision", exc)
            return None

    # -- the ledger ----------------------------------------------------------------

    def on_offload_accounted(self, entry: LedgerEntry) -> None:
        """The realized metrics, and what whatif re-settles from on the current span."""
        try:
            if not self._spans_off:
                annotate_span(entry, trace.get_current_span(), self._limits)
            if self._metrics_on:
                record_account(
                    entry, instruments=self.instruments, add=self._add, label=self._label
                )
        except Exception as exc:
            telemetry_error("on_offload_accounted", exc)

    def on_offload_settled(self, settlement: Settlement) -> None:
        """A ``seamscope.offload.settle`` span linked to the gate span, a metric
        and a log event. A settlement forced by another conversation's
        activity (idle, evicted) starts its own trace rather than joining
        whatever span is current."""
        s = settlement
        try:
            outcome = s.outcome.value
            if self._metrics_on:
                self._add(
                    self.instruments.offload_settled,
                    1,
                    {
                        c.ATTR_GEN_AI_REQUEST_MODEL: self._label(
                            c.ATTR_GEN_AI_REQUEST_MODEL, s.model
                        ),
                        c.ATTR_OFFLOAD_OUTCOME: outcome,
                        c.ATTR_OFFLOAD_MECHANISM: s.mechanism.value,
                    },
                )
                record_evidence(s, instruments=self.instruments, add=self._add, label=self._label)
            if not self._spans_off:
                link = s.link
                links = (
                    [Link(link)] if isinstance(link, trace.SpanContext) and link.is_valid else []
                )
                parent = (
                    otel_context.Context()
                    if s.trigger in (SettleTrigger.IDLE, SettleTrigger.EVICTED)
                    else None
                )
                span = self._tracer.start_span(
                    c.SPAN_OFFLOAD_SETTLE,
                    context=parent,
                    kind=_INTERNAL,
                    attributes=a.settlement_attributes(s, self._limits),
                    links=links,
                )
                span.add_event(c.EVENT_OFFLOAD_SETTLED, {c.ATTR_OFFLOAD_OUTCOME: outcome})
                span.end()
            log_event(
                "warning" if s.outcome is OffloadOutcome.LOSS else "info",
                c.LOG_OFFLOAD_SETTLED,
                offload_id=self._limits.text(s.offload_id),
                model=self._limits.text(s.model),
                outcome=outcome,
                trigger=s.trigger.value,
                mechanism=s.mechanism.value,
                predicted_net_saving_usd=float(s.predicted_net_saving),
                realized_net_saving_usd=float(s.realized_net_saving),
                turns_carried=s.turns_carried,
                recalls=s.recalls,
            )
        except Exception as exc:
            telemetry_error("on_offload_settled", exc)

    def on_store_failed(self, operation: str, error_type: str) -> None:
        """A counted store error (``seamscope.offload.store_errors``) and a WARNING
        log event; never raises."""
        try:
            if self._metrics_on:
                self._add(
                    self.instruments.offload_store_errors,
                    1,
                    {
                        c.ATTR_OFFLOAD_STORE_OPERATION: self._label(
                            c.ATTR_OFFLOAD_STORE_OPERATION, operation
                        ),
                        c.ATTR_ERROR_TYPE: self._label(c.ATTR_ERROR_TYPE, error_type),
                    },
                )
            log_event(
                "warning",
                c.LOG_OFFLOAD_STORE_FAILED,
                **{c.ATTR_OFFLOAD_STORE_OPERATION: operation, c.ATTR_ERROR_TYPE: error_type},
            )
        except Exception as exc:
            telemetry_error("on_store_failed", exc)

    def on_shadow_settled(self, settlement: ShadowSettlement) -> None:
        """The shadow configuration's savings and costs on a settled conversation,
        and a ``seamscope.offload.shadow_settle`` span placed as the conversation's
        live settle spans are: under the current span, or in a trace of its own
        when another conversation's activity (idle, evicted) settled it; linked
        to the gate spans of the offloads that fire either way."""
        s = settlement
        try:
            if self._metrics_on:
                record_shadow(s, instruments=self.instruments, add=self._add, label=self._label)
            if not self._spans_off:
                links = [
                    Link(x.link)
                    for x in s.settlements
                    if isinstance(x.link, trace.SpanContext) and x.link.is_valid
                ]
                parent = (
                    otel_context.Context()
                    if s.trigger in (SettleTrigger.IDLE, SettleTrigger.EVICTED)
                    else None
                )
                self._tracer.start_span(
                    c.SPAN_OFFLOAD_SHADOW_SETTLE,
                    context=parent,
                    kind=_INTERNAL,
                    attributes=a.shadow_settlement_attributes(s, self._limits),
                    links=links,
                ).end()
        except Exception as exc:
            telemetry_error("on_shadow_settled", exc)


class _Gate(NamedTuple):
    """An offload gate's open span and whether it re-decides an output already decided."""

    invocation: Invocation
    repeat: bool

    @property
    def span(self) -> trace.Span:
        """The gate's span (as every decision handle gives it)."""
        return self.invocation.span


def _close(
    hook: str,
    handle: object,
    build: Callable[[], tuple[a.Attributes, Sequence[a.Event]]],
) -> None:
    """Set the end attributes and events ``build()`` gives on an open decision
    span (built only when it records), then end it."""
    if not isinstance(handle, Invocation):
        return
    try:
        if handle.recording:
            attributes, events = build()
            span = handle.span
            span.set_attributes(attributes)
            for name, attrs in events:
                span.add_event(name, attrs)
    except Exception as exc:
        telemetry_error(hook, exc)
    handle.end(None, hook=hook)
