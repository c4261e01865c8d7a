"""The offload ledger: predicted versus realized offload economics (pure accounting).

The gate decides on priors (horizon H, recall probability p). The ledger
follows every fired offload (by its offload id) through the rest of its
conversation and measures what really happened:

* each later model call that carries the stub instead of the output saves
  the avoided tokens at that call's input rate, and pays for the stub
  (``stub_carry``) at the same rate;
* each recall of the offloaded output costs its real input and output
  tokens at that model's rates (``recall``); after a recall the output is
  back in the conversation, so later calls no longer carry its stub and
  count no saving or stub cost for it;
* a prompt-cache disruption after the offload costs the cache-read tokens
  lost against the conversation's pre-offload hit ratio, priced at the
  difference between the rate they were paid at (cache write or uncached
  input) and the cache-read rate (``cache_disruption``). It is charged to
  the offloads recalled since the previous model call (their output
  re-entered the prompt), else shared by the offloads the call carried.
  With no model call seen before the first offload there is no baseline
  and no disruption is charged (unmeasured is not charged).

A framework's compaction (context editing that clears a tool result, a
summary that replaces history) is followed the same way
(:meth:`OffloadLedger.record_compaction`): its placeholder or summary is the
stub, a re-read of the cleared data is a recall, and a summary's own model
call is a realized cost (``compaction_call``). Every amount says which
mechanism took the content out (``ModelCallAccount.by_mechanism``,
``RecallAccount.mechanism``, ``Settlement.mechanism``).

Each event's realized amounts are handed to the observer as a record
(:class:`~seamscope.decisions.records.ModelCallAccount`,
:class:`~seamscope.decisions.records.RecallAccount`) where they happen, so
the realized counters need no process to see the whole history.

An offload settles at the end of its conversation (:meth:`end_conversation`),
on an explicit :meth:`settle`, or when its conversation has been idle for
``idle_turns`` rounds: it recorded no model call while the ledger recorded
``idle_turns × N`` model calls, N being the number of conversations it
follows (one tick per model call, in any conversation). Measured in rounds,
many interleaved conversations never settle one another early: each sees its
own call about every N ticks. Memory is bounded: at most ``max_conversations``
conversations (the least recently active is settled and evicted) and
``max_offloads_per_conversation`` live offloads each. State is per
conversation; one conversation's events never change another's accounts.

Many workers: an offload kept in an offload store other processes see
(:class:`~seamscope.decisions.OffloadStore` with ``shared`` true, given as
``store=``) is settled from the store, not from this process's view. Every
model call and recall appends what it realized for each store-held offload
to the store (:class:`~seamscope.decisions.records.AccountDelta`), whichever
worker served it; a stub of an offload another worker made, found in the
prompt (a :class:`~seamscope.decisions.records.CarriedStub` carrying the
store's record), is followed here from then on. Such an offload settles
exactly once fleet-wide, through the store's atomic claim, from the sum of
every worker's deltas: at conversation end or on an explicit settle (by
whichever worker is asked, for the conversation's offloads the store holds,
made here or not), and when idle by wall-clock time (no activity anywhere
for ``idle_seconds``, or past the store's retention), which any worker's
next model call finds (at most every ``idle_seconds / 4``). Rounds of one
process and its bounds only make it forget its local view. A process that
exits with live offloads leaves them to whichever worker settles them. Left
to this process's view: the cache baseline (a worker that adopts an offload
has seen no call before it: unmeasured, not charged) and shadow settlements.

Shadow settlement: a fired decision that carries a shadow configuration's
verdict (``OffloadGate(shadow=...)``), or one that did not fire while its
shadow would have (give it to :meth:`OffloadLedger.record_offload` too),
makes the ledger follow that conversation under the shadow's choices as
well, on the course the conversation really takes, as ``seamscope whatif``
re-settles a recorded conversation under the shadow's configuration:

* the offloads that fire either way, and the framework's compactions, are
  followed by a second set of accounts that sees every later model call
  (carrying what the live prompt carried), every recall and the cache
  behaviour, but not the offloads only the live gate fired (their output
  would have stayed in the prompt, never recalled: a model call's output,
  charged with its first recall, goes to the shadow's first recall of that
  call when the first was of such an offload): **exact**;
* an offload only the shadow would have fired is carried by every later
  model call of the conversation (its output's tokens saved, the stub the
  loop would send paid, at that call's input rate; ``record_offload``'s
  ``stub_tokens``, else the shadow's configured size); its recall never
  happened, so one recall of the whole output at the shadow's recall
  probability is **expected**, within the worst and best of a recall by
  any later call (which ends the carrying) or none (the cache is not
  modelled);

and when the conversation's live offloads settle, a
:class:`~seamscope.decisions.records.ShadowSettlement` goes to the
observer (``on_shadow_settled``). The shadow's accounts start as a copy of
the conversation's at its first shadowed decision. An offload evicted
alone (``max_offloads_per_conversation``) leaves the shadow's accounts
following it until the conversation settles.

Money is exact :class:`~decimal.Decimal` USD; no I/O, no telemetry import.
"""

from __future__ import annotations

import logging
import math
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from decimal import Decimal

from seamscope.decisions import _checks as _c
from seamscope.decisions._observer import DecisionObserver, check_observer, guard_observer
from seamscope.decisions._pricing import DEFAULT_PRICING, ModelPrice, PricingTable, to_decimal
from seamscope.decisions._store import OffloadStore
from seamscope.decisions.records import (
    AccountDelta,
    CarriedStub,
    ClaimedOffload,
    Compaction,
    CompactionAccount,
    ModelCallAccount,
    ModelUsage,
    OffloadGateDecision,
    OffloadMechanism,
    RecallAccount,
    Settlement,
    SettleTrigger,
    ShadowOffload,
    ShadowSettlement,
    ShadowVerdict,
)

__all__ = ["OffloadLedger"]

_ZERO = Decimal(0)
_log = logging.getLogger("seamscope.decisions")
_MAX_KEPT_SETTLEMENTS = 1000


@dataclass(slots=True)
class _Offload:  # mutable accounting of one live offload
    offload_id: str
    model: str
    output_tokens: Decimal
    stub_tokens: float
    predicted: Decimal
    horizon: int
    recall_probability: float
    link: object
    mechanism: OffloadMechanism = OffloadMechanism.SEAMSCOPE_GATE
    compaction_cost: Decimal = _ZERO
    savings: Decimal = _ZERO
    stub_cost: Decimal = _ZERO
    recall_cost: Decimal = _ZERO
    cache_cost: Decimal = _ZERO
    turns: int = 0
    recalls: int = 0
    recalled: bool = False
    recalled_since_call: bool = False
    tool_name: str | None = None
    remaining: int = 0
    stored: bool = False  # a compaction whose record a shared store keeps

    @property
    def held(self) -> bool:
        """Whether a shared store keeps its record (the gate's offloads, a
        compaction recorded with a store): its accounts go there, and it
        settles through the store's claim."""
        return self.stored or self.mechanism is OffloadMechanism.SEAMSCOPE_GATE


def _mechanism_of(offload_id: str) -> OffloadMechanism:
    """The mechanism of an offload a store keeps, read from its id: a
    framework's compaction is kept under ``{mechanism}:{...}`` (a Deep Agents
    eviction's ``deepagents_eviction:{tool_call_id}``); any other id is the
    gate's."""
    prefix, sep, _ = offload_id.partition(":")
    if sep:
        try:
            return OffloadMechanism(prefix)
        except ValueError:
            pass
    return OffloadMechanism.SEAMSCOPE_GATE


@dataclass(slots=True)
class _ShadowNew:  # an offload only the shadow fires: its expected value so far
    model: str
    tool_name: str | None
    output_tokens: float
    stub_tokens: Decimal
    recall_probability: float
    hop: Decimal
    savings: Decimal = _ZERO
    stub_cost: Decimal = _ZERO
    turns: int = 0
    partial_low: Decimal = _ZERO  # the lowest / highest running net over later calls
    partial_high: Decimal = _ZERO

    def frozen(self) -> ShadowOffload:
        return ShadowOffload(
            self.model,
            self.tool_name,
            self.output_tokens,
            self.recall_probability,
            self.savings,
            self.stub_cost,
            self.hop,
            self.turns,
            self.partial_low,
            self.partial_high,
        )


@dataclass(slots=True)
class _Conversation:
    offloads: OrderedDict[str, _Offload] = field(default_factory=OrderedDict)
    baseline_read: int = 0
    baseline_input: int = 0
    last_tick: int = 0
    shadow: _Conversation | None = None  # the shadow's exact accounts
    shadow_new: list[_ShadowNew] = field(default_factory=list)
    shadow_dropped: list[str] = field(default_factory=list)
    shadow_unclaimed: int = 0  # a model call's output its recalls owe the shadow (see recall)
    store: OffloadStore | None = None  # a shared store keeps this conversation's offloads

    def shadowed(self) -> _Conversation:
        """The shadow's accounts, started as a copy of this conversation's."""
        if self.shadow is None:
            self.shadow = _Conversation(
                OrderedDict((k, replace(o)) for k, o in self.offloads.items()),
                self.baseline_read,
                self.baseline_input,
            )
        return self.shadow


def _contained(method: str, field: str, value: object) -> None:
    _log.warning(
        "OffloadLedger.%s: %s of type %s contained (not raised into the loop)",
        method,
        field,
        type(value).__qualname__,
    )


def _text(method: str, field: str, value: object) -> str:
    """A str field given another type is used as its ``str()``, with a WARNING."""
    if isinstance(value, str):
        return value
    _contained(method, field, value)
    try:
        return str(value)
    except Exception:
        return "?"


def _key(method: str, conversation_id: object) -> str:
    return _text(method, "conversation_id", conversation_id)


def _tokens(method: str, field: str, value: object) -> int:
    """A token count that is not an int >= 0 counts as 0, with a WARNING."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    _contained(method, field, value)
    return 0


def _size(method: str, field: str, value: object) -> float:
    """An estimated token size (chars / 4, unrounded): a finite number >= 0,
    else 0 with a WARNING."""
    if (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and value == value
        and 0 <= value < float("inf")
    ):
        return value
    _contained(method, field, value)
    return 0


def _positive(name: str, value: object) -> int:
    return _c.tokens("OffloadLedger", name, value, minimum=1)


def _settlement(conversation_id: str, off: _Offload, trigger: SettleTrigger) -> Settlement:
    return Settlement(
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
        link=off.link,
        mechanism=off.mechanism,
        compaction_cost=off.compaction_cost,
        tool_name=off.tool_name,
        remaining_turns=off.remaining,
    )


def _account(
    conv: _Conversation,
    price: ModelPrice | None,
    usage: ModelUsage,
    carried: Iterable[str | CarriedStub] | None,
) -> tuple[bool, Decimal, Decimal, Decimal, dict[OffloadMechanism, list[Decimal]], list[_Offload]]:
    """One model call's accounting on ``conv``'s offloads (see
    :meth:`OffloadLedger.record_model_call`): (active, saving, stub carry,
    cache disruption, shares by mechanism, the offloads it carried)."""
    live = [o for o in conv.offloads.values() if not o.recalled]
    saving = stub = cache = _ZERO
    for off in conv.offloads.values():
        off.remaining += 1
    shares: dict[OffloadMechanism, list[Decimal]] = {}
    if carried is not None:
        wanted: set[str] = set()
        for item in carried:
            if isinstance(item, CarriedStub):
                wanted.add(item.offload_id)
                if item.offload_id not in conv.offloads and price is not None:
                    # an offload decided elsewhere
                    s = to_decimal(item.output_tokens) * price.input_rate
                    k = to_decimal(item.stub_tokens) * price.input_rate
                    saving += s
                    stub += k
                    share = shares.setdefault(_mechanism_of(item.offload_id), [_ZERO, _ZERO, _ZERO])
                    share[0] += s
                    share[1] += k
            else:
                wanted.add(item)
        live = [o for o in conv.offloads.values() if o.offload_id in wanted]
    active = bool(conv.offloads)
    if conv.offloads and price is not None:
        for off in live:
            s = off.output_tokens * price.input_rate
            k = to_decimal(off.stub_tokens) * price.input_rate
            off.savings += s
            off.stub_cost += k
            off.turns += 1
            saving += s
            stub += k
            share = shares.setdefault(off.mechanism, [_ZERO, _ZERO, _ZERO])
            share[0] += s
            share[1] += k
        cache = cache_disruption(conv.baseline_read, conv.baseline_input, usage, price)
        # a recall since the previous call put its output back into the
        # prompt: the cache disruption is that offload's; otherwise it is
        # shared by the offloads whose stubs this prompt carried.
        recalled = [o for o in conv.offloads.values() if o.recalled_since_call]
        blamed = recalled or live
        if cache > 0 and blamed:
            part = cache / len(blamed)
            for off in blamed:
                off.cache_cost += part
                shares.setdefault(off.mechanism, [_ZERO, _ZERO, _ZERO])[2] += part
        else:
            cache = _ZERO
        for off in recalled:
            off.recalled_since_call = False
    elif not conv.offloads:
        conv.baseline_read += usage.cache_read_tokens
        conv.baseline_input += usage.input_tokens
    return active, saving, stub, cache, shares, live


def cache_disruption(
    baseline_read: int, baseline_input: int, usage: ModelUsage, price: ModelPrice
) -> Decimal:
    """The cache-read shortfall of one call against a baseline hit ratio, priced
    at the difference between the rate it was paid at and the cache-read rate."""
    if baseline_input == 0 or usage.input_tokens == 0:
        return _ZERO
    expected_read = Decimal(baseline_read) * usage.input_tokens / baseline_input
    shortfall = expected_read - usage.cache_read_tokens
    if shortfall <= 0:
        return _ZERO
    paid_rate = price.cache_write_rate if usage.cache_write_tokens else price.input_rate
    delta = paid_rate - price.cache_read_rate
    return shortfall * delta if delta > 0 else _ZERO


@dataclass(frozen=True, slots=True)
class _Claim:
    """An offload a shared store keeps, to settle through the store's claim
    (the whole fleet's accounts); ``trigger`` None: IDLE, or EXPIRED when its
    retention ended."""

    conversation_id: str | None
    offload_id: str
    trigger: SettleTrigger | None
    store: OffloadStore
    local: _Offload | None = None


_Due = Settlement | _Claim
_Snapshot = dict[str, tuple[Decimal, Decimal, Decimal, int, int]]


def _shared(store: OffloadStore | None) -> OffloadStore | None:
    """``store`` when it is a store other processes see, else None."""
    if store is None:
        return None
    try:
        # read ``shared`` alone: the runtime Protocol check walks the class each call
        return store if getattr(store, "shared", False) is True else None
    except Exception:
        return None


def _adopt(conv: _Conversation, stubs: Iterable[object], *, recalled: bool) -> None:
    """Follow, from here on, the store-held offloads another worker made whose
    stub this prompt holds (their accounts from here go to the store)."""
    for item in stubs:
        if not isinstance(item, CarriedStub) or item.offload is None:
            continue
        if item.offload_id in conv.offloads:
            continue
        rec = item.offload
        conv.offloads[item.offload_id] = _Offload(
            rec.offload_id,
            rec.model,
            to_decimal(rec.output_tokens),
            rec.stub_tokens,
            rec.predicted_net_saving,
            rec.horizon,
            rec.recall_probability,
            None,
            _mechanism_of(rec.offload_id),
            tool_name=rec.tool_name,
            recalled=recalled,
            stored=True,
        )


def _snapshot(conv: _Conversation) -> _Snapshot:
    return {
        k: (o.savings, o.stub_cost, o.cache_cost, o.turns, o.remaining)
        for k, o in conv.offloads.items()
        if o.held
    }


def _deltas(before: _Snapshot, conv: _Conversation) -> list[AccountDelta]:
    """What one model call added to each store-held offload's accounts."""
    out: list[AccountDelta] = []
    for key, (savings, stub, cache, turns, remaining) in before.items():
        off = conv.offloads.get(key)
        if off is None:
            continue
        delta = AccountDelta(
            key,
            savings=off.savings - savings,
            stub_cost=off.stub_cost - stub,
            cache_cost=off.cache_cost - cache,
            turns=off.turns - turns,
            remaining=off.remaining - remaining,
        )
        if delta.turns or delta.remaining or delta.cache_cost:
            out.append(delta)
    return out


def _claimed(claim: _Claim, got: ClaimedOffload, trigger: SettleTrigger) -> Settlement:
    rec, totals = got.offload, got.totals
    return Settlement(
        offload_id=rec.offload_id,
        conversation_id=rec.conversation_id,
        model=rec.model,
        trigger=trigger,
        predicted_net_saving=rec.predicted_net_saving,
        realized_savings=totals.savings,
        stub_carry_cost=totals.stub_cost,
        recall_cost=totals.recall_cost,
        cache_disruption_cost=totals.cache_cost,
        turns_carried=totals.turns,
        recalls=totals.recalls,
        horizon=rec.horizon,
        recall_probability=rec.recall_probability,
        link=None if claim.local is None else claim.local.link,
        mechanism=_mechanism_of(rec.offload_id),
        tool_name=rec.tool_name,
        remaining_turns=totals.remaining,
    )


class OffloadLedger:
    """Follows fired offloads and settles their realized net saving.

    Thread-safe. Every realized amount and every settlement goes to
    ``observer`` as a record (the no-op default records nothing); the
    observer is called outside the ledger's lock. Construction fails with a
    ValueError naming the field: ``pricing`` a PricingTable or None, the
    three bounds ints >= 1, ``observer`` a DecisionObserver or None.
    """

    def __init__(
        self,
        *,
        pricing: PricingTable | None = None,
        observer: DecisionObserver | None = None,
        idle_turns: int = 50,
        max_conversations: int = 10_000,
        max_offloads_per_conversation: int = 256,
        idle_seconds: float = 900.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if pricing is not None and not isinstance(pricing, PricingTable):
            raise _c.fail("OffloadLedger", "pricing", "a PricingTable or None", pricing)
        check_observer("OffloadLedger", observer)
        self._pricing = DEFAULT_PRICING if pricing is None else pricing
        self._idle = _positive("idle_turns", idle_turns)
        self._max_conversations = _positive("max_conversations", max_conversations)
        self._max_offloads = _positive(
            "max_offloads_per_conversation", max_offloads_per_conversation
        )
        if (
            isinstance(idle_seconds, bool)
            or not isinstance(idle_seconds, int | float)
            or not math.isfinite(idle_seconds)
            or idle_seconds <= 0
        ):
            raise _c.fail("OffloadLedger", "idle_seconds", "a finite number > 0", idle_seconds)
        if not callable(clock):
            raise _c.fail("OffloadLedger", "clock", "a callable returning Unix seconds", clock)
        self._idle_seconds = float(idle_seconds)
        self._clock = clock
        self._swept: weakref.WeakKeyDictionary[object, float] = weakref.WeakKeyDictionary()
        self._observer = guard_observer(observer)
        self._conversations: OrderedDict[str, _Conversation] = OrderedDict()
        self._tick = 0
        self._lock = threading.RLock()
        self.settlements: list[Settlement] = []
        """Settlements of this ledger, newest last (the latest 1000)."""
        self.shadow_settlements: list[ShadowSettlement] = []
        """Shadow settlements of this ledger, newest last (the latest 1000)."""
        self._shadow_due: list[ShadowSettlement] = []

    def _price(self, model: str) -> ModelPrice | None:
        quote = self._pricing.lookup(model)
        return None if quote is None else quote.price

    # -- inputs ------------------------------------------------------------------

    def record_offload(
        self,
        decision: OffloadGateDecision,
        *,
        conversation_id: str,
        link: object = None,
        stub_tokens: float | None = None,
        tool_name: str | None = None,
        store: OffloadStore | None = None,
    ) -> None:
        """Start following a fired offload (a decision that did not fire is
        ignored, unless its shadow would have fired: see the module docstring).

        ``link``: what the observer's ``end_offload_gate`` returned for this
        decision; the settlement carries it back. ``stub_tokens``: the size of
        the stub really sent (chars / 4); None: the gate's assumed size.
        ``tool_name``: the tool whose output it is (on the settlement; None:
        the shadow verdict's, if any). ``store``: the offload store that keeps
        it; when other processes see it, the offload's accounts accumulate
        there and it is settled through the store's claim (exactly once,
        fleet-wide: see :meth:`settle`).
        """
        if not isinstance(decision, OffloadGateDecision):
            _contained("record_offload", "decision", decision)
            return
        shadow = decision.shadow if isinstance(decision.shadow, ShadowVerdict) else None
        if tool_name is not None:
            tool_name = _text("record_offload", "tool_name", tool_name)
        elif shadow is not None:
            tool_name = shadow.tool_name
        if not decision.fire or not decision.offload_id:
            if shadow is not None and shadow.fire:
                key = _key("record_offload", conversation_id)
                self._shadow_only(key, decision, shadow, tool_name, stub_tokens)
            return
        conversation_id = _key("record_offload", conversation_id)
        offload = _Offload(
            decision.offload_id,
            decision.model_name,
            to_decimal(decision.output_tokens),
            decision.stub_tokens
            if stub_tokens is None
            else _size("record_offload", "stub_tokens", stub_tokens),
            decision.net_saving,
            decision.horizon,
            decision.recall_probability,
            link,
            tool_name=tool_name,
        )
        due: list[_Due] = []
        shared = _shared(store)
        with self._lock:
            if shadow is not None:  # the shadow's accounts start before this offload
                self._touch(conversation_id, due).shadowed()
            if shared is not None:
                self._touch(conversation_id, due).store = shared
            _, more = self._follow(conversation_id, offload, again=True)
            due.extend(more)
            conv = self._conversations.get(conversation_id)
            if shadow is not None and conv is not None:
                if shadow.fire:
                    conv.shadowed().offloads[offload.offload_id] = replace(
                        offload,
                        predicted=shadow.net_saving,
                        horizon=shadow.horizon,
                        recall_probability=shadow.recall_probability,
                    )
                elif len(conv.shadow_dropped) < self._max_offloads:
                    conv.shadow_dropped.append(offload.offload_id)
        self._settled(due)

    def _shadow_only(
        self,
        conversation_id: str,
        decision: OffloadGateDecision,
        shadow: ShadowVerdict,
        tool_name: str | None,
        stub_tokens: float | None = None,
    ) -> None:
        """Follow an offload only the shadow would have fired (expected value):
        carried at ``stub_tokens`` (the stub the loop would send; None: the
        shadow's configured size), recalled at its real size."""
        price = self._price(decision.model_name)
        hop = _ZERO
        if price is not None:  # a recall brings the whole output back
            hop = (
                to_decimal(decision.output_tokens) * price.input_rate
                + shadow.recall_output_tokens * price.output_rate
            )
        new = _ShadowNew(
            decision.model_name,
            tool_name,
            decision.output_tokens,
            to_decimal(shadow.stub_tokens if stub_tokens is None else stub_tokens),
            shadow.recall_probability,
            hop,
        )
        due: list[_Due] = []
        with self._lock:
            conv = self._touch(conversation_id, due)
            conv.shadowed()
            if len(conv.shadow_new) >= self._max_offloads:
                del conv.shadow_new[0]
            conv.shadow_new.append(new)
        self._settled(due)

    def record_compaction(
        self,
        compaction: Compaction,
        *,
        conversation_id: str,
        link: object = None,
        store: OffloadStore | None = None,
    ) -> None:
        """Start following a framework's compaction like a fired offload.

        Its removed tokens are what each later call carrying its placeholder
        (or summary) saves, ``kept_tokens`` what that call pays for it, its
        re-reads are recalls (:meth:`record_recall` with its id) and its own
        model call (``cost``) is a realized cost now. The prediction is the
        gate's formula on its sizes, minus that cost (0 when unpriced). A
        compaction id already followed is ignored (a compaction recomputed
        on every call is recorded once). ``store``: a shared offload store
        that keeps the compaction's record under its id (``{mechanism}:...``,
        written there by the adapter): its accounts accumulate there and it
        settles through the store's claim, as the gate's offloads do, so a
        worker that did not see it made prices its stub and its re-reads.
        """
        if not isinstance(compaction, Compaction):
            _contained("record_compaction", "compaction", compaction)
            return
        conversation_id = _key("record_compaction", conversation_id)
        predicted = compaction.predicted
        offload = _Offload(
            compaction.compaction_id,
            compaction.model,
            to_decimal(max(0.0, float(compaction.removed_tokens))),
            max(0.0, float(compaction.kept_tokens)),
            (_ZERO if predicted is None else predicted.net_saving) - compaction.cost,
            0 if predicted is None else predicted.horizon,
            0.0 if predicted is None else predicted.recall_probability,
            link,
            compaction.mechanism,
            compaction.cost,
        )
        shared = _shared(store)
        due: list[_Due] = []
        with self._lock:
            if shared is not None:
                offload.stored = True
                self._touch(conversation_id, due).store = shared
            followed, more = self._follow(conversation_id, offload, again=False)
            due.extend(more)
            conv = self._conversations.get(conversation_id)
            if followed and conv is not None and conv.shadow is not None:
                conv.shadow.offloads.setdefault(offload.offload_id, replace(offload))
        if not followed:
            self._settled(due)
            return
        if compaction.cost > 0:
            self._observer.on_offload_accounted(
                CompactionAccount(
                    conversation_id,
                    compaction.compaction_id,
                    compaction.model,
                    compaction.mechanism,
                    compaction.cost,
                )
            )
        self._settled(due)

    def record_model_call(
        self,
        conversation_id: str,
        *,
        model: str,
        usage: ModelUsage,
        carried: Iterable[str | CarriedStub] | None = None,
        present: Iterable[CarriedStub] = (),
        store: OffloadStore | None = None,
    ) -> ModelCallAccount:
        """A later model call of the conversation, with its token usage.

        ``carried``: the offloads whose stub this call's prompt carried, by id;
        None means every live offload of the conversation that has not been
        recalled. One id (a str) or one CarriedStub given alone is read as
        that one offload, never as one id per character. A
        :class:`CarriedStub` describes an offload this process did not see
        decided (another worker served that turn): its saving and stub
        cost are realized here; with its ``offload`` record (from a shared
        ``store``) this ledger follows it from now on as its own, its
        accounts go to the store and any worker can settle it.
        ``present``: store-held offloads whose stub the prompt holds but whose
        output a recall brought back (not carried; their remaining turns count).

        With a shared ``store``, idle offloads are settled by wall-clock time
        (``idle_seconds`` without activity anywhere in the fleet, or past
        their retention), checked at most every ``idle_seconds / 4`` here.
        """
        conversation_id = _key("record_model_call", conversation_id)
        model = _text("record_model_call", "model", model)
        if not isinstance(usage, ModelUsage):
            _contained("record_model_call", "usage", usage)
            usage = ModelUsage()
        due: list[_Due] = []
        price = self._price(model)
        shared = _shared(store)
        with self._lock:
            self._tick += 1
            conv = self._touch(conversation_id, due)
            if isinstance(carried, str | CarriedStub):
                carried = (carried,)
            if shared is not None:
                conv.store = shared
                if carried is not None:
                    carried = tuple(carried)
                    _adopt(conv, carried, recalled=False)
                _adopt(conv, present, recalled=True)
            before = _snapshot(conv) if conv.store is not None else None
            conv.shadow_unclaimed = 0  # a new model call: its recalls are its own
            active, saving, stub, cache, shares, live = _account(conv, price, usage, carried)
            carried_ids = tuple(o.offload_id for o in live) if active else ()
            carried_stubs = tuple(float(o.stub_tokens) for o in live) if active else ()
            if conv.shadow is not None:  # carrying what the live prompt carried
                _account(conv.shadow, price, usage, carried_ids)
            if conv.shadow_new and price is not None:
                for new in conv.shadow_new:
                    saving = to_decimal(new.output_tokens) * price.input_rate
                    stub_cost = new.stub_tokens * price.input_rate
                    new.savings += saving
                    new.stub_cost += stub_cost
                    running = new.savings - new.stub_cost
                    if not new.turns or running < new.partial_low:
                        new.partial_low = running
                    if not new.turns or running > new.partial_high:
                        new.partial_high = running
                    new.turns += 1
            written = conv.store
            deltas = [] if before is None else _deltas(before, conv)
            due.extend(self._expire(conversation_id))
        account = ModelCallAccount(
            conversation_id,
            model,
            usage,
            active,
            saving,
            stub,
            cache,
            tuple((m, v[0], v[1], v[2]) for m, v in shares.items() if any(v)),
            carried_ids,
            carried_stubs,
        )
        self._observer.on_offload_accounted(account)
        if written is not None and deltas:
            self._write(written, deltas)
        if shared is not None:
            due.extend(self._sweep(shared))
        self._settled(due)
        return account

    def record_recall(
        self,
        conversation_id: str,
        offload_id: str,
        *,
        model: str,
        input_tokens: float,
        output_tokens: int,
        store: OffloadStore | None = None,
        tool_call_id: str | None = None,
    ) -> RecallAccount:
        """The offloaded output was recalled: a real hop at that model's rates
        (``tool_call_id``: the call that brought it back, on the record).

        From now on its output is in the conversation again: later model
        calls carry no stub for it (unless ``carried`` names it). With a
        shared ``store`` the recall's cost is added to the offload's accounts
        there, whichever worker made the offload.
        """
        conversation_id = _key("record_recall", conversation_id)
        offload_id = _text("record_recall", "offload_id", offload_id)
        model = _text("record_recall", "model", model)
        input_tokens = _size("record_recall", "input_tokens", input_tokens)
        output_tokens = _tokens("record_recall", "output_tokens", output_tokens)
        price = self._price(model)
        cost = _ZERO
        if price is not None:
            cost = to_decimal(input_tokens) * price.input_rate + output_tokens * price.output_rate
        mechanism = _mechanism_of(offload_id)  # an offload followed elsewhere
        held = True
        with self._lock:
            conv = self._conversations.get(conversation_id)
            off = None if conv is None else conv.offloads.get(offload_id)
            shadow = None if conv is None or conv.shadow is None else conv.shadow
            shadowed = None if shadow is None else shadow.offloads.get(offload_id)
            shadow_cost = cost
            if conv is not None and shadow is not None:
                # parallel recalls of one model call: its output is charged with the
                # first; an offload only the live gate made is never recalled in the
                # shadow's course, so the shadow's first recall that happens takes it
                if shadowed is None and offload_id in conv.shadow_dropped:
                    conv.shadow_unclaimed += output_tokens
                elif shadowed is not None and conv.shadow_unclaimed:
                    if price is not None:
                        shadow_cost += conv.shadow_unclaimed * price.output_rate
                    conv.shadow_unclaimed = 0
            for followed, charged in ((off, cost), (shadowed, shadow_cost)):
                if followed is not None:
                    followed.recall_cost += charged
                    followed.recalls += 1
                    followed.recalled = True
                    followed.recalled_since_call = True
            if off is not None:
                mechanism, held = off.mechanism, off.held
            written = _shared(store) or (None if conv is None else conv.store)
        account = RecallAccount(
            conversation_id,
            offload_id,
            model,
            input_tokens,
            output_tokens,
            cost,
            mechanism,
            tool_call_id if isinstance(tool_call_id, str) and tool_call_id else None,
        )
        self._observer.on_offload_accounted(account)
        if written is not None and held:
            self._write(written, [AccountDelta(offload_id, recall_cost=cost, recalls=1)])
        return account

    # -- settlement ----------------------------------------------------------

    def settle(
        self,
        conversation_id: str,
        *,
        trigger: SettleTrigger = SettleTrigger.EXPLICIT,
        store: OffloadStore | None = None,
    ) -> list[Settlement]:
        """Settle every live offload of a conversation now and forget it.

        With a shared ``store`` (or one its offloads were recorded with), the
        conversation's offloads the store holds are settled too, whichever
        worker made them, each through the store's claim: from the whole
        fleet's accounts, and only by the first worker that claims it (the
        others return no settlement for it).
        """
        shared = _shared(store)
        with self._lock:
            conv = self._conversations.pop(conversation_id, None)
            due = [] if conv is None else self._drop(conversation_id, conv, trigger)
            backing = shared or (None if conv is None else conv.store)
        if backing is not None:
            known = {d.offload_id for d in due}
            try:
                held = [o.offload_id for o in backing.offloads(conversation_id)]
            except Exception as exc:
                self._failed("offloads", exc)
                held = []
            due.extend(_Claim(conversation_id, k, trigger, backing) for k in held if k not in known)
        return self._settled(due)

    def end_conversation(
        self, conversation_id: str, *, store: OffloadStore | None = None
    ) -> list[Settlement]:
        """The conversation ended: settle its offloads (see :meth:`settle`)."""
        return self.settle(conversation_id, trigger=SettleTrigger.CONVERSATION_END, store=store)

    def settle_offload(
        self,
        conversation_id: str,
        offload_id: str,
        *,
        trigger: SettleTrigger = SettleTrigger.EXPLICIT,
        store: OffloadStore | None = None,
    ) -> list[Settlement]:
        """Settle one offload now (an offload store dropped its content: its
        retention ended, or its size bound made room) and stop following it."""
        due: list[_Due] = []
        shared = _shared(store)
        with self._lock:
            conv = self._conversations.get(conversation_id)
            if conv is None or offload_id not in conv.offloads:
                # the bound of a store shared by many conversations dropped it
                for key, other in self._conversations.items():
                    if offload_id in other.offloads:
                        conversation_id, conv = key, other
                        break
            off = None if conv is None else conv.offloads.pop(offload_id, None)
            backing = shared or (None if conv is None else conv.store)
            if backing is not None:
                due.append(_Claim(conversation_id, offload_id, trigger, backing, off))
            elif off is not None:
                due.append(_settlement(conversation_id, off, trigger))
        return self._settled(due)

    def live_offloads(self, conversation_id: str) -> tuple[str, ...]:
        """The offload ids the ledger still follows in this conversation."""
        with self._lock:
            conv = self._conversations.get(conversation_id)
            return () if conv is None else tuple(conv.offloads)

    def __len__(self) -> int:
        return len(self._conversations)

    def _follow(
        self, conversation_id: str, offload: _Offload, *, again: bool
    ) -> tuple[bool, list[_Due]]:
        """Start following ``offload`` in its conversation (its oldest live offload
        evicted past the bound). An id already followed is replaced when
        ``again``, else left as it is (False). Returns the settlements due."""
        due: list[_Due] = []
        with self._lock:
            conv = self._touch(conversation_id, due)
            if offload.offload_id in conv.offloads and not again:
                return False, due
            if len(conv.offloads) >= self._max_offloads:
                _, oldest = conv.offloads.popitem(last=False)
                if conv.store is None or not oldest.held:
                    due.append(_settlement(conversation_id, oldest, SettleTrigger.EVICTED))
                # a store-held one is only forgotten here: the store settles it
            conv.offloads[offload.offload_id] = offload
        return True, due

    def _touch(self, conversation_id: str, due: list[_Due]) -> _Conversation:
        conv = self._conversations.get(conversation_id)
        if conv is None:
            conv = _Conversation()
            self._conversations[conversation_id] = conv
            while len(self._conversations) > self._max_conversations:
                old_id, old = self._conversations.popitem(last=False)
                due.extend(self._drop(old_id, old, SettleTrigger.EVICTED))
        else:
            self._conversations.move_to_end(conversation_id)
        conv.last_tick = self._tick
        return conv

    def _expire(self, current: str) -> list[_Due]:
        due: list[_Due] = []
        while self._conversations:
            conv_id, conv = next(iter(self._conversations.items()))
            # idle = missed ``idle_turns`` rounds of the live conversations: with
            # N conversations taking turns, each sees its own call every ~N ticks
            window = self._idle * len(self._conversations)
            if conv_id == current or self._tick - conv.last_tick < window:
                break
            del self._conversations[conv_id]
            due.extend(self._drop(conv_id, conv, SettleTrigger.IDLE))
        return due

    def _drop(self, conv_id: str, conv: _Conversation, trigger: SettleTrigger) -> list[_Due]:
        """The settlements of a conversation no longer followed (its shadow
        settlement queued for :meth:`_settled`); under the lock. A store-held
        offload is claimed through its store when the conversation ends or is
        settled on purpose; forgotten here otherwise (idle by this process's
        rounds, evicted from its bounds): the fleet settles it by wall-clock
        time."""
        due: list[_Due] = []
        for o in conv.offloads.values():
            if conv.store is None or not o.held:
                due.append(_settlement(conv_id, o, trigger))
            elif trigger in (SettleTrigger.CONVERSATION_END, SettleTrigger.EXPLICIT):
                due.append(_Claim(conv_id, o.offload_id, trigger, conv.store, o))
        if conv.shadow is not None or conv.shadow_new:
            exact = () if conv.shadow is None else conv.shadow.offloads.values()
            self._shadow_due.append(
                ShadowSettlement(
                    conv_id,
                    trigger,
                    sum((s.realized_net_saving for s in due if isinstance(s, Settlement)), _ZERO),
                    tuple(_settlement(conv_id, o, trigger) for o in exact),
                    tuple(n.frozen() for n in conv.shadow_new),
                    tuple(conv.shadow_dropped),
                )
            )
        return due

    def _failed(self, operation: str, exc: BaseException) -> None:
        """An offload store that failed: logged, and told to the observer
        (``on_store_failed``, when it has it); never raised."""
        _log.warning(
            "offload store %s failed (%s): contained, not raised into the loop",
            operation,
            type(exc).__qualname__,
        )
        hook = getattr(self._observer, "on_store_failed", None)
        if hook is not None:
            hook(operation, type(exc).__qualname__)

    def _write(self, store: OffloadStore, deltas: list[AccountDelta]) -> None:
        try:
            store.add(deltas)
        except Exception as exc:
            self._failed("add", exc)

    def _sweep(self, store: OffloadStore) -> list[_Due]:
        """The store's idle and expired offloads to claim, at most every
        ``idle_seconds / 4`` per store."""
        now = self._clock()
        with self._lock:
            last = self._swept.get(store)
            if last is not None and now - last < self._idle_seconds / 4:
                return []
            self._swept[store] = now
        try:
            ids = store.due(idle_since=now - self._idle_seconds, now=now)
        except Exception as exc:
            self._failed("due", exc)
            return []
        due: list[_Due] = []
        with self._lock:
            for offload_id in ids:
                local = None
                for conv in self._conversations.values():
                    if offload_id in conv.offloads:
                        local = conv.offloads.pop(offload_id)
                        break
                due.append(_Claim(None, offload_id, None, store, local))
        return due

    def _claim(self, claim: _Claim) -> Settlement | None:
        try:
            got = claim.store.claim(claim.offload_id)
        except Exception as exc:
            self._failed("claim", exc)
            return None
        if got is None:  # another worker settled it
            return None
        trigger = claim.trigger
        if trigger is None:
            expires = got.offload.expires_at
            expired = expires is not None and expires <= self._clock()
            trigger = SettleTrigger.EXPIRED if expired else SettleTrigger.IDLE
        return _claimed(claim, got, trigger)

    def _settled(self, pending: list[_Due]) -> list[Settlement]:
        due: list[Settlement] = []
        for item in pending:
            settled = item if isinstance(item, Settlement) else self._claim(item)
            if settled is not None:
                price = self._price(settled.model)  # the rates it was priced with, on record
                due.append(settled if price is None else replace(settled, rates=price.rates))
        shadows: list[ShadowSettlement] = []
        if self._shadow_due:
            with self._lock:
                shadows, self._shadow_due = self._shadow_due, []
                self.shadow_settlements.extend(shadows)
                del self.shadow_settlements[:-_MAX_KEPT_SETTLEMENTS]
        if due:
            with self._lock:
                self.settlements.extend(due)
                del self.settlements[:-_MAX_KEPT_SETTLEMENTS]
            for settlement in due:
                self._observer.on_offload_settled(settlement)
        if shadows:
            hook = getattr(self._observer, "on_shadow_settled", None)
            for shadow in shadows:
                if hook is not None:
                    hook(shadow)
        return due
