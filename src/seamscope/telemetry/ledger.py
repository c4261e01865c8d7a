"""The offload ledger: predicted versus realized offload economics.

The gate decides on priors (horizon H, recall probability p). The ledger
follows every fired offload (by ``seamscope.offload.id``) through the rest
of its conversation and measures what really happened:

* each later model call that carries the stub instead of the output saves
  the avoided tokens at that call's input rate, and pays for the stub
  (``stub_carry``) at the same rate;
* each recall of the offloaded output costs its real input and output
  tokens at that model's rates (``recall``);
* a prompt-cache disruption after the offload costs the cache-read tokens
  lost against the conversation's pre-offload hit ratio, priced at the
  difference between the rate they were paid at (cache write or uncached
  input) and the cache-read rate (``cache_disruption``). It is charged to
  the offloads recalled since the previous model call (their output
  re-entered the prompt), else shared by the offloads the call carried.
  With no model call seen before the first offload there is no baseline
  and no disruption is charged (unmeasured is not charged).

Realized savings and costs are counted per event, where they happen
(monotonic USD counters): no process needs the whole history for the
Prometheus sums to be right, so a conversation served by several workers
is still summed correctly. The per-offload settlement (gain or loss of one
offload, a ``seamscope.offload.settle`` span linked to the gate's span) is
a convenience that holds where one process sees the whole conversation.

An offload settles at the end of its conversation
(:meth:`OffloadLedger.end_conversation`), on an explicit
:meth:`OffloadLedger.settle`, or when its conversation has been idle for
``idle_turns`` turns of the ledger's clock (one tick per model call recorded,
in any conversation). Memory is bounded: at most ``max_conversations``
conversations (the least recently active is settled and evicted) and
``max_offloads_per_conversation`` live offloads each.

Money is kept as exact Decimal USD; metrics receive floats.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Link, SpanContext, SpanKind

from seamscope import __version__
from seamscope.decisions import OffloadGateDecision, PricingTable
from seamscope.decisions._enums import (
    CacheUsage,
    OffloadCostKind,
    OffloadOutcome,
    SettleTrigger,
)
from seamscope.decisions._offload import DEFAULT_STUB_TOKENS
from seamscope.decisions._pricing import DEFAULT_PRICING, ModelPrice, to_decimal
from seamscope.decisions._usage import ModelUsage
from seamscope.telemetry import conventions as c
from seamscope.telemetry._instruments import Instruments, LabelCap, flag
from seamscope.telemetry._logging import log_event, telemetry_error

__all__ = ["CarriedStub", "OffloadLedger", "Settlement"]

_ZERO = Decimal(0)


@dataclass(frozen=True, slots=True)
class Settlement:
    """One settled offload: what was predicted and what really happened (USD)."""

    offload_id: str
    conversation_id: str
    model: str
    trigger: SettleTrigger
    predicted_net_saving: Decimal
    realized_savings: Decimal
    stub_carry_cost: Decimal
    recall_cost: Decimal
    cache_disruption_cost: Decimal
    turns_carried: int
    recalls: int
    horizon: int
    recall_probability: float

    @property
    def realized_costs(self) -> Decimal:
        return self.stub_carry_cost + self.recall_cost + self.cache_disruption_cost

    @property
    def realized_net_saving(self) -> Decimal:
        return self.realized_savings - self.realized_costs

    @property
    def outcome(self) -> OffloadOutcome:
        return OffloadOutcome.GAIN if self.realized_net_saving > 0 else OffloadOutcome.LOSS


@dataclass(frozen=True, slots=True)
class CarriedStub:
    """The stub of an offload a model call's prompt carried, with its sizes.

    For a process that did not record the offload itself: ``output_tokens``
    is the size of the offloaded output (what the stub saves per call),
    ``stub_tokens`` the stub's own size.
    """

    offload_id: str
    output_tokens: float
    stub_tokens: int = DEFAULT_STUB_TOKENS


@dataclass(slots=True)
class _Offload:  # mutable accounting of one live offload
    offload_id: str
    model: str
    output_tokens: Decimal
    stub_tokens: int
    predicted: Decimal
    horizon: int
    recall_probability: float
    gate_span: SpanContext | None
    savings: Decimal = _ZERO
    stub_cost: Decimal = _ZERO
    recall_cost: Decimal = _ZERO
    cache_cost: Decimal = _ZERO
    turns: int = 0
    recalls: int = 0
    recalled_since_call: bool = False


@dataclass(slots=True)
class _Conversation:
    offloads: OrderedDict[str, _Offload] = field(default_factory=OrderedDict)
    baseline_read: int = 0
    baseline_input: int = 0
    last_tick: int = 0


_Due = tuple[Settlement, SpanContext | None]


def _add(counter: Any, amount: float, attributes: dict[str, str]) -> None:
    """Add to a counter; a failing metric pipeline is logged, never raised."""
    try:
        counter.add(amount, attributes)
    except Exception as exc:
        telemetry_error("ledger", exc)


def _positive(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"OffloadLedger.{name} must be an int >= 1, got {value!r}")
    return value


class OffloadLedger:
    """Follows fired offloads and settles their realized net saving.

    Thread-safe. Telemetry goes to the given providers (or the global API).
    """

    def __init__(
        self,
        *,
        pricing: PricingTable | None = None,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: Any | None = None,
        instruments: Instruments | None = None,
        idle_turns: int = 50,
        max_conversations: int = 10_000,
        max_offloads_per_conversation: int = 256,
        label_cap: int = 64,
    ) -> None:
        if pricing is not None and not isinstance(pricing, PricingTable):
            raise ValueError("OffloadLedger.pricing must be a PricingTable or None")
        self._pricing = DEFAULT_PRICING if pricing is None else pricing
        self._idle = _positive("idle_turns", idle_turns)
        self._max_conversations = _positive("max_conversations", max_conversations)
        self._max_offloads = _positive(
            "max_offloads_per_conversation", max_offloads_per_conversation
        )
        provider = tracer_provider or trace.get_tracer_provider()
        self._tracer = provider.get_tracer("seamscope", __version__)
        self._inst = instruments or Instruments(meter_provider)
        self._cap = LabelCap(_positive("label_cap", label_cap))
        self._conversations: OrderedDict[str, _Conversation] = OrderedDict()
        self._tick = 0
        self._lock = threading.RLock()
        self.settlements: list[Settlement] = []
        """Settlements of this process, newest last (bounded to 1000)."""

    # -- inputs ------------------------------------------------------------------

    def _price(self, model: str) -> ModelPrice | None:
        quote = self._pricing.lookup(model)
        return None if quote is None else quote.price

    def record_offload(
        self,
        decision: OffloadGateDecision,
        *,
        conversation_id: str,
        gate_span: SpanContext | None = None,
    ) -> None:
        """Start following a fired offload (a decision that did not fire is ignored)."""
        if not decision.fire or not decision.offload_id:
            return
        due: list[_Due] = []
        with self._lock:
            conv = self._touch(conversation_id, due)
            if len(conv.offloads) >= self._max_offloads:
                _, oldest = conv.offloads.popitem(last=False)
                due.append(self._settlement(conversation_id, oldest, SettleTrigger.EVICTED))
            conv.offloads[decision.offload_id] = _Offload(
                decision.offload_id,
                decision.model_name,
                Decimal(repr(float(decision.output_tokens))),
                decision.stub_tokens,
                decision.net_saving,
                decision.horizon,
                decision.recall_probability,
                gate_span,
            )
        self._emit(due)

    def record_model_call(
        self,
        conversation_id: str,
        *,
        model: str,
        usage: ModelUsage,
        carried: Iterable[str | CarriedStub] | None = None,
    ) -> None:
        """A later model call of the conversation, with its token usage.

        ``carried``: the offloads whose stub this call's prompt carried, by id;
        None means every live offload of the conversation. A
        :class:`CarriedStub` describes an offload this process did not see
        decided (another worker served that turn): its saving and stub cost
        are counted in the realized counters, but only the process that
        recorded the offload settles it.
        """
        due: list[_Due] = []
        price = self._price(model)
        model_label = self._cap(c.ATTR_GEN_AI_REQUEST_MODEL, model)
        with self._lock:
            self._tick += 1
            conv = self._touch(conversation_id, due)
            live = list(conv.offloads.values())
            saving = stub = cache = _ZERO
            if carried is not None:
                wanted: set[str] = set()
                for item in carried:
                    if isinstance(item, CarriedStub):
                        wanted.add(item.offload_id)
                        if item.offload_id not in conv.offloads and price is not None:
                            saving += to_decimal(item.output_tokens) * price.input_rate
                            stub += Decimal(item.stub_tokens) * price.input_rate
                    else:
                        wanted.add(item)
                live = [o for o in live if o.offload_id in wanted]
            if conv.offloads and price is not None:
                for off in live:
                    s = off.output_tokens * price.input_rate
                    k = Decimal(off.stub_tokens) * price.input_rate
                    off.savings += s
                    off.stub_cost += k
                    off.turns += 1
                    saving += s
                    stub += k
                cache = self._cache_disruption(conv, usage, price)
                # a recall since the previous call put its output back into the
                # prompt: the cache disruption is that offload's; otherwise it is
                # shared by the offloads whose stubs this prompt carried.
                recalled = [o for o in conv.offloads.values() if o.recalled_since_call]
                blamed = recalled or live
                if cache > 0 and blamed:
                    share = cache / len(blamed)
                    for off in blamed:
                        off.cache_cost += share
                for off in recalled:
                    off.recalled_since_call = False
            elif not conv.offloads:
                conv.baseline_read += usage.cache_read_tokens
                conv.baseline_input += usage.input_tokens
            active = flag(bool(conv.offloads))
            due.extend(self._expire())
        inst = self._inst
        for kind, tokens in (
            (CacheUsage.READ, usage.cache_read_tokens),
            (CacheUsage.WRITE, usage.cache_write_tokens),
            (CacheUsage.UNCACHED, usage.uncached_tokens),
        ):
            if tokens:
                _add(
                    inst.model_input_tokens,
                    tokens,
                    {
                        c.ATTR_GEN_AI_REQUEST_MODEL: model_label,
                        c.ATTR_USAGE_CACHE: kind.value,
                        c.ATTR_OFFLOAD_ACTIVE: active,
                    },
                )
        if saving > 0:
            _add(
                inst.offload_realized_savings,
                float(saving),
                {c.ATTR_GEN_AI_REQUEST_MODEL: model_label},
            )
        for kind_cost, amount in (
            (OffloadCostKind.STUB_CARRY, stub),
            (OffloadCostKind.CACHE_DISRUPTION, cache),
        ):
            if amount > 0:
                _add(
                    inst.offload_realized_costs,
                    float(amount),
                    {
                        c.ATTR_GEN_AI_REQUEST_MODEL: model_label,
                        c.ATTR_OFFLOAD_COST_KIND: kind_cost.value,
                    },
                )
        self._emit(due)

    @staticmethod
    def _cache_disruption(conv: _Conversation, usage: ModelUsage, price: ModelPrice) -> Decimal:
        if conv.baseline_input == 0 or usage.input_tokens == 0:
            return _ZERO
        expected_read = Decimal(conv.baseline_read) * usage.input_tokens / conv.baseline_input
        shortfall = expected_read - usage.cache_read_tokens
        if shortfall <= 0:
            return _ZERO
        paid_rate = price.cache_write_rate if usage.cache_write_tokens else price.input_rate
        delta = paid_rate - price.cache_read_rate
        return shortfall * delta if delta > 0 else _ZERO

    def record_recall(
        self,
        conversation_id: str,
        offload_id: str,
        *,
        model: str,
        input_tokens: int,
        output_tokens: int,
    ) -> None:
        """The offloaded output was recalled: a real hop at that model's rates."""
        price = self._price(model)
        model_label = self._cap(c.ATTR_GEN_AI_REQUEST_MODEL, model)
        cost = _ZERO
        if price is not None:
            cost = input_tokens * price.input_rate + output_tokens * price.output_rate
        with self._lock:
            conv = self._conversations.get(conversation_id)
            off = None if conv is None else conv.offloads.get(offload_id)
            if off is not None:
                off.recall_cost += cost
                off.recalls += 1
                off.recalled_since_call = True
        _add(self._inst.offload_recalls, 1, {c.ATTR_GEN_AI_REQUEST_MODEL: model_label})
        if cost > 0:
            _add(
                self._inst.offload_realized_costs,
                float(cost),
                {
                    c.ATTR_GEN_AI_REQUEST_MODEL: model_label,
                    c.ATTR_OFFLOAD_COST_KIND: OffloadCostKind.RECALL.value,
                },
            )

    # -- settlement ----------------------------------------------------------

    def settle(
        self, conversation_id: str, *, trigger: SettleTrigger = SettleTrigger.EXPLICIT
    ) -> list[Settlement]:
        """Settle every live offload of a conversation now and forget it."""
        with self._lock:
            conv = self._conversations.pop(conversation_id, None)
            due = (
                []
                if conv is None
                else [self._settlement(conversation_id, o, trigger) for o in conv.offloads.values()]
            )
        self._emit(due)
        return [settlement for settlement, _ in due]

    def end_conversation(self, conversation_id: str) -> list[Settlement]:
        """The conversation ended: settle its offloads."""
        return self.settle(conversation_id, trigger=SettleTrigger.CONVERSATION_END)

    def live_offloads(self, conversation_id: str) -> tuple[str, ...]:
        with self._lock:
            conv = self._conversations.get(conversation_id)
            return () if conv is None else tuple(conv.offloads)

    def __len__(self) -> int:
        return len(self._conversations)

    def _touch(self, conversation_id: str, due: list[_Due]) -> _Conversation:
        conv = self._conversations.get(conversation_id)
        if conv is None:
            conv = _Conversation()
            self._conversations[conversation_id] = conv
            while len(self._conversations) > self._max_conversations:
                old_id, old = self._conversations.popitem(last=False)
                due.extend(
                    self._settlement(old_id, o, SettleTrigger.EVICTED)
                    for o in old.offloads.values()
                )
        else:
            self._conversations.move_to_end(conversation_id)
        conv.last_tick = self._tick
        return conv

    def _expire(self) -> list[_Due]:
        due: list[_Due] = []
        while self._conversations:
            conv_id, conv = next(iter(self._conversations.items()))
            if self._tick - conv.last_tick < self._idle:
                break
            del self._conversations[conv_id]
            due.extend(
                self._settlement(conv_id, o, SettleTrigger.IDLE) for o in conv.offloads.values()
            )
        return due

    @staticmethod
    def _settlement(conversation_id: str, off: _Offload, trigger: SettleTrigger) -> _Due:
        settlement = Settlement(
            offload_id=off.offload_id,
            conversation_id=conversation_id,
            model=off.model,
            trigger=trigger,
            predicted_net_saving=off.predicted,
            realized_savings=off.savings,
            stub_carry_cost=off.stub_cost,
            recall_cost=off.recall_cost,
            cache_disruption_cost=off.cache_cost,
            turns_carried=off.turns,
            recalls=off.recalls,
            horizon=off.horizon,
            recall_probability=off.recall_probability,
        )
        return settlement, off.gate_span

    def _emit(self, due: list[_Due]) -> None:
        for s, gate_span in due:
            try:
                self._emit_one(s, gate_span)
            except Exception as exc:  # telemetry never breaks the loop
                telemetry_error("settle", exc)
            with self._lock:
                self.settlements.append(s)
                del self.settlements[:-1000]

    def _emit_one(self, s: Settlement, gate_span: SpanContext | None) -> None:
        model = self._cap(c.ATTR_GEN_AI_REQUEST_MODEL, s.model)
        _add(
            self._inst.offload_settled,
            1,
            {c.ATTR_GEN_AI_REQUEST_MODEL: model, c.ATTR_OFFLOAD_OUTCOME: s.outcome.value},
        )
        attrs: dict[str, Any] = {
            c.ATTR_OFFLOAD_ID: s.offload_id,
            c.ATTR_GEN_AI_CONVERSATION_ID: s.conversation_id,
            c.ATTR_GEN_AI_REQUEST_MODEL: s.model,
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
        }
        links = [Link(gate_span)] if gate_span is not None and gate_span.is_valid else []
        span = self._tracer.start_span(
            c.SPAN_OFFLOAD_SETTLE, kind=SpanKind.INTERNAL, attributes=attrs, links=links
        )
        span.add_event(c.EVENT_OFFLOAD_SETTLED, {c.ATTR_OFFLOAD_OUTCOME: s.outcome.value})
        span.end()
        log_event(
            "warning" if s.outcome is OffloadOutcome.LOSS else "info",
            c.LOG_OFFLOAD_SETTLED,
            offload_id=s.offload_id,
            model=s.model,
            outcome=s.outcome.value,
            trigger=s.trigger.value,
            predicted_net_saving_usd=float(s.predicted_net_saving),
            realized_net_saving_usd=float(s.realized_net_saving),
            turns_carried=s.turns_carried,
            recalls=s.recalls,
        )
