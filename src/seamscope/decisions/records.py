"""Every record the decision core produces or takes: values, no behaviour.

This module imports nothing else of seamscope, so the seams, the selection
pipeline, the offload gate, the ledger's accounting and the observer
protocol all depend on it and never on each other. Records are frozen
dataclasses with slots; closed value sets are :class:`enum.StrEnum`
(a test pins every member: they are span and metric attribute values).

The records a caller or adopter builds (:class:`ModelConfig`,
:class:`ModelUsage`, :class:`StageOutcome`, :class:`OffloadGateInputs`,
:class:`CarriedStub`) check their fields at construction and raise
ValueError naming the class and field (wrong types included). The few
check primitives they use are at the top of this module; ``_checks``
builds the rest of the core's construction checks on them.

Money: the offload gate and the ledger compute in exact :class:`~decimal.Decimal`
USD; a record's ``*_usd`` float is that exact value rounded to the nearest
double, for telemetry. Verdicts are always taken on the exact values.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

__all__ = [
    "DEFAULT_LARGE_OFFLOAD_THRESHOLD_TOKENS",
    "DEFAULT_RECALL_INPUT_TOKENS",
    "DEFAULT_RECALL_OUTPUT_TOKENS",
    "DEFAULT_STUB_TOKENS",
    "ContainedError",
    "CarriedStub",
    "DispatchRecord",
    "GateCall",
    "Compaction",
    "CompactionAccount",
    "GuardResult",
    "LedgerEntry",
    "MiddlewareDecision",
    "MiddlewareDecisionKind",
    "ModelCallAccount",
    "ModelConfig",
    "ModelUsage",
    "OffloadCostKind",
    "OffloadGateDecision",
    "OffloadGateInputs",
    "OffloadMechanism",
    "OffloadOutcome",
    "OffloadReasonCode",
    "PaletteVerdict",
    "PolicyEvaluation",
    "PolicyResult",
    "PostModelResult",
    "PreModelResult",
    "PricingSource",
    "RecallAccount",
    "Seam",
    "SelectionResult",
    "SettleTrigger",
    "Settlement",
    "StageOutcome",
    "StageOutcomeKind",
    "StageRecord",
    "ToolCall",
    "WinnerSource",
    "contained_error",
    "tool_name",
]

_ZERO = Decimal(0)


# -- construction check primitives (the core's others are in _checks) -------------

_SCALARS = (str, int, float, Decimal, type(None))


def _show(value: object) -> str:
    """A short description of ``value`` for an error message: the repr of a
    short scalar, else the type name (never a large or sensitive value)."""
    if isinstance(value, _SCALARS):
        text = repr(value)
        return text if len(text) <= 60 else text[:57] + "..."
    return type(value).__name__


def _fail(owner: str, field: str, expected: str, value: object, note: str = "") -> ValueError:
    """``{owner}.{field} must be {expected}, got {value}`` (plus a note)."""
    suffix = f" ({note})" if note else ""
    return ValueError(f"{owner}.{field} must be {expected}, got {_show(value)}{suffix}")


def _nonempty_str(owner: str, field: str, value: object, note: str = "") -> str:
    """A str with a non-blank character."""
    if not isinstance(value, str) or not value.strip():
        raise _fail(owner, field, "a non-empty str", value, note)
    return value


def _flag(owner: str, field: str, value: object) -> bool:
    """A bool (not merely truthy: ``"no"`` would read as True)."""
    if not isinstance(value, bool):
        raise _fail(owner, field, "a bool", value)
    return value


def _tokens(owner: str, field: str, value: object, minimum: int = 0) -> int:
    """An int (not a bool) >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise _fail(owner, field, f"an int >= {minimum}", value)
    return value


def _real(value: object) -> bool:
    """An int or float that is not a bool."""
    return not isinstance(value, bool) and isinstance(value, int | float)


# -- closed value sets ---------------------------------------------------------


class Seam(enum.StrEnum):
    """The two seams of a ReAct iteration (``seamscope.seam``)."""

    PRE_MODEL = "pre_model"
    POST_MODEL = "post_model"


class WinnerSource(enum.StrEnum):
    """Who decided a seam (``seamscope.seam.winner_source``).

    PRE seam: ``policy`` / ``resolver`` / ``default``, or for a framework
    middleware's model choice ``router`` / ``fallback``. A POST-seam dispatch:
    ``policy`` (a policy rewrote it), ``adopter`` (the adopter's
    ``on_tool_call_dispatch`` changed it), ``none`` (it dispatched as emitted).
    """

    POLICY = "policy"
    RESOLVER = "resolver"
    DEFAULT = "default"
    ADOPTER = "adopter"
    NONE = "none"
    ROUTER = "router"
    FALLBACK = "fallback"


class PolicyResult(enum.StrEnum):
    """Result of evaluating one policy at one seam (``seamscope.policy.result``).

    ``skipped`` means the policy does not apply at that seam (no ``model`` at
    PRE, no ``redirect_to`` or a ``when_tool`` that does not match at POST), so
    its predicate was not called.
    """

    MATCHED = "matched"
    NOT_MATCHED = "not_matched"
    SKIPPED = "skipped"
    ERROR = "error"


class GuardResult(enum.StrEnum):
    """The guard's verdict on the winning redirect (``seamscope.dispatch.guard``)."""

    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"
    NONE = "none"


class PaletteVerdict(enum.StrEnum):
    """The palette gate's verdict (``seamscope.dispatch.palette_gate``).

    ``kept``: the call dispatches to its (possibly rewritten) target.
    ``dropped``: the rewrite targeted a tool not routed this turn; it was
    dropped and the original call dispatched.
    """

    KEPT = "kept"
    DROPPED = "dropped"


class StageOutcomeKind(enum.StrEnum):
    """A selection stage's outcome (``seamscope.stage.outcome``)."""

    SELECT = "select"
    ABSTAIN = "abstain"


class OffloadReasonCode(enum.StrEnum):
    """Why the offload gate fired or not (``seamscope.offload.reason_code``)."""

    BELOW_THRESHOLD = "below_threshold"
    UNPRICED_MODEL = "unpriced_model"
    NET_POSITIVE = "net_positive"
    NET_NOT_POSITIVE = "net_not_positive"


class PricingSource(enum.StrEnum):
    """Which table priced a model (``seamscope.offload.pricing_source``).

    ``symfonic``: symfonic-core's own table priced a decision seamscope
    recorded from that framework.
    """

    OVERRIDE = "override"
    GENAI_PRICES = "genai-prices"
    SYMFONIC = "symfonic"
    NONE = "none"


class OffloadOutcome(enum.StrEnum):
    """A settled offload's outcome (``seamscope.offload.outcome``): its exact
    realized net saving is positive (``gain``), negative (``loss``) or exactly
    zero (``break_even``)."""

    GAIN = "gain"
    LOSS = "loss"
    BREAK_EVEN = "break_even"


class OffloadCostKind(enum.StrEnum):
    """What a realized offload cost was spent on (``seamscope.offload.cost_kind``)."""

    STUB_CARRY = "stub_carry"
    RECALL = "recall"
    CACHE_DISRUPTION = "cache_disruption"
    COMPACTION_CALL = "compaction_call"


class OffloadMechanism(enum.StrEnum):
    """What took content out of the prompt (``seamscope.offload.mechanism``):
    seamscope's offload gate, or a framework's compaction the ledger prices
    the same way (a recall is then the model re-reading cleared data)."""

    SEAMSCOPE_GATE = "seamscope_gate"
    CONTEXT_EDITING = "context_editing"
    SUMMARIZATION = "summarization"


class MiddlewareDecisionKind(enum.StrEnum):
    """What a framework's own middleware decided (``seamscope.middleware.decision``)."""

    TOOL_SELECTION = "tool_selection"
    TOOL_SEARCH = "tool_search"
    MODEL_ROUTE = "model_route"
    MODEL_FALLBACK = "model_fallback"
    TOOL_CALL_BLOCKED = "tool_call_blocked"
    COMPACTION = "compaction"


class SettleTrigger(enum.StrEnum):
    """What settled an offload (``seamscope.offload.settle_trigger``)."""

    CONVERSATION_END = "conversation_end"
    EXPLICIT = "explicit"
    IDLE = "idle"
    EVICTED = "evicted"


# -- values the loop passes in ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call emitted by the model. ``id`` is kept through any rewrite."""

    id: str
    name: str
    args: Mapping[str, Any] = field(default_factory=dict, hash=False)


@dataclass(frozen=True, slots=True)
class ModelConfig:
    """A model to reason a turn: its name plus optional call parameters.

    ``parameters`` is stored as a tuple of pairs sorted by name so the value
    compares by content; pass a mapping or (name, value) pairs with unique,
    non-empty str names. The value hashes when its parameter values do
    (``{"stop": ["\\n"]}`` is a valid config that is not a dict key).
    ``model_name`` and ``provider`` (when given) are non-empty str.
    """

    model_name: str
    parameters: tuple[tuple[str, Any], ...] = ()
    provider: str | None = None

    def __init__(
        self,
        model_name: str,
        parameters: Mapping[str, Any] | Iterable[tuple[str, Any]] = (),
        provider: str | None = None,
    ) -> None:
        _nonempty_str("ModelConfig", "model_name", model_name)
        if provider is not None and (not isinstance(provider, str) or not provider.strip()):
            raise _fail("ModelConfig", "provider", "a non-empty str or None", provider)
        object.__setattr__(self, "model_name", model_name)
        object.__setattr__(self, "parameters", _parameters(parameters))
        object.__setattr__(self, "provider", provider)

    @property
    def params(self) -> dict[str, Any]:
        """The parameters as a fresh dict."""
        return dict(self.parameters)


def _parameters(parameters: object) -> tuple[tuple[str, Any], ...]:
    expected = "a mapping or (name, value) pairs"
    if isinstance(parameters, Mapping):
        items: list[Any] = list(parameters.items())
    elif isinstance(parameters, str | bytes) or not isinstance(parameters, Iterable):
        raise _fail("ModelConfig", "parameters", expected, parameters)
    else:
        items = list(parameters)
    seen: set[str] = set()
    pairs: list[tuple[str, Any]] = []
    for item in items:
        if not isinstance(item, tuple | list) or len(item) != 2:
            raise _fail(
                "ModelConfig", "parameters", expected, parameters, f"an item is {_show(item)}"
            )
        name, value = item
        if not isinstance(name, str) or not name:
            raise _fail(
                "ModelConfig",
                "parameters",
                "keyed by non-empty str names",
                parameters,
                f"a name is {_show(name)}",
            )
        if name in seen:
            raise _fail(
                "ModelConfig", "parameters", "with unique names", parameters, f"{name!r} twice"
            )
        seen.add(name)
        pairs.append((name, value))
    pairs.sort(key=lambda pair: pair[0])
    return tuple(pairs)


@dataclass(frozen=True, slots=True)
class ModelUsage:
    """Tokens of one model call.

    ``input_tokens`` counts every input token, cached or not;
    ``cache_read_tokens`` and ``cache_write_tokens`` are the parts of it that
    were read from or written to the prompt cache. The rest is uncached.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def __post_init__(self) -> None:
        for name in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"):
            _tokens("ModelUsage", name, getattr(self, name))
        if self.cache_read_tokens + self.cache_write_tokens > self.input_tokens:
            raise ValueError(
                "ModelUsage.cache_read_tokens + cache_write_tokens must not exceed "
                f"input_tokens, got {self.cache_read_tokens} + {self.cache_write_tokens} "
                f"> {self.input_tokens}"
            )

    @property
    def uncached_tokens(self) -> int:
        """Input tokens neither read from nor written to the cache."""
        return self.input_tokens - self.cache_read_tokens - self.cache_write_tokens

    @property
    def cache_hit_ratio(self) -> float | None:
        """Share of input tokens read from the cache (None with no input)."""
        return None if self.input_tokens == 0 else self.cache_read_tokens / self.input_tokens


def tool_name(tool: Any) -> str | None:
    """A tool's name: a str, an object with ``name``, or an OpenAI-style dict.

    Returns None for a tool whose name cannot be read; stages keep such
    "unnamed" tools, since a name-keyed rule cannot judge them.
    """
    if isinstance(tool, str):
        return tool
    if isinstance(tool, Mapping):
        name = tool.get("name")
        if name is None and isinstance(tool.get("function"), Mapping):
            name = tool["function"].get("name")
        return name if isinstance(name, str) else None
    name = getattr(tool, "name", None)
    return name if isinstance(name, str) else None


# -- the seams -------------------------------------------------------------------

_MAX_ERROR_MESSAGE = 256


@dataclass(frozen=True, slots=True)
class ContainedError:
    """Adopter code that raised and was contained.

    ``source`` is what raised: ``match``, ``guard``, ``args_transform``,
    ``resolver``, ``callback`` or ``stage``. ``error_type`` is the exception's
    qualified class name; ``message`` its text, truncated to 256 chars.
    """

    source: str
    error_type: str
    message: str
    policy: str | None = None


def contained_error(source: str, exc: BaseException, policy: str | None = None) -> ContainedError:
    """Record ``exc`` raised by adopter code at ``source``."""
    cls = type(exc)
    qualname = (
        cls.__qualname__
        if cls.__module__ == "builtins"
        else (f"{cls.__module__}.{cls.__qualname__}")
    )
    return ContainedError(source, qualname, str(exc)[:_MAX_ERROR_MESSAGE], policy)


@dataclass(frozen=True, slots=True)
class PolicyEvaluation:
    """One policy evaluated at one seam.

    ``result`` is ``matched``/``not_matched``/``skipped``/``error``.
    ``skipped`` means the policy does not apply there (no model at PRE; no
    redirect or a when_tool that rejects the tool at POST) and its match was
    not called. At POST, ``guard`` is the guard's verdict for a matched
    policy (``none`` when it has no guard or was not matched); a guard that
    raises makes the result ``error`` (no match for that policy), with
    ``guard`` ``error`` and the contained error.
    """

    policy: str
    seam: Seam
    result: PolicyResult
    guard: GuardResult = GuardResult.NONE
    error: ContainedError | None = None


@dataclass(frozen=True, slots=True)
class PreModelResult:
    """The PRE seam's verdict: which model reasons the turn, and who chose it."""

    model: ModelConfig
    source: WinnerSource
    policy: str | None
    evaluations: tuple[PolicyEvaluation, ...] = ()
    errors: tuple[ContainedError, ...] = ()
    duration_s: float = field(default=0.0, compare=False)


@dataclass(frozen=True, slots=True)
class DispatchRecord:
    """One emitted tool call through policies, the adopter and the palette gate.

    ``final`` is what dispatches (it always keeps the emitted call's id).
    ``policy``/``redirect_to`` name the winning policy and its target (None
    when no policy won). ``guard`` is the winner's guard verdict, or when no
    policy won, the verdict of the last matched policy whose guard stopped it.
    ``source`` says who shaped the call that reached the palette gate:
    ``policy``, ``adopter`` or ``none``.
    """

    index: int
    emitted: ToolCall
    final: ToolCall
    policy: str | None
    redirect_to: str | None
    guard: GuardResult
    args_transformed: bool
    adopter_override: bool
    palette: PaletteVerdict
    source: WinnerSource
    evaluations: tuple[PolicyEvaluation, ...] = ()
    errors: tuple[ContainedError, ...] = ()
    duration_s: float = field(default=0.0, compare=False)

    @property
    def rewritten(self) -> bool:
        """The call dispatches to a different tool than the model emitted."""
        return self.final.name != self.emitted.name


@dataclass(frozen=True, slots=True)
class PostModelResult:
    """The POST seam's verdict: the calls to dispatch, one record per call."""

    calls: tuple[ToolCall, ...]
    records: tuple[DispatchRecord, ...]
    duration_s: float = field(default=0.0, compare=False)

    @property
    def rewritten(self) -> int:
        """How many calls dispatch to a different tool than emitted."""
        return sum(1 for r in self.records if r.rewritten)


# -- selection -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StageOutcome:
    """One stage's verdict: select (with the narrowed tools) or abstain.

    ``forced_tool`` is set by the forced-choice stage when it resolves a
    force; other stages leave it None.

    Checked at construction: ``kind`` a :class:`StageOutcomeKind` (or its
    value); for a select, ``tools`` an iterable of tools, stored as a tuple
    (a str is refused: it would read as one tool per character); for an
    abstain, ``tools`` None; ``degraded`` a bool; ``forced_tool`` a
    non-empty str or None. A ``reason`` that is not a str is stored as its
    ``str()`` (a reason is free text for the trace). A stage that builds a
    malformed outcome inside ``apply`` raises there, and the pipeline
    contains it as a degraded abstain with the error recorded.
    """

    kind: StageOutcomeKind
    tools: tuple[Any, ...] | None
    reason: str
    degraded: bool = False
    forced_tool: str | None = None

    def __post_init__(self) -> None:
        kind = self.kind
        if not isinstance(kind, StageOutcomeKind):
            try:
                kind = StageOutcomeKind(kind)
            except (ValueError, TypeError):
                raise _fail("StageOutcome", "kind", "a StageOutcomeKind", kind) from None
            object.__setattr__(self, "kind", kind)
        tools = self.tools
        if kind is StageOutcomeKind.SELECT:
            if not isinstance(tools, tuple):
                if isinstance(tools, str | bytes | Mapping) or not isinstance(tools, Iterable):
                    raise _fail(
                        "StageOutcome",
                        "tools",
                        "an iterable of tools (not a str) for a select",
                        tools,
                    )
                object.__setattr__(self, "tools", tuple(tools))
        elif tools is not None:
            raise _fail("StageOutcome", "tools", "None for an abstain", tools)
        if not isinstance(self.reason, str):
            object.__setattr__(self, "reason", str(self.reason))
        _flag("StageOutcome", "degraded", self.degraded)
        forced = self.forced_tool
        if forced is not None and (not isinstance(forced, str) or not forced):
            raise _fail("StageOutcome", "forced_tool", "a non-empty str or None", forced)

    @classmethod
    def select(
        cls, tools: Iterable[Any], reason: str, *, forced_tool: str | None = None
    ) -> StageOutcome:
        return cls(StageOutcomeKind.SELECT, tools, reason, False, forced_tool)  # type: ignore[arg-type]

    @classmethod
    def abstain(cls, reason: str, *, degraded: bool = False) -> StageOutcome:
        return cls(StageOutcomeKind.ABSTAIN, None, reason, degraded)

    @property
    def selected(self) -> bool:
        return self.kind is StageOutcomeKind.SELECT


@dataclass(frozen=True, slots=True)
class StageRecord:
    """One stage in the decision trace.

    ``before``/``after`` are tool names in order; ``dropped``/``added`` their
    difference. ``rejected`` lists names a stage returned that were neither
    offered nor in the catalogue (ignored: the pipeline never authors a
    tool); an unnamed tool that is not one of the offered (or catalogue)
    objects is rejected as ``?``. ``forced_reinstated`` is True when the
    pipeline put the forced tool back after this (protects_forced) stage
    dropped it. ``error`` is set when the stage raised and was contained as
    a degraded abstain.
    """

    index: int
    name: str
    outcome: StageOutcomeKind
    reason: str
    degraded: bool
    protects_forced: bool
    before: tuple[str, ...]
    after: tuple[str, ...]
    dropped: tuple[str, ...]
    added: tuple[str, ...] = ()
    rejected: tuple[str, ...] = ()
    forced_tool: str | None = None
    forced_reinstated: bool = False
    error: ContainedError | None = None
    duration_s: float = field(default=0.0, compare=False)


@dataclass(frozen=True, slots=True)
class SelectionResult:
    """The selected tools plus the decision trace (one record per stage)."""

    tools: tuple[Any, ...]
    forced_tool: str | None
    records: tuple[StageRecord, ...]
    offered: tuple[str, ...]
    duration_s: float = field(default=0.0, compare=False)

    @property
    def selected(self) -> tuple[str, ...]:
        return tuple(tool_name(t) or "?" for t in self.tools)

    @property
    def dropped(self) -> tuple[str, ...]:
        chosen = set(self.selected)
        return tuple(n for n in self.offered if n not in chosen)

    @property
    def reinstated(self) -> bool:
        return any(r.forced_reinstated for r in self.records)


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
    stub_tokens: int = DEFAULT_STUB_TOKENS
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
        for name in (
            "large_offload_threshold_tokens",
            "stub_tokens",
            "recall_input_tokens",
            "recall_output_tokens",
        ):
            _tokens(owner, name, getattr(self, name))


@dataclass(frozen=True, slots=True)
class OffloadGateDecision:
    """The verdict plus the priced terms, so telemetry can say why.

    USD figures are floats rounded from exact Decimal arithmetic; the
    verdict was taken on the exact ``net_saving``. ``horizon`` and
    ``recall_probability`` are the values after clamping.
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
    stub_tokens: int = DEFAULT_STUB_TOKENS
    net_saving: Decimal = field(default=_ZERO, repr=False)
    offload_id: str | None = None


@dataclass(frozen=True, slots=True)
class GateCall:
    """Where a gate call happens: for telemetry and the ledger, not the math.

    ``reevaluation``: the loop asks again about an output it already asked
    about (a framework that re-decides earlier outputs every iteration).
    Telemetry then counts the decision but not its predicted saving again.
    """

    conversation_id: str | None = None
    agent_name: str | None = None
    tool_name: str | None = None
    tool_call_id: str | None = None
    reevaluation: bool = False


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
    kept_tokens: int
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
    ran); a compaction has ``compaction``. ``decision_model`` names the
    model the middleware asked, when it asked one, and ``cost`` what its
    own model calls cost at their rates (exact USD; 0 when unpriced).
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


# -- the ledger ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CarriedStub:
    """The stub of an offload a model call's prompt carried, with its sizes.

    For a process that did not record the offload itself: ``output_tokens``
    is the size of the offloaded output (what the stub saves per call), a
    finite number >= 0; ``stub_tokens`` the stub's own size, an int >= 0;
    ``offload_id`` a non-empty str.
    """

    offload_id: str
    output_tokens: float
    stub_tokens: int = DEFAULT_STUB_TOKENS

    def __post_init__(self) -> None:
        _nonempty_str("CarriedStub", "offload_id", self.offload_id)
        size = self.output_tokens
        if not _real(size) or not math.isfinite(size) or size < 0:
            raise _fail("CarriedStub", "output_tokens", "a finite number >= 0", size)
        _tokens("CarriedStub", "stub_tokens", self.stub_tokens)


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


@dataclass(frozen=True, slots=True)
class RecallAccount:
    """One recall of an offloaded output (or a re-read of compacted data): a
    real model hop (exact USD ``cost``)."""

    conversation_id: str
    offload_id: str
    model: str
    input_tokens: int
    output_tokens: int
    cost: Decimal = _ZERO
    mechanism: OffloadMechanism = OffloadMechanism.SEAMSCOPE_GATE


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
