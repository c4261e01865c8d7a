"""Pure functions from decision records to span attributes and events.

Nothing here touches a span, a meter or a logger: each function takes a
record and the :class:`Limits` and returns plain attribute mappings, so the
observer stays a thin shell and every mapping is testable on its own.

Bounds: every string is cut to ``max_length`` characters (the last one
becomes ``…``), every string array keeps ``max_items`` items, and the count
attributes say how many there really were. Policy evaluations are folded:
the matched, error and guard-stopped ones become events (at most
``max_items`` per span; ``seamscope.policy.events_folded`` counts the rest),
the not-matched and skipped ones become two counts and one bounded array of
names.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from seamscope.decisions.records import (
    ContainedError,
    DispatchRecord,
    GuardResult,
    OffloadGateDecision,
    PassedOver,
    PolicyEvaluation,
    PolicyResult,
    PreModelResult,
    SelectionResult,
    Settlement,
    ShadowSettlement,
    StageRecord,
)
from seamscope.telemetry import conventions as c

__all__ = [
    "Limits",
    "adopter_error_event",
    "adopter_errors",
    "dispatch_attributes",
    "gate_attributes",
    "policy_summary",
    "pre_model_attributes",
    "selection_attributes",
    "settlement_attributes",
    "stage_attributes",
]

Attributes = dict[str, Any]
Event = tuple[str, Attributes]

_MAX_CLEANED = 256  # distinct name tuples whose cleaned form Limits.names remembers

# evaluations recorded as events; the others are folded into counts
_EVENT_RESULTS = frozenset({PolicyResult.MATCHED, PolicyResult.ERROR})


@dataclass(frozen=True, slots=True)
class Limits:
    """How much one attribute may hold (from :class:`TelemetryConfig`)."""

    max_length: int = 1024
    max_items: int = 128
    capture: bool = False
    mask: Callable[[str], str] = str

    def text(self, value: object) -> str:
        """``value`` as a string of at most ``max_length`` characters."""
        text = value if type(value) is str else _as_str(value)
        return text if len(text) <= self.max_length else text[: self.max_length - 1] + "…"

    _cleaned: dict[tuple[object, ...], tuple[str, ...]] = field(
        default_factory=dict, compare=False, repr=False
    )

    def names(self, names: Sequence[object]) -> list[str]:
        """At most ``max_items`` names, each cut to ``max_length``.

        A tuple of names is cleaned once: the result is remembered by the
        tuple's value (the offered tools, a stage's dropped tools and the
        passed-over policies repeat from one iteration to the next), for the
        last :data:`_MAX_CLEANED` distinct tuples at most."""
        if type(names) is not tuple:
            return [self.text(n) for n in names[: self.max_items]]
        memo = self._cleaned
        try:
            hit = memo.get(names)
        except TypeError:  # an unhashable name: clean it every time
            return [self.text(n) for n in names[: self.max_items]]
        if hit is None:
            hit = tuple([self.text(n) for n in names[: self.max_items]])
            if len(memo) >= _MAX_CLEANED:
                memo.clear()
            memo[names] = hit
        return list(hit)

    def content(self, value: object) -> str:
        """Content (only called when capture is on): JSON for non-strings,
        through the mask, then cut."""
        if not isinstance(value, str):
            try:
                value = json.dumps(value, default=str, sort_keys=True)
            except Exception:
                value = repr(value)
        return self.text(self.mask(value))


def _as_str(value: object) -> str:
    try:
        return str(value)
    except Exception:
        return "?"


def selection_attributes(result: SelectionResult, limits: Limits) -> Attributes:
    selected = result.selected
    chosen = set(selected)
    dropped = tuple([n for n in result.offered if n not in chosen])
    attrs: Attributes = {
        c.ATTR_SELECTION_OFFERED: limits.names(result.offered),
        c.ATTR_SELECTION_SELECTED: limits.names(selected),
        c.ATTR_SELECTION_DROPPED: limits.names(dropped),
        c.ATTR_SELECTION_OFFERED_COUNT: len(result.offered),
        c.ATTR_SELECTION_SELECTED_COUNT: len(selected),
        c.ATTR_SELECTION_DROPPED_COUNT: len(dropped),
        c.ATTR_SELECTION_REINSTATED: result.reinstated,
    }
    if result.forced_tool:
        attrs[c.ATTR_SELECTION_FORCED_TOOL] = limits.text(result.forced_tool)
    if result.reused:
        attrs[c.ATTR_SELECTION_REUSED] = True
    return attrs


def stage_attributes(record: StageRecord, limits: Limits) -> Attributes:
    attrs: Attributes = {
        c.ATTR_STAGE_OUTCOME: record.outcome.value,
        c.ATTR_STAGE_REASON: limits.text(record.reason),
        c.ATTR_STAGE_DEGRADED: record.degraded,
        c.ATTR_STAGE_DROPPED: limits.names(record.dropped),
        c.ATTR_STAGE_DROPPED_COUNT: len(record.dropped),
        c.ATTR_STAGE_FORCED_REINSTATED: record.forced_reinstated,
    }
    if record.rejected:
        attrs[c.ATTR_STAGE_REJECTED] = limits.names(record.rejected)
    if record.error is not None:
        attrs[c.ATTR_ERROR_TYPE] = limits.text(record.error.error_type)
    return attrs


def _evaluation_event(evaluation: PolicyEvaluation, limits: Limits) -> Event:
    attrs: Attributes = {
        c.ATTR_POLICY_NAME: limits.text(evaluation.policy),
        c.ATTR_SEAM: evaluation.seam.value,
        c.ATTR_POLICY_RESULT: evaluation.result.value,
    }
    guard = evaluation.guard
    if guard is not GuardResult.NONE:
        attrs[c.ATTR_DISPATCH_GUARD] = guard.value
    error = evaluation.error
    if error is not None:
        attrs[c.ATTR_ERROR_TYPE] = limits.text(error.error_type)
        if limits.capture:
            attrs[c.ATTR_ERROR_MESSAGE] = limits.content(error.message)
    return c.EVENT_POLICY_EVALUATED, attrs


def policy_summary(
    evaluations: Sequence[PolicyEvaluation],
    limits: Limits,
    passed_over: PassedOver | None = None,
) -> tuple[Attributes, list[Event]]:
    """The folded record of a seam's policy evaluations: count attributes and
    the bounded passed-over names, plus one event per matched, error or
    guard-stopped evaluation (at most ``max_items``).

    ``evaluations`` are the ones recorded in full; ``passed_over`` counts and
    names the rest (a record built by a router). Evaluations that did not
    match given one by one (a framework's own policies) are folded the same
    way."""
    events: list[Event] = []
    given: list[str] = []
    not_matched = skipped = folded = 0
    for ev in evaluations:
        result = ev.result
        if result in _EVENT_RESULTS or ev.guard is not GuardResult.NONE:
            if len(events) < limits.max_items:
                events.append(_evaluation_event(ev, limits))
            else:
                folded += 1
            continue
        if result is PolicyResult.NOT_MATCHED:
            not_matched += 1
        else:
            skipped += 1
        given.append(ev.policy)
    counted = 0
    if passed_over is not None and passed_over.count:
        not_matched += passed_over.not_matched
        skipped += passed_over.skipped
        counted = passed_over.count
        if given:
            cleaned = limits.names(tuple(given + list(passed_over.names(limits.max_items))))
        else:
            cleaned = limits.names(passed_over.names(limits.max_items))
    else:
        cleaned = limits.names(given) if given else []
    attrs: Attributes = {
        c.ATTR_POLICY_EVALUATED_COUNT: len(evaluations) + counted,
        c.ATTR_POLICY_NOT_MATCHED_COUNT: not_matched,
        c.ATTR_POLICY_SKIPPED_COUNT: skipped,
    }
    if cleaned:
        attrs[c.ATTR_POLICY_PASSED_OVER] = cleaned
    if folded:
        attrs[c.ATTR_POLICY_EVENTS_FOLDED] = folded
    return attrs, events


def adopter_error_event(error: ContainedError, limits: Limits) -> Event:
    attrs: Attributes = {
        c.ATTR_ADOPTER_SOURCE: error.source,
        c.ATTR_ERROR_TYPE: limits.text(error.error_type),
    }
    if error.policy:
        attrs[c.ATTR_POLICY_NAME] = limits.text(error.policy)
    if limits.capture:
        attrs[c.ATTR_ERROR_MESSAGE] = limits.content(error.message)
    return c.EVENT_ADOPTER_ERROR, attrs


def adopter_errors(errors: Sequence[ContainedError]) -> list[ContainedError]:
    """The contained errors that are not reported with their policy evaluation."""
    return [e for e in errors if e.source not in ("match", "guard")]


def pre_model_attributes(result: PreModelResult, limits: Limits) -> Attributes:
    attrs: Attributes = {
        c.ATTR_SEAM_WINNER_SOURCE: result.source.value,
        c.ATTR_GEN_AI_REQUEST_MODEL: limits.text(result.model.model_name),
    }
    if result.policy:
        attrs[c.ATTR_POLICY_WINNER] = limits.text(result.policy)
    return attrs


def dispatch_attributes(record: DispatchRecord, limits: Limits) -> Attributes:
    attrs: Attributes = {
        c.ATTR_DISPATCH_GUARD: record.guard.value,
        c.ATTR_DISPATCH_ADOPTER_OVERRIDE: record.adopter_override,
        c.ATTR_DISPATCH_PALETTE_GATE: record.palette.value,
        c.ATTR_DISPATCH_ARGS_TRANSFORMED: record.args_transformed,
        c.ATTR_SEAM_WINNER_SOURCE: record.source.value,
    }
    if record.refused:  # the framework refused the call: no tool ran
        attrs[c.ATTR_DISPATCH_REFUSED] = True
    else:
        attrs[c.ATTR_DISPATCH_FINAL_TOOL] = limits.text(record.final.name)
    if record.policy:
        attrs[c.ATTR_POLICY_WINNER] = limits.text(record.policy)
    if record.redirect_to:
        attrs[c.ATTR_DISPATCH_REDIRECT_TO] = limits.text(record.redirect_to)
    if record.structured_output:
        attrs[c.ATTR_DISPATCH_STRUCTURED_OUTPUT] = True
    if limits.capture:
        attrs[c.ATTR_DISPATCH_ARGS] = limits.content(_args(record.final.args))
    return attrs


def _args(args: object) -> object:
    return dict(args) if isinstance(args, Mapping) else args


def gate_attributes(decision: OffloadGateDecision, limits: Limits) -> Attributes:
    """The ``seamscope.offload.*`` attributes of a gate decision."""
    attrs: Attributes = {
        c.ATTR_OFFLOAD_FIRE: decision.fire,
        c.ATTR_OFFLOAD_NET_SAVING_USD: decision.net_saving_usd,
        c.ATTR_OFFLOAD_REPREFILL_SAVING_USD: decision.reprefill_saving_usd,
        c.ATTR_OFFLOAD_STUB_CARRY_COST_USD: decision.stub_carry_cost_usd,
        c.ATTR_OFFLOAD_EXPECTED_RECALL_HOP_COST_USD: decision.expected_recall_hop_cost_usd,
        c.ATTR_OFFLOAD_REASON: limits.text(decision.reason),
        c.ATTR_OFFLOAD_REASON_CODE: decision.reason_code.value,
        c.ATTR_OFFLOAD_OUTPUT_TOKENS: decision.output_tokens,
        c.ATTR_OFFLOAD_HORIZON: decision.horizon,
        c.ATTR_OFFLOAD_RECALL_PROBABILITY: decision.recall_probability,
        c.ATTR_OFFLOAD_PRICING_SOURCE: decision.pricing_source.value,
        c.ATTR_GEN_AI_REQUEST_MODEL: limits.text(decision.model_name),
    }
    if decision.offload_id:
        attrs[c.ATTR_OFFLOAD_ID] = limits.text(decision.offload_id)
    attrs[c.ATTR_OFFLOAD_STUB_TOKENS] = decision.stub_tokens
    attrs[c.ATTR_OFFLOAD_THRESHOLD_TOKENS] = decision.threshold_tokens
    attrs[c.ATTR_OFFLOAD_RECALL_INPUT_TOKENS] = decision.recall_input_tokens
    attrs[c.ATTR_OFFLOAD_RECALL_OUTPUT_TOKENS] = decision.recall_output_tokens
    attrs[c.ATTR_OFFLOAD_PRIOR_SOURCE] = decision.prior_source.value
    if decision.rates is not None:
        attrs.update(_rates(decision.rates))
    if decision.priors_version is not None:
        attrs[c.ATTR_OFFLOAD_PRIORS_VERSION] = limits.text(decision.priors_version)
    shadow = decision.shadow
    if shadow is not None:
        attrs[c.ATTR_OFFLOAD_SHADOW_FIRE] = shadow.fire
        attrs[c.ATTR_OFFLOAD_SHADOW_NET_SAVING_USD] = shadow.net_saving_usd
        attrs[c.ATTR_OFFLOAD_SHADOW_REASON_CODE] = shadow.reason_code.value
    return attrs


_RATE_KEYS = (
    c.ATTR_OFFLOAD_INPUT_USD_PER_MTOK,
    c.ATTR_OFFLOAD_OUTPUT_USD_PER_MTOK,
    c.ATTR_OFFLOAD_CACHE_READ_USD_PER_MTOK,
    c.ATTR_OFFLOAD_CACHE_WRITE_USD_PER_MTOK,
)


def _rates(rates: tuple[Decimal | None, ...]) -> Attributes:
    """The rates a gate or ledger priced a model at (USD per 1M tokens)."""
    return {
        key: float(rate) for key, rate in zip(_RATE_KEYS, rates, strict=True) if rate is not None
    }


def settlement_attributes(s: Settlement, limits: Limits) -> Attributes:
    attrs = _settlement_attributes(s, limits)
    if s.rates is not None:
        attrs.update(_rates(s.rates))
    return attrs


def _settlement_attributes(s: Settlement, limits: Limits) -> Attributes:
    return {
        c.ATTR_OFFLOAD_ID: limits.text(s.offload_id),
        c.ATTR_GEN_AI_CONVERSATION_ID: limits.text(s.conversation_id),
        c.ATTR_GEN_AI_REQUEST_MODEL: limits.text(s.model),
        c.ATTR_OFFLOAD_OUTCOME: s.outcome.value,
        c.ATTR_OFFLOAD_SETTLE_TRIGGER: s.trigger.value,
        c.ATTR_OFFLOAD_NET_SAVING_USD: float(s.predicted_net_saving),
        c.ATTR_OFFLOAD_REALIZED_SAVINGS_USD: float(s.realized_savings),
        c.ATTR_OFFLOAD_REALIZED_COSTS_USD: float(s.realized_costs),
        c.ATTR_OFFLOAD_REALIZED_NET_SAVING_USD: float(s.realized_net_saving),
        c.ATTR_OFFLOAD_CACHE_DELTA_USD: float(s.cache_disruption_cost),
        c.ATTR_OFFLOAD_TURNS_CARRIED: s.turns_carried,
        c.ATTR_OFFLOAD_RECALLS: s.recalls,
        c.ATTR_OFFLOAD_HORIZON: s.horizon,
        c.ATTR_OFFLOAD_RECALL_PROBABILITY: s.recall_probability,
        c.ATTR_OFFLOAD_MECHANISM: s.mechanism.value,
    }


def shadow_settlement_attributes(s: ShadowSettlement, limits: Limits) -> Attributes:
    """A shadow settlement: the live net beside the shadow's exact and expected ones."""
    low, high = s.expected_range
    bases = ([c.ShadowBasis.EXACT.value] if s.settlements else []) + (
        [c.ShadowBasis.EXPECTED.value] if s.offloads else []
    )
    return {
        c.ATTR_GEN_AI_CONVERSATION_ID: limits.text(s.conversation_id),
        c.ATTR_OFFLOAD_SETTLE_TRIGGER: s.trigger.value,
        c.ATTR_OFFLOAD_REALIZED_NET_SAVING_USD: float(s.realized_net_saving),
        c.ATTR_OFFLOAD_SHADOW_EXACT_NET_SAVING_USD: float(s.exact_net_saving),
        c.ATTR_OFFLOAD_SHADOW_EXPECTED_NET_SAVING_USD: float(s.expected_net_saving),
        c.ATTR_OFFLOAD_SHADOW_EXPECTED_LOW_USD: float(low),
        c.ATTR_OFFLOAD_SHADOW_EXPECTED_HIGH_USD: float(high),
        c.ATTR_OFFLOAD_SHADOW_BASIS: bases,
        c.ATTR_OFFLOAD_SHADOW_NO_LONGER_FIRED: limits.names(s.no_longer_fired),
        c.ATTR_OFFLOAD_SHADOW_NEWLY_FIRED: limits.names([o.tool_name or "" for o in s.offloads]),
    }
