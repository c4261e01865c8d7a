"""The offload gate: offload a large tool output only when it saves money.

::

    fire  <=>  reprefill_saving - (stub_carry_cost + expected_recall_hop_cost) > 0

    reprefill_saving         = output_tokens * input_rate * H
    stub_carry_cost          = stub_tokens   * input_rate * H
    expected_recall_hop_cost = p_recall * (recall_input_tokens  * input_rate
                                           + recall_output_tokens * output_rate)

with H = max(0, horizon) and p_recall clamped to [0, 1] (NaN counts as 1:
certain recall). Below the large threshold the gate never fires, nor for an
output size that is not a finite number; an unpriced model never fires (it
cannot prove a saving). :func:`evaluate_offload_gate` is pure: no I/O, no mutation.

Money: the terms are computed exactly with Decimal and the verdict is taken
on the exact net, so a net of exactly zero never fires through rounding.
The decision reports each term as a float USD (the exact value rounded to
the nearest double); ``net_saving`` keeps the exact Decimal.
"""

from __future__ import annotations

import logging
import math
import threading
import uuid
from collections.abc import Callable
from dataclasses import replace
from decimal import Decimal
from os import PathLike
from typing import Any

from seamscope.decisions import _checks as _c
from seamscope.decisions._observer import DecisionObserver, check_observer, guard_observer
from seamscope.decisions._pricing import DEFAULT_PRICING, PricingTable, to_decimal
from seamscope.decisions._priors import Priors
from seamscope.decisions.records import (
    DEFAULT_LARGE_OFFLOAD_THRESHOLD_TOKENS,
    DEFAULT_RECALL_INPUT_TOKENS,
    DEFAULT_RECALL_OUTPUT_TOKENS,
    DEFAULT_STUB_TOKENS,
    GateCall,
    OffloadGateDecision,
    OffloadGateInputs,
    OffloadReasonCode,
    PricingSource,
    PriorSource,
    ShadowVerdict,
)

__all__ = [
    "DEFAULT_LARGE_OFFLOAD_THRESHOLD_TOKENS",
    "DEFAULT_RECALL_INPUT_TOKENS",
    "DEFAULT_RECALL_OUTPUT_TOKENS",
    "DEFAULT_STUB_TOKENS",
    "GateCall",
    "OffloadGate",
    "OffloadGateDecision",
    "OffloadGateInputs",
    "evaluate_offload_gate",
]

_log = logging.getLogger("seamscope.decisions")
_MAX_UNPRICED_WARNINGS = 64  # models named per gate; the rest are in the traces only


_ZERO = Decimal(0)


def _no_fire(
    inputs: OffloadGateInputs, code: OffloadReasonCode, reason: str, h: int, p: float
) -> OffloadGateDecision:
    return OffloadGateDecision(
        fire=False,
        net_saving_usd=0.0,
        reprefill_saving_usd=0.0,
        stub_carry_cost_usd=0.0,
        expected_recall_hop_cost_usd=0.0,
        reason=reason,
        reason_code=code,
        pricing_source=PricingSource.NONE,
        model_name=inputs.model_name,
        output_tokens=float(inputs.output_tokens),
        horizon=h,
        recall_probability=p,
        stub_tokens=inputs.stub_tokens,
        threshold_tokens=inputs.large_offload_threshold_tokens,
        recall_input_tokens=inputs.recall_input_tokens,
        recall_output_tokens=inputs.recall_output_tokens,
    )


def evaluate_offload_gate(
    inputs: OffloadGateInputs, *, pricing: PricingTable | None = None
) -> OffloadGateDecision:
    """Decide whether a large tool output should be offloaded. Pure."""
    h = max(0, int(inputs.horizon))
    raw_p = float(inputs.recall_probability)
    # NaN is no evidence of a low recall rate: price it as certain recall
    p = 1.0 if math.isnan(raw_p) else max(0.0, min(1.0, raw_p))
    if not math.isfinite(float(inputs.output_tokens)):
        return _no_fire(
            inputs,
            OffloadReasonCode.BELOW_THRESHOLD,
            f"output size is not a finite number ({inputs.output_tokens!r}); not priced",
            h,
            p,
        )
    if inputs.output_tokens < inputs.large_offload_threshold_tokens:
        return _no_fire(
            inputs,
            OffloadReasonCode.BELOW_THRESHOLD,
            f"below large_offload_threshold ({inputs.output_tokens:.0f} < "
            f"{inputs.large_offload_threshold_tokens} tokens)",
            h,
            p,
        )
    quote = (DEFAULT_PRICING if pricing is None else pricing).lookup(inputs.model_name)
    if quote is None:
        return _no_fire(
            inputs,
            OffloadReasonCode.UNPRICED_MODEL,
            f"no pricing row for {inputs.model_name!r}",
            h,
            p,
        )
    input_rate = quote.price.input_rate
    output_rate = quote.price.output_rate
    hd = Decimal(h)
    reprefill = to_decimal(inputs.output_tokens) * input_rate * hd
    stub = to_decimal(inputs.stub_tokens) * input_rate * hd
    recall = to_decimal(p) * (
        Decimal(inputs.recall_input_tokens) * input_rate
        + Decimal(inputs.recall_output_tokens) * output_rate
    )
    net = reprefill - (stub + recall)
    fire = net > _ZERO
    reason = (
        f"net=${net:.4f} (saving=${reprefill:.4f} − stub=${stub:.4f} − "
        f"recall=${recall:.4f}); H={h} p_recall={p:.2f} model={inputs.model_name}"
    )
    return OffloadGateDecision(
        fire=fire,
        net_saving_usd=float(net),
        reprefill_saving_usd=float(reprefill),
        stub_carry_cost_usd=float(stub),
        expected_recall_hop_cost_usd=float(recall),
        reason=reason,
        reason_code=OffloadReasonCode.NET_POSITIVE if fire else OffloadReasonCode.NET_NOT_POSITIVE,
        pricing_source=quote.source,
        model_name=inputs.model_name,
        output_tokens=float(inputs.output_tokens),
        horizon=h,
        recall_probability=p,
        stub_tokens=inputs.stub_tokens,
        net_saving=net,
        threshold_tokens=inputs.large_offload_threshold_tokens,
        recall_input_tokens=inputs.recall_input_tokens,
        recall_output_tokens=inputs.recall_output_tokens,
        rates=quote.price.rates,
    )


def _positive_int(name: str, value: Any) -> int:
    return _c.tokens("OffloadGate", name, value)


def _tokens_at_run_time(value: object) -> float:
    """An output size from the loop as a float; one that is not a number is
    NaN, which the gate never prices (its decision says so)."""
    if isinstance(value, bool | str | bytes):
        return math.nan
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return math.nan


class OffloadGate:
    """The gate with its priors, pricing and observer, for a loop to call.

    Construction validates the priors (a negative horizon or a probability
    outside [0, 1] is a configuration error here, whereas the pure function
    clamps its inputs) and fails with a ValueError naming the field. A
    fired decision gets an ``offload_id`` that the ledger follows through
    the conversation.

    ``priors``: a calibrated priors file (a path, or a loaded
    :class:`~seamscope.decisions._priors.Priors`): a call whose (tool, model)
    pair has enough evidence in it (the file's ``min_offloads``) is decided
    with that pair's horizon and recall probability; every other call with
    the gate's own. Each decision says which (``prior_source``) and the
    file's version. ``shadow``: another gate evaluated beside this one on
    every call; its verdict rides on the decision (``shadow``), the decision
    itself stays this gate's.

    At run time :meth:`evaluate` never raises on the loop's values: an
    output size that is not a number becomes NaN (no fire, "output size is
    not a finite number" in the decision's reason) and a model name that is
    not a str becomes its str ('' for None: unpriced).
    """

    __slots__ = (
        "_id_factory",
        "_observer",
        "_pricing",
        "_template",
        "_unpriced",
        "_unpriced_lock",
        "horizon",
        "priors",
        "recall_probability",
        "shadow",
    )

    def __init__(
        self,
        *,
        horizon: int = 5,
        recall_probability: float = 0.5,
        large_offload_threshold_tokens: int = DEFAULT_LARGE_OFFLOAD_THRESHOLD_TOKENS,
        stub_tokens: int = DEFAULT_STUB_TOKENS,
        recall_input_tokens: int = DEFAULT_RECALL_INPUT_TOKENS,
        recall_output_tokens: int = DEFAULT_RECALL_OUTPUT_TOKENS,
        pricing: PricingTable | None = None,
        observer: DecisionObserver | None = None,
        id_factory: Callable[[], str] | None = None,
        priors: Priors | str | PathLike[str] | None = None,
        shadow: OffloadGate | None = None,
    ) -> None:
        self.horizon = _positive_int("horizon", horizon)
        if (
            isinstance(recall_probability, bool)
            or not isinstance(recall_probability, int | float)
            or not 0.0 <= recall_probability <= 1.0
        ):
            raise _c.fail(
                "OffloadGate", "recall_probability", "a number in [0, 1]", recall_probability
            )
        self.recall_probability = float(recall_probability)
        self._template = OffloadGateInputs(
            output_tokens=0.0,
            horizon=self.horizon,
            recall_probability=self.recall_probability,
            model_name="",
            large_offload_threshold_tokens=_positive_int(
                "large_offload_threshold_tokens", large_offload_threshold_tokens
            ),
            stub_tokens=_positive_int("stub_tokens", stub_tokens),
            recall_input_tokens=_positive_int("recall_input_tokens", recall_input_tokens),
            recall_output_tokens=_positive_int("recall_output_tokens", recall_output_tokens),
        )
        if pricing is not None and not isinstance(pricing, PricingTable):
            raise _c.fail("OffloadGate", "pricing", "a PricingTable or None", pricing)
        _c.maybe_callable("OffloadGate", "id_factory", id_factory)
        check_observer("OffloadGate", observer)
        self._pricing = DEFAULT_PRICING if pricing is None else pricing
        self._observer = guard_observer(observer)
        self._id_factory = id_factory or (lambda: uuid.uuid4().hex[:16])
        if isinstance(priors, str | PathLike):
            try:
                priors = Priors.load(priors)
            except ValueError as exc:
                raise ValueError(f"OffloadGate.priors: {exc}") from None
        if priors is not None and not isinstance(priors, Priors):
            raise _c.fail("OffloadGate", "priors", "a Priors, a priors file path or None", priors)
        self.priors: Priors | None = priors
        if shadow is not None and (not isinstance(shadow, OffloadGate) or shadow is self):
            raise _c.fail("OffloadGate", "shadow", "another OffloadGate or None", shadow)
        self.shadow: OffloadGate | None = shadow
        self._unpriced: set[str] = set()  # models already named in a WARNING
        self._unpriced_lock = threading.Lock()

    @property
    def pricing(self) -> PricingTable:
        return self._pricing

    @property
    def stub_tokens(self) -> float:
        return self._template.stub_tokens

    @property
    def threshold_tokens(self) -> int:
        return self._template.large_offload_threshold_tokens

    def inputs(self, output_tokens: float, model_name: str) -> OffloadGateInputs:
        t = self._template
        if not isinstance(model_name, str):
            model_name = "" if model_name is None else str(model_name)
        return OffloadGateInputs(
            _tokens_at_run_time(output_tokens),
            t.horizon,
            t.recall_probability,
            model_name,
            t.large_offload_threshold_tokens,
            t.stub_tokens,
            t.recall_input_tokens,
            t.recall_output_tokens,
        )

    def _new_id(self) -> str:
        """An id from the adopter's ``id_factory``; one that raises or returns
        something other than a non-empty str is contained (a WARNING names it)
        and a random id is used, so the loop never sees the error."""
        try:
            offload_id = self._id_factory()
            if isinstance(offload_id, str) and offload_id:
                return offload_id
            problem = f"returned {type(offload_id).__name__}, not a non-empty str"
        except Exception as exc:
            problem = f"raised {type(exc).__qualname__}"
        _log.warning("OffloadGate.id_factory %s; a random offload id is used", problem)
        return uuid.uuid4().hex[:16]

    def evaluate(
        self, output_tokens: float, model_name: str, call: GateCall | None = None
    ) -> OffloadGateDecision:
        """Run the gate for one tool output; a fired decision carries an offload id."""
        return self.evaluate_linked(output_tokens, model_name, call)[0]

    def evaluate_linked(
        self,
        output_tokens: float,
        model_name: str,
        call: GateCall | None = None,
        *,
        keep: Callable[[OffloadGateDecision], None] | None = None,
    ) -> tuple[OffloadGateDecision, object]:
        """:meth:`evaluate`, plus the observer's link to the decision (opaque;
        give it to :meth:`OffloadLedger.record_offload` with a fired decision).

        ``keep``: called with a decision that fires, before the decision is
        recorded, to keep the output where a recall finds it (an offload
        store). If it raises, no offload is made: the decision does not fire,
        its reason code is ``store_failed`` and its reason names what was
        raised (the exception is contained, never raised to the caller)."""
        inputs = self.inputs(output_tokens, model_name)
        tool = None if call is None else call.tool_name
        source = self._prior(inputs, tool) if self.priors is not None else None
        if source is not None:
            inputs = source[0]
        handle = self._observer.start_offload_gate(inputs, call)
        decision = evaluate_offload_gate(inputs, pricing=self._pricing)
        if decision.reason_code is OffloadReasonCode.UNPRICED_MODEL:
            self._warn_unpriced(inputs.model_name)
        if source is not None or self.shadow is not None:
            decision = replace(
                decision,
                prior_source=PriorSource.DEFAULT if source is None else source[1],
                priors_version=None if self.priors is None else self.priors.version,
                shadow=None if self.shadow is None else self.shadow.verdict(inputs, tool),
            )
        if decision.fire:
            decision = replace(decision, offload_id=self._new_id())
            if keep is not None:
                decision = _kept(decision, keep, self._observer)
        link = self._observer.end_offload_gate(handle, decision)
        return decision, link

    def _warn_unpriced(self, model: str) -> None:
        """One WARNING per model for this gate: an unpriced model switches
        offloading off for its turns, and only a trace would say so."""
        with self._unpriced_lock:
            if model in self._unpriced or len(self._unpriced) >= _MAX_UNPRICED_WARNINGS:
                return
            self._unpriced.add(model)
        _log.warning(
            "OffloadGate: no price for model %r (neither the gate's PricingTable nor "
            "genai-prices knows it): its large tool outputs are never offloaded. Give its "
            "rates, USD per 1M tokens: pricing=PricingTable({%r: {'input': ..., "
            "'output': ...}})",
            model,
            model,
        )

    def _prior(
        self, inputs: OffloadGateInputs, tool: str | None
    ) -> tuple[OffloadGateInputs, PriorSource]:
        """The inputs with the calibrated prior of (tool, model), when there is one."""
        assert self.priors is not None
        prior = self.priors.lookup(tool, inputs.model_name)
        if prior is None:
            return inputs, PriorSource.DEFAULT
        changed = replace(
            inputs, horizon=prior.horizon, recall_probability=prior.recall_probability
        )
        return changed, PriorSource.CALIBRATED

    def verdict(self, live: OffloadGateInputs, tool: str | None) -> ShadowVerdict:
        """This gate's verdict on the call ``live`` describes (as a shadow: no
        observer, no offload id)."""
        inputs = self.inputs(live.output_tokens, live.model_name)
        if self.priors is not None:
            inputs = self._prior(inputs, tool)[0]
        d = evaluate_offload_gate(inputs, pricing=self._pricing)
        return ShadowVerdict(
            d.fire, d.net_saving, d.reason_code, d.horizon, d.recall_probability,
            d.stub_tokens, tool, inputs.recall_input_tokens, inputs.recall_output_tokens,
        )  # fmt: skip


def _kept(
    decision: OffloadGateDecision,
    keep: Callable[[OffloadGateDecision], None],
    observer: DecisionObserver,
) -> OffloadGateDecision:
    """The fired decision, or one that does not fire when its output could
    not be kept (the output stays in the prompt: nothing is lost)."""
    try:
        keep(decision)
    except Exception as exc:
        _log.warning(
            "OffloadGate: the offload store did not keep the output (%s): not offloaded",
            type(exc).__qualname__,
        )
        hook = getattr(observer, "on_store_failed", None)
        if hook is not None:
            hook("put", type(exc).__qualname__)
        return replace(
            decision,
            fire=False,
            offload_id=None,
            reason_code=OffloadReasonCode.STORE_FAILED,
            reason=f"the offload store did not keep the output ({type(exc).__qualname__}): "
            f"not offloaded, it stays in the prompt; {decision.reason}",
        )
    return decision
