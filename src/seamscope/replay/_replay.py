"""Re-settling one recorded conversation under a changed gate configuration.

Two real ledgers follow the conversation's recorded course (see ``_course``):

* the *realized* one is told exactly what the live ledger was told: the
  offloads that fired, every accounted model call with what it carried, every
  recall with its real tokens, every compaction, and the settlement's
  trigger. Under the recorded configuration and prices it reproduces the
  live ledger's settlements to the Decimal (a test holds it to that);
* the *counterfactual* one is told the same course with every gate call
  decided again by :func:`evaluate_offload_gate` under the changed
  configuration and prices. An offload that still fires keeps its recorded
  carries and recalls: its settlement is **exact**. One that no longer fires
  is not followed (its output stays in the prompt, the baseline: 0), nor
  recalled: the model call that recalled it charged its output with its
  first recall (the loop's rule for parallel recalls), so when that was the
  one no longer made, the call's next recall that still happens takes it,
  as the loop run again would charge it.

A settlement recorded before the conversation ended (``SETTLED_EARLY``: idle,
evicted, expired) stopped the live ledger's following, not the offload: both
ledgers follow it on (each later model call carries its stub until a recall)
and settle it whole at the conversation's end.

An offload that *newly* fires has no recorded recall (it never existed), so
its value is **expected**: every later accounted model call of the
conversation would have carried its stub (the stub the loop would send for
it; saving the output's tokens at that call's input rate, paying the
stub's), and a recall, with the recall probability, brings the whole output
back (``hop``: its tokens in, the gate's recall output out, at the gate
model's rates) and ends the carrying::

    N        = sum over later calls (output_tokens - stub_tokens) * input_rate
    S_k      = that sum over the first k later calls (S_K = N)
    expected = N - p * hop          range [min(min S_k - hop, N), max(max S_k - hop, N)]
                                    (recalled by call k, or never)

and 0 with no later call (nothing carried, nothing to recall). The expected
value charges the hop without cutting the carry short (an upper estimate
within the range); the prompt cache is not modelled for those. The live
ledger's shadow settlement follows the same rule. Compactions are a framework's decision, not the
gate's: they settle as recorded (exact, at the counterfactual prices) and
only their prediction is priced again.

With ``gate_evictions``, each Deep Agents eviction (a compaction of
mechanism ``deepagents_eviction``) is put to the gate as
``SeamscopeMiddleware(gate_evictions=True)`` puts it live; with
``gate_offloader``, each Strands ``ContextOffloader`` offload (mechanism
``strands_context_offload``) as ``SeamscopePlugin(gate_offloader=True)``
puts it live: its removed tokens as the output, its preview as the stub, no
size threshold, the compaction's horizon and recall probability (as
changed). One the gate prices as a loss (``net_not_positive``) is not made
in the counterfactual: the output stays in the prompt (the baseline: 0), its
read-backs (a read of the evicted file, a retrieval of the offloaded
content) never happen (their model call's output goes to its next recall
that still happens, as for an offload that no longer fires); the others
settle as recorded (exact).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from decimal import Decimal

from seamscope.decisions import OffloadLedger, PricingTable, evaluate_offload_gate, to_decimal
from seamscope.decisions.records import (
    DEFAULT_LARGE_OFFLOAD_THRESHOLD_TOKENS,
    DEFAULT_RECALL_INPUT_TOKENS,
    DEFAULT_RECALL_OUTPUT_TOKENS,
    DEFAULT_STUB_TOKENS,
    Compaction,
    ModelUsage,
    OffloadGateDecision,
    OffloadGateInputs,
    OffloadMechanism,
    OffloadReasonCode,
    Settlement,
    SettleTrigger,
)
from seamscope.loop import estimate_tokens, offload_stub, unsent_stub_tokens
from seamscope.replay._course import (
    SETTLED_EARLY,
    Chat,
    Compact,
    Conversation,
    Event,
    Gate,
    Rates,
    Recall,
    Settle,
)

__all__ = [
    "GateConfig",
    "NewOffload",
    "Replay",
    "Resolve",
    "recorded_inputs",
    "recorded_rates",
    "replay",
]

_ZERO = Decimal(0)
_BIG = 1 << 40


@dataclass(frozen=True, slots=True)
class GateConfig:
    """The gate's configuration for one call (what whatif may change)."""

    horizon: int
    recall_probability: float
    threshold_tokens: int = DEFAULT_LARGE_OFFLOAD_THRESHOLD_TOKENS
    stub_tokens: float = DEFAULT_STUB_TOKENS
    recall_input_tokens: int = DEFAULT_RECALL_INPUT_TOKENS
    recall_output_tokens: int = DEFAULT_RECALL_OUTPUT_TOKENS


Resolve = Callable[[Gate, GateConfig], GateConfig]
"""The changed configuration of one gate call, from its recorded one."""


def recorded_inputs(gate: Gate) -> GateConfig:
    """The configuration a gate span records (defaults where an older span is silent)."""
    return GateConfig(
        gate.horizon,
        gate.recall_probability,
        DEFAULT_LARGE_OFFLOAD_THRESHOLD_TOKENS
        if gate.threshold_tokens is None
        else gate.threshold_tokens,
        DEFAULT_STUB_TOKENS if gate.stub_tokens is None else gate.stub_tokens,
        DEFAULT_RECALL_INPUT_TOKENS
        if gate.recall_input_tokens is None
        else gate.recall_input_tokens,
        DEFAULT_RECALL_OUTPUT_TOKENS
        if gate.recall_output_tokens is None
        else gate.recall_output_tokens,
    )


def recorded_rates(conv: Conversation) -> dict[str, Rates]:
    """The rates the loop priced each model of ``conv`` at, as its spans recorded
    them: a settle span's (the ledger's) first, then a gate span's (the gate's).
    A model absent here is priced by the default table."""
    out: dict[str, Rates] = {}
    gates: dict[str, Rates] = {}
    for _, _, ev in conv.events:
        if type(ev) is Settle and ev.rates is not None and ev.model:
            out.setdefault(ev.model, ev.rates)
        elif type(ev) is Gate and ev.rates is not None and ev.model:
            gates.setdefault(ev.model, ev.rates)
    return {**gates, **out}


def _inputs(gate: Gate, cfg: GateConfig) -> OffloadGateInputs:
    return OffloadGateInputs(
        gate.output_tokens,
        cfg.horizon,
        cfg.recall_probability,
        gate.model,
        cfg.threshold_tokens,
        cfg.stub_tokens,
        cfg.recall_input_tokens,
        cfg.recall_output_tokens,
    )


@dataclass(slots=True)
class NewOffload:
    """An offload that would newly fire: its expected value from the later calls.

    ``stub``: the stub the loop would send for it
    (:func:`~seamscope.loop._stub.unsent_stub_tokens`); ``hop``: one recall of it
    at its real size (the output's tokens in, the gate's recall output out, at
    the gate model's rates). A recall is emitted by a model call and ends the
    carrying, so the range runs over a recall by any later call (the running
    net before it, minus the hop: ``partial_low``/``partial_high`` are the
    lowest and highest running nets) and no recall (``no_recall``); with no
    later call nothing is carried nor recalled (0). The same rule as the live
    ledger's shadow (:class:`~seamscope.decisions.records.ShadowOffload`).
    """

    gate: Gate
    decision: OffloadGateDecision
    hop: Decimal
    stub: float = DEFAULT_STUB_TOKENS
    savings: Decimal = _ZERO
    stub_cost: Decimal = _ZERO
    partial_low: Decimal = _ZERO
    partial_high: Decimal = _ZERO
    turns: int = 0
    open: bool = True

    @property
    def no_recall(self) -> Decimal:
        return self.savings - self.stub_cost

    @property
    def expected(self) -> Decimal:
        if not self.turns:
            return _ZERO
        return self.no_recall - to_decimal(self.decision.recall_probability) * self.hop

    @property
    def low(self) -> Decimal:
        return min(self.partial_low - self.hop, self.no_recall) if self.turns else _ZERO

    @property
    def high(self) -> Decimal:
        return max(self.partial_high - self.hop, self.no_recall) if self.turns else _ZERO


@dataclass(slots=True)
class Replay:
    """One conversation re-settled: realized and counterfactual, exact and expected."""

    conversation_id: str
    gate_calls: int = 0
    compactions: int = 0
    recorded_fires: int = 0
    counterfactual_fires: int = 0
    newly_fired: list[NewOffload] = field(default_factory=list)
    no_longer_fired: list[Gate] = field(default_factory=list)
    realized: list[Settlement] = field(default_factory=list)
    counterfactual: list[Settlement] = field(default_factory=list)
    recorded: list[Settle] = field(default_factory=list)
    inferred_carry: bool = False  # no chat span marked: the ledger's default rule
    settled_early: list[str] = field(default_factory=list)
    """Offloads whose recorded settlement is censored (see ``SETTLED_EARLY``):
    re-settled whole, at the conversation's end."""
    gates: list[tuple[Gate, OffloadGateDecision | None]] = field(default_factory=list)
    """Each gate call and its counterfactual decision (None: below the threshold)."""
    evictions_gated: int = 0
    """Deep Agents evictions the gate decided again (``gate_evictions``)."""
    evictions_kept: list[Compact] = field(default_factory=list)
    """The ones it priced as a loss: their output stays in the prompt."""
    offloader_gated: int = 0
    """Strands ``ContextOffloader`` offloads the gate decided again (``gate_offloader``)."""
    offloader_kept: list[Compact] = field(default_factory=list)
    """The ones it priced as a loss: their output stays in the prompt."""

    @property
    def realized_usd(self) -> Decimal:
        return sum((s.realized_net_saving for s in self.realized), _ZERO)

    @property
    def counterfactual_exact_usd(self) -> Decimal:
        return sum((s.realized_net_saving for s in self.counterfactual), _ZERO)

    @property
    def counterfactual_expected_usd(self) -> Decimal:
        return sum((n.expected for n in self.newly_fired), _ZERO)

    @property
    def counterfactual_low_usd(self) -> Decimal:
        return sum((n.low for n in self.newly_fired), _ZERO)

    @property
    def counterfactual_high_usd(self) -> Decimal:
        return sum((n.high for n in self.newly_fired), _ZERO)

    def mismatches(self, tolerance: float = 1e-9) -> list[str]:
        """Offload ids whose re-settled net differs from the recorded settle span."""
        mine = {s.offload_id: s for s in self.realized}
        out = []
        for rec in self.recorded:
            if rec.offload_id in self.settled_early:
                continue  # its settle span stopped short on purpose
            s = mine.get(rec.offload_id)
            if s is None or rec.realized_net_usd is None:
                out.append(rec.offload_id)
                continue
            if abs(float(s.realized_net_saving) - rec.realized_net_usd) > tolerance * max(
                1.0, abs(rec.realized_net_usd)
            ):
                out.append(rec.offload_id)
        return out


def _ledger(pricing: PricingTable) -> OffloadLedger:
    return OffloadLedger(
        pricing=pricing,
        idle_turns=_BIG,
        max_conversations=_BIG,
        max_offloads_per_conversation=_BIG,
    )


def _trigger(text: str) -> SettleTrigger:
    try:
        return SettleTrigger(text)
    except ValueError:
        return SettleTrigger.EXPLICIT


def _compaction(ev: Compact, horizon: int, p: float, pricing: PricingTable) -> Compaction:
    predicted = None
    if ev.priced:
        inputs = OffloadGateInputs(ev.removed_tokens, horizon, p, ev.model, 0, ev.kept_tokens)
        decision = evaluate_offload_gate(inputs, pricing=pricing)
        predicted = None if decision.pricing_source.value == "none" else decision
    try:
        mechanism = OffloadMechanism(ev.mechanism)
    except ValueError:
        mechanism = OffloadMechanism.CONTEXT_EDITING
    return Compaction(
        ev.compaction_id,
        mechanism,
        ev.model,
        ev.removed_tokens,
        ev.kept_tokens,
        ev.tool_call_ids,
        0,
        ev.cost,
        predicted,
    )


def _real_stubs(events: list[Event]) -> dict[str, float | None]:
    """The stub each offload really carried (``seamscope.offload.carried_stub_tokens`` of
    the first call that carried it); an offload absent here is priced at its gate's stub.
    An offload settled early that no call listed (evicted before the next model call)
    is None here: priced at the stub the loop sends for it."""
    out: dict[str, float | None] = {}
    for ev in events:
        if type(ev) is Chat and ev.carried and len(ev.stubs) == len(ev.carried):
            for offload_id, size in zip(ev.carried, ev.stubs, strict=True):
                out.setdefault(offload_id, size)
        elif type(ev) is Settle and ev.trigger in SETTLED_EARLY:
            out.setdefault(ev.offload_id, None)
    return out


GateCompaction = bool | Callable[[Compact], tuple[int, float]]
"""Whether the gate decides a mechanism's compactions again (a callable: the
horizon and recall probability it decides each with, its tool's priors;
True: the compaction's)."""


def _gated(
    gate_evictions: GateCompaction, gate_offloader: GateCompaction
) -> dict[str, GateCompaction]:
    """The mechanisms whose offloads the gate decides again, each with its setting."""
    out: dict[str, GateCompaction] = {}
    if gate_evictions:
        out[OffloadMechanism.DEEPAGENTS_EVICTION.value] = gate_evictions
    if gate_offloader:
        out[OffloadMechanism.STRANDS_CONTEXT_OFFLOAD.value] = gate_offloader
    return out


def _kept(ev: Compact, horizon: int, p: float, pricing: PricingTable) -> bool:
    """Whether the gate prices this framework offload as a loss (the live
    opt-in gate's inputs: the removed tokens, the preview as the stub, no
    size threshold), so the output would have stayed in the prompt."""
    inputs = OffloadGateInputs(ev.removed_tokens, horizon, p, ev.model, 0, ev.kept_tokens)
    decision = evaluate_offload_gate(inputs, pricing=pricing)
    return decision.reason_code is OffloadReasonCode.NET_NOT_POSITIVE


def _decide(
    events: list[Event],
    resolve: Resolve,
    pricing: PricingTable,
    resolve_compaction: Callable[[Compact], tuple[int, float]] | None,
    gated: dict[str, GateCompaction],
) -> tuple[list[tuple[GateConfig, OffloadGateDecision | None]], bool]:
    """Every gate call decided under the changed configuration (None: its output
    is below the changed threshold, so it does not fire), and whether the
    counterfactual course is the realized one (same verdicts, same stubs, same
    compaction priors): then one ledger settles both."""
    decided: list[tuple[GateConfig, OffloadGateDecision | None]] = []
    same = True
    for ev in events:
        if type(ev) is Gate:
            recorded = recorded_inputs(ev)
            changed = resolve(ev, recorded)
            if ev.output_tokens < changed.threshold_tokens:
                decided.append((changed, None))  # below the threshold: the gate's first rule
                if ev.fire and ev.offload_id:
                    same = False
                continue
            decision = evaluate_offload_gate(_inputs(ev, changed), pricing=pricing)
            decided.append((changed, decision))
            if decision.fire != (ev.fire and bool(ev.offload_id)):
                same = (
                    False  # (a changed stub prior changes verdicts only: the real stub is carried)
                )
        elif type(ev) is Compact:
            h, p = (
                (ev.horizon, ev.recall_probability)
                if resolve_compaction is None
                else resolve_compaction(ev)
            )
            same = same and (h, p) == (ev.horizon, ev.recall_probability)
            gate = gated.get(ev.mechanism)
            if gate:
                gh, gp = gate(ev) if callable(gate) else (h, p)
                same = same and not _kept(ev, gh, gp, pricing)
    return decided, same


def _followed(events: list[Event]) -> bool:
    """Whether the live ledger followed anything in the conversation (a fired
    offload, a compaction): without, both ledgers would settle nothing."""
    return any(
        (type(ev) is Gate and ev.fire and ev.offload_id) or type(ev) is Compact for ev in events
    )


def replay(
    conv: Conversation,
    resolve: Resolve,
    *,
    realized_pricing: PricingTable,
    counterfactual_pricing: PricingTable,
    resolve_compaction: Callable[[Compact], tuple[int, float]] | None = None,
    gate_evictions: GateCompaction = False,
    gate_offloader: GateCompaction = False,
) -> Replay:
    """Re-settle ``conv`` on its recorded course (see the module docstring);
    ``gate_evictions``: the gate decides each Deep Agents eviction again,
    ``gate_offloader`` each Strands ``ContextOffloader`` offload (a
    callable: the horizon and recall probability it decides with, per
    offload: its tool's priors; True: the compaction's)."""
    key = conv.conversation_id
    out = Replay(key, inferred_carry=not conv.marked)
    events = conv.ordered()
    gated = _gated(gate_evictions, gate_offloader)
    decided, same = _decide(events, resolve, counterfactual_pricing, resolve_compaction, gated)
    stubs = _real_stubs(events)
    mirror = same and realized_pricing is counterfactual_pricing
    # nothing followed (no fired offload, no compaction): no ledger, nothing to settle
    real = _ledger(realized_pricing) if _followed(events) else None
    cf = None if mirror or real is None else _ledger(counterfactual_pricing)
    ledgers = () if real is None else (real,) if cf is None else (real, cf)
    gates = iter(decided)
    gone: set[str] = set()  # offloads that no longer fire: never made, never recalled
    unclaimed = 0  # the output of a model call charged with a recall that did not happen
    carrying: list[str] = []  # settled early, not recalled since: their stubs still ride
    for ev in events:
        if type(ev) is Chat:
            unclaimed = 0
            carried = ev.carried
            if carrying and carried is not None:
                carried = (*carried, *[x for x in carrying if x not in carried])
            if ledgers:
                usage = ModelUsage(*ev.usage)
                for ledger in ledgers:
                    ledger.record_model_call(key, model=ev.model, usage=usage, carried=carried)
            quote = counterfactual_pricing.lookup(ev.model) if out.newly_fired else None
            if quote is not None:
                rate = quote.price.input_rate
                for new in out.newly_fired:
                    if new.open:
                        saving = Decimal(repr(new.gate.output_tokens)) * rate
                        stub = to_decimal(new.stub) * rate
                        new.savings += saving
                        new.stub_cost += stub
                        running = new.savings - new.stub_cost
                        if not new.turns or running < new.partial_low:
                            new.partial_low = running
                        if not new.turns or running > new.partial_high:
                            new.partial_high = running
                        new.turns += 1
        elif type(ev) is Gate:
            fires = _gate(
                ev, out, next(gates), real, cf, realized_pricing, counterfactual_pricing, stubs
            )
            if ev.fire and ev.offload_id and not fires:
                gone.add(ev.offload_id)
        elif type(ev) is Recall:
            if real is None:
                continue
            if ev.offload_id in carrying:
                carrying.remove(ev.offload_id)
            real.record_recall(
                key,
                ev.offload_id,
                model=ev.model,
                input_tokens=ev.input_tokens,
                output_tokens=ev.output_tokens,
            )
            if cf is None:
                continue
            if ev.offload_id in gone:
                # parallel recalls of one model call: its output is charged with the
                # first (the loop's rule); the first that still happens takes it
                unclaimed += ev.output_tokens
                continue
            cf.record_recall(
                key,
                ev.offload_id,
                model=ev.model,
                input_tokens=ev.input_tokens,
                output_tokens=ev.output_tokens + unclaimed,
            )
            unclaimed = 0
        elif type(ev) is Compact and real is not None:  # (a compaction: followed)
            out.compactions += 1
            real.record_compaction(
                _compaction(ev, ev.horizon, ev.recall_probability, realized_pricing),
                conversation_id=key,
            )
            h, p = (
                (ev.horizon, ev.recall_probability)
                if resolve_compaction is None
                else resolve_compaction(ev)
            )
            gate = gated.get(ev.mechanism)
            if gate:
                eviction = ev.mechanism == OffloadMechanism.DEEPAGENTS_EVICTION
                if eviction:
                    out.evictions_gated += 1
                else:
                    out.offloader_gated += 1
                gh, gp = gate(ev) if callable(gate) else (h, p)
                if _kept(ev, gh, gp, counterfactual_pricing):
                    # the gate keeps the output in the prompt: never made, never read back
                    (out.evictions_kept if eviction else out.offloader_kept).append(ev)
                    gone.add(ev.compaction_id)
                    continue
            if cf is not None:
                compaction = _compaction(ev, h, p, counterfactual_pricing)
                cf.record_compaction(compaction, conversation_id=key)
        elif type(ev) is Settle:
            out.recorded.append(ev)
            if ev.trigger in SETTLED_EARLY:  # censored: followed on to the conversation's end
                out.settled_early.append(ev.offload_id)
                if ev.offload_id not in carrying:
                    carrying.append(ev.offload_id)
                continue
            carrying.clear()
            trigger = _trigger(ev.trigger)
            if real is not None:
                out.realized.extend(real.settle(key, trigger=trigger))
            if cf is not None:
                out.counterfactual.extend(cf.settle(key, trigger=trigger))
            for new in out.newly_fired:
                new.open = False
    # still live at the end of the trace: settled here (the trace has no settlement)
    if real is not None:
        out.realized.extend(real.settle(key))
    if cf is not None:
        out.counterfactual.extend(cf.settle(key))
    else:  # the same course: the realized settlements, with the changed predictions
        predicted = {g.offload_id: d.net_saving for g, d in out.gates if d and g.offload_id}
        out.counterfactual = [
            replace(s, predicted_net_saving=predicted[s.offload_id])
            if s.offload_id in predicted
            else s
            for s in out.realized
        ]
    return out


def _gate(
    ev: Gate,
    out: Replay,
    decided: tuple[GateConfig, OffloadGateDecision | None],
    real: OffloadLedger | None,
    cf: OffloadLedger | None,
    realized_pricing: PricingTable,
    counterfactual_pricing: PricingTable,
    stubs: dict[str, float | None],
) -> bool:
    """One gate call on both sides; whether it fires in the counterfactual."""
    key = out.conversation_id
    real_stub = stubs.get(ev.offload_id or "")
    out.gate_calls += 1
    if ev.fire and ev.offload_id and real is not None:
        out.recorded_fires += 1
        recorded = recorded_inputs(ev)
        made = evaluate_offload_gate(_inputs(ev, recorded), pricing=realized_pricing)
        if not made.fire:  # priced otherwise when recorded: keep what the span says
            made = replace(made, fire=True, net_saving=Decimal(repr(ev.net_saving_usd)))
        made = replace(made, offload_id=ev.offload_id)
        if real_stub is None and ev.offload_id in stubs:
            real_stub = estimate_tokens(offload_stub(made, ev.tool or ""))
        real.record_offload(
            made,
            conversation_id=key,
            stub_tokens=real_stub,
            tool_name=ev.tool,
        )
    changed, decision = decided
    if ev.store_failed and decision is not None:
        # the gate fired but the store did not keep the output: under any gate
        # configuration that output stayed in the prompt (whatif varies the gate,
        # not the store)
        decision = replace(decision, fire=False, offload_id=None)
    out.gates.append((ev, decision))
    if decision is None or not decision.fire:
        if ev.fire:
            out.no_longer_fired.append(ev)
        return False
    out.counterfactual_fires += 1
    if ev.fire and ev.offload_id:
        if cf is not None:
            cf.record_offload(
                replace(decision, offload_id=ev.offload_id),
                conversation_id=key,
                stub_tokens=real_stub,
                tool_name=ev.tool,
            )
        return True
    quote = counterfactual_pricing.lookup(ev.model)
    hop = _ZERO
    if quote is not None:  # a recall brings the whole output back: its real size
        hop = (
            Decimal(repr(ev.output_tokens)) * quote.price.input_rate
            + Decimal(changed.recall_output_tokens) * quote.price.output_rate
        )
    stub = unsent_stub_tokens(decision, ev.tool or "")
    out.newly_fired.append(NewOffload(ev, decision, hop, stub))
    return True
