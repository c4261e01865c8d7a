"""The records of the offload gate, of a framework's own decisions and of the
ledger (see the package docstring)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from decimal import Decimal

from seamscope.decisions.records._enums import (
    MiddlewareDecisionKind,
    OffloadMechanism,
    OffloadOutcome,
    OffloadReasonCode,
    PricingSource,
    PriorSource,
    SettleTrigger,
)
from seamscope.decisions.records._stored import StoredOffload
from seamscope.decisions.records._values import (
    _ZERO,
    ModelUsage,
    ToolCall,
    _fail,
    _nonempty_str,
    _real,
    _tokens,
)

# -- the offload gate ------------------------------------------------------------

DEFAULT_STUB_TOKENS = 80
DEFAULT_RECALL_INPUT_TOKENS = 12_500
DEFAULT_RECALL_OUTPUT_TOKENS = 250
DEFAULT_LARGE_OFFLOAD_THRESHOLD_TOKENS = 15_000


@dataclass(frozen=True, slots=True)
class OffloadGateInputs:
    """Inputs to the gate; all economic, no I/O.

    ``output_tokens`` is the candidate output's size (chars / 4);
    ``horizon`` the expected remaining turns it would be carried (a fixed
    prior, not the live iteration index); ``recall_probability`` the recall
    prior; ``model_name`` selects the price.

    Checked at construction (ValueError naming the field): the four token
    counts after ``model_name`` are ints >= 0 (a negative stub size would
    make every offload look profitable); ``output_tokens`` and
    ``recall_probability`` are numbers, ``horizon`` an int, ``model_name``
    a str. Accepted as documented by :func:`evaluate_offload_gate`: a
    negative horizon (clamped to 0), a probability outside [0, 1] (clamped;
    NaN is certain recall), an output size that is negative or not finite
    (never fires), an empty model name (unpriced).
    """

    output_tokens: float
    horizon: int
    recall_probability: float
    model_name: str
    large_offload_threshold_tokens: int = DEFAULT_LARGE_OFFLOAD_THRESHOLD_TOKENS
    stub_tokens: float = DEFAULT_STUB_TOKENS
    recall_input_tokens: int = DEFAULT_RECALL_INPUT_TOKENS
    recall_output_tokens: int = DEFAULT_RECALL_OUTPUT_TOKENS

    def __post_init__(self) -> None:
        owner = "OffloadGateInputs"
        if not _real(self.output_tokens):
            raise _fail(owner, "output_tokens", "a number (tokens)", self.output_tokens)
        if isinstance(self.horizon, bool) or not isinstance(self.horizon, int):
            raise _fail(owner, "horizon", "an int (turns)", self.horizon)
        if not _real(self.recall_probability):
            raise _fail(owner, "recall_probability", "a number", self.recall_probability)
        if not isinstance(self.model_name, str):
            raise _fail(owner, "model_name", "a str", self.model_name)
        stub = self.stub_tokens  # an estimate of a real text may be a fraction (chars / 4)
        if not _real(stub) or not 0 <= stub < float("inf"):
            raise _fail(owner, "stub_tokens", "a finite number >= 0 (tokens)", stub)
        for name in (
            "large_offload_threshold_tokens",
            "recall_input_tokens",
            "recall_output_tokens",
        ):
            _tokens(owner, name, getattr(self, name))


@dataclass(frozen=True, slots=True)
class ShadowVerdict:
    """What a shadow configuration of the gate would have decided on the same
    call (the live decision stands): its verdict, exact net (Decimal USD, and
    rounded to a float), reason code and the priors it used."""

    fire: bool
    net_saving: Decimal
    reason_code: OffloadReasonCode
    horizon: int
    recall_probability: float
    stub_tokens: float = DEFAULT_STUB_TOKENS
    tool_name: str | None = None
    """The call's tool (the disagreement counter's attribute)."""
    recall_input_tokens: int = DEFAULT_RECALL_INPUT_TOKENS
    recall_output_tokens: int = DEFAULT_RECALL_OUTPUT_TOKENS
    """The recall hop's sizes the shadow priced (an offload only the shadow
    fires is settled with one such hop at its recall probability)."""

    @property
    def net_saving_usd(self) -> float:
        return float(self.net_saving)


@dataclass(frozen=True, slots=True)
class OffloadGateDecision:
    """The verdict plus the priced terms, so telemetry can say why.

    USD figures are floats rounded from exact Decimal arithmetic; the
    verdict was taken on the exact ``net_saving``. ``horizon`` and
    ``recall_probability`` are the values after clamping.
    ``prior_source`` says whether they came from the gate's configuration
    or a calibrated priors file (``priors_version``: that file's version);
    ``shadow``: a shadow configuration's verdict on the same call. The
    threshold and recall-hop sizes are the inputs it was priced with.
    ``rates``: the model's rates it was priced with, USD per 1M tokens
    (input, output, cache read, cache write; a cache rate None when the table
    has none), None when unpriced or below the threshold.
    """

    fire: bool
    net_saving_usd: float
    reprefill_saving_usd: float
    stub_carry_cost_usd: float
    expected_recall_hop_cost_usd: float
    reason: str
    reason_code: OffloadReasonCode = OffloadReasonCode.NET_NOT_POSITIVE
    pricing_source: PricingSource = PricingSource.NONE
    model_name: str = ""
    output_tokens: float = 0.0
    horizon: int = 0
    recall_probability: float = 0.0
    stub_tokens: float = DEFAULT_STUB_TOKENS
    net_saving: Decimal = field(default=_ZERO, repr=False)
    offload_id: str | None = None
    prior_source: PriorSource = PriorSource.DEFAULT
    priors_version: str | None = None
    shadow: ShadowVerdict | None = None
    threshold_tokens: int = DEFAULT_LARGE_OFFLOAD_THRESHOLD_TOKENS
    recall_input_tokens: int = DEFAULT_RECALL_INPUT_TOKENS
    recall_output_tokens: int = DEFAULT_RECALL_OUTPUT_TOKENS
    rates: tuple[Decimal, Decimal, Decimal | None, Decimal | None] | None = None


@dataclass(frozen=True, slots=True)
class GateCall:
    """Where a gate call happens: for telemetry and the ledger, not the math.

    ``reevaluation``: the loop asks again about an output it already asked
    about (a framework that re-decides earlier outputs every iteration).
    Telemetry then counts the decision but not its predicted saving again.
    ``mechanism``: the gate decides a framework's own offload of that
    mechanism (a Deep Agents eviction, a Strands ``ContextOffloader``
    offload), not one of its own; None: its own.
    """

    conversation_id: str | None = None
    agent_name: str | None = None
    tool_name: str | None = None
    tool_call_id: str | None = None
    reevaluation: bool = False
    mechanism: OffloadMechanism | None = None


# -- a framework's own decisions -------------------------------------------------


@dataclass(frozen=True, slots=True)
class Compaction:
    """Content a framework's middleware took out of the prompt, priced like an offload.

    ``compaction_id`` follows it in the ledger; ``model`` is the model whose
    rates price it; ``removed_tokens`` the estimated tokens taken out and
    ``kept_tokens`` what replaced them (a placeholder, a summary), both
    chars / 4; ``tool_call_ids`` the tool results it cleared;
    ``messages_removed`` how many messages it took out; ``cost`` its own
    model call (a summary), exact USD; ``predicted`` the gate's priced
    formula on these sizes (None when the model is unpriced).
    """

    compaction_id: str
    mechanism: OffloadMechanism
    model: str
    removed_tokens: float
    kept_tokens: float
    tool_call_ids: tuple[str, ...] = ()
    messages_removed: int = 0
    cost: Decimal = _ZERO
    predicted: OffloadGateDecision | None = None


@dataclass(frozen=True, slots=True)
class MiddlewareDecision:
    """One decision a framework's own middleware took, read from its effect.

    ``middleware`` is its name, ``kind`` what it decided, ``reason`` the
    reason it gives. By kind: a tool narrowing has ``before``/``after``
    (tool names in order); a model choice has ``model`` (chosen, or for a
    fallback the model that answered) and ``failed`` ((model, error type)
    of each failed attempt); a block has ``calls`` (the calls that never
    ran); a compaction has ``compaction`` (and may name in ``calls`` the
    tool calls whose output it took out). ``decision_model`` names the
    model the middleware asked, when it asked one, and ``cost`` what its
    own model calls cost at their rates (exact USD; 0 when unpriced).
    ``conversation_id``/``agent_name``: whose loop it decided in (the
    adapter fills them in when it records the decision).
    """

    middleware: str
    kind: MiddlewareDecisionKind
    reason: str
    framework: str = "langchain"
    before: tuple[str, ...] = ()
    after: tuple[str, ...] = ()
    model: str | None = None
    failed: tuple[tuple[str, str], ...] = ()
    calls: tuple[ToolCall, ...] = ()
    compaction: Compaction | None = None
    decision_model: str | None = None
    cost: Decimal = _ZERO
    start_time_ns: int | None = field(default=None, compare=False)
    duration_s: float = field(default=0.0, compare=False)
    conversation_id: str | None = None
    agent_name: str | None = None


# -- the ledger ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CarriedStub:
    """The stub of an offload a model call's prompt carried, with its sizes.

    For a process that did not record the offload itself: ``output_tokens``
    is the size of the offloaded output (what the stub saves per call), a
    finite number >= 0; ``stub_tokens`` the stub's own size, a finite number >= 0;
    ``offload_id`` a non-empty str.
    """

    offload_id: str
    output_tokens: float
    stub_tokens: float = DEFAULT_STUB_TOKENS
    offload: StoredOffload | None = field(default=None, compare=False)
    """The offload store's record of it, when a store holds it: the ledger
    then follows it here too (its accounts go to the store, whichever worker
    made it) and can settle it."""

    def __post_init__(self) -> None:
        _nonempty_str("CarriedStub", "offload_id", self.offload_id)
        for field_name in ("output_tokens", "stub_tokens"):
            size = getattr(self, field_name)
            if not _real(size) or not math.isfinite(size) or size < 0:
                raise _fail("CarriedStub", field_name, "a finite number >= 0", size)


@dataclass(frozen=True, slots=True)
class ModelCallAccount:
    """What one model call of a conversation realized for its offloads (exact USD).

    ``saving``: the avoided input tokens of every stub the call carried, at
    the call's input rate; ``stub_carry_cost``: the stubs' own tokens at that
    rate; ``cache_disruption_cost``: cache reads lost against the
    conversation's pre-offload hit ratio. ``offload_active``: the
    conversation had a live offload when the call was made.
    """

    conversation_id: str
    model: str
    usage: ModelUsage
    offload_active: bool
    saving: Decimal = _ZERO
    stub_carry_cost: Decimal = _ZERO
    cache_disruption_cost: Decimal = _ZERO
    by_mechanism: tuple[tuple[OffloadMechanism, Decimal, Decimal, Decimal], ...] = field(
        default=(), compare=False
    )
    """(mechanism, saving, stub carry, cache disruption): the amounts above
    split by what took the content out (their sums are the amounts above)."""
    carried: tuple[str, ...] = field(default=(), compare=False)
    """The ids of the offloads (and compactions) this ledger followed whose
    stub the call carried, in the order they were followed."""
    carried_stub_tokens: tuple[float, ...] = field(default=(), compare=False)
    """The stub size (tokens) of each offload in ``carried``, in the same order."""


@dataclass(frozen=True, slots=True)
class RecallAccount:
    """One recall of an offloaded output (or a re-read of compacted data): a
    real model hop (exact USD ``cost``); ``tool_call_id``: the tool call that
    brought the output back, when the adapter knows it."""

    conversation_id: str
    offload_id: str
    model: str
    input_tokens: float
    output_tokens: int
    cost: Decimal = _ZERO
    mechanism: OffloadMechanism = OffloadMechanism.SEAMSCOPE_GATE
    tool_call_id: str | None = None


@dataclass(frozen=True, slots=True)
class CompactionAccount:
    """A compaction's own model call (a summary): a realized cost (exact USD)."""

    conversation_id: str
    compaction_id: str
    model: str
    mechanism: OffloadMechanism
    cost: Decimal = _ZERO


LedgerEntry = ModelCallAccount | RecallAccount | CompactionAccount
"""What the ledger realized at one event, counted where it happened."""


@dataclass(frozen=True, slots=True)
class Settlement:
    """One settled offload: what was predicted and what really happened (exact USD).

    ``link`` is the observer's link to the gate decision that fired the
    offload (opaque; None when there is none), so telemetry can link the
    settlement to it. ``mechanism`` says what took the content out (a
    framework's compaction settles like an offload, its own model call as
    ``compaction_cost``).
    """

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
    link: object = field(default=None, compare=False, repr=False)
    mechanism: OffloadMechanism = OffloadMechanism.SEAMSCOPE_GATE
    compaction_cost: Decimal = _ZERO
    tool_name: str | None = None
    """The tool whose output was offloaded (None: not known to the ledger)."""
    remaining_turns: int = 0
    """The model calls of the conversation after the offload until it settled
    (the turns it was or would have been carried: the gate's horizon, realized)."""
    rates: tuple[Decimal, Decimal, Decimal | None, Decimal | None] | None = None
    """The ledger's rates for ``model``, USD per 1M tokens (input, output, cache
    read, cache write), None when it has no price for it."""

    @property
    def realized_costs(self) -> Decimal:
        return (
            self.stub_carry_cost
            + self.recall_cost
            + self.cache_disruption_cost
            + self.compaction_cost
        )

    @property
    def realized_net_saving(self) -> Decimal:
        return self.realized_savings - self.realized_costs

    @property
    def outcome(self) -> OffloadOutcome:
        net = self.realized_net_saving
        if net > 0:
            return OffloadOutcome.GAIN
        return OffloadOutcome.LOSS if net < 0 else OffloadOutcome.BREAK_EVEN


@dataclass(frozen=True, slots=True)
class ShadowOffload:
    """An offload only the shadow configuration would have fired, settled on the
    conversation's real course (exact Decimal USD for its parts).

    Every later model call of the conversation would have carried its stub:
    ``savings`` its output's tokens and ``stub_carry_cost`` the stub the loop
    would send, both at that call's input rate, over ``turns`` calls. Its recall
    never happened, so it is not known: one hop (``recall_hop_cost``: the whole
    output back in, the shadow's recall output out, at the model's rates) at the
    shadow's ``recall_probability`` is **expected**. A recall is emitted by a
    model call and ends the carrying, so the range runs over a recall by any
    later call (what the calls before it saved, minus the hop: the lowest and
    highest such running net are ``partial_low`` and ``partial_high``) and no
    recall at all (``no_recall``); with no later call, 0.
    """

    model: str
    tool_name: str | None
    output_tokens: float
    recall_probability: float
    savings: Decimal = _ZERO
    stub_carry_cost: Decimal = _ZERO
    recall_hop_cost: Decimal = _ZERO
    turns: int = 0
    partial_low: Decimal = _ZERO
    """The lowest running net (saving minus stub) over the first k later calls."""
    partial_high: Decimal = _ZERO
    """The highest running net over the first k later calls."""

    @property
    def no_recall(self) -> Decimal:
        """The net if it were never recalled (the range's top)."""
        return self.savings - self.stub_carry_cost

    @property
    def expected_net_saving(self) -> Decimal:
        if not self.turns:
            return _ZERO  # no later call: nothing carried, nothing to recall
        p = self.recall_probability  # exact, as the pricing's to_decimal reads it
        exact_p = Decimal(repr(p)) if isinstance(p, float) else Decimal(p)
        return self.no_recall - exact_p * self.recall_hop_cost

    @property
    def low(self) -> Decimal:
        """The range's bottom: the worst of a recall by any later call, or none."""
        if not self.turns:
            return _ZERO
        return min(self.partial_low - self.recall_hop_cost, self.no_recall)

    @property
    def high(self) -> Decimal:
        """The range's top: the best of a recall by any later call, or none."""
        if not self.turns:
            return _ZERO
        return max(self.partial_high - self.recall_hop_cost, self.no_recall)


@dataclass(frozen=True, slots=True)
class ShadowSettlement:
    """What the shadow configuration of the gate would have realized on one
    conversation's real course, settled when the live offloads of that
    conversation settle (exact Decimal USD), as ``seamscope whatif`` re-settles
    a recorded conversation under the shadow's configuration:

    * ``settlements``: the shadow's **exact** part, the offloads that fire
      either way (their carries and recalls are the real ones) and the
      framework's compactions, settled by a ledger that follows only them
      (an offload only the live gate fired is not followed: its output
      stays in the prompt, 0);
    * ``offloads``: the offloads only the shadow would have fired, each
      **expected** (:class:`ShadowOffload`);
    * ``realized_net_saving``: what the live offloads of the conversation
      realized in the same settlement, for the comparison;
    * ``no_longer_fired``: the live offload ids the shadow would not have fired.
    """

    conversation_id: str
    trigger: SettleTrigger
    realized_net_saving: Decimal
    settlements: tuple[Settlement, ...] = ()
    offloads: tuple[ShadowOffload, ...] = ()
    no_longer_fired: tuple[str, ...] = ()

    @property
    def exact_net_saving(self) -> Decimal:
        return sum((s.realized_net_saving for s in self.settlements), _ZERO)

    @property
    def expected_net_saving(self) -> Decimal:
        return sum((o.expected_net_saving for o in self.offloads), _ZERO)

    @property
    def expected_range(self) -> tuple[Decimal, Decimal]:
        return (
            sum((o.low for o in self.offloads), _ZERO),
            sum((o.high for o in self.offloads), _ZERO),
        )
