"""The decision records and closed value sets of the seams, the selection
pipeline and the values a loop passes in (see the package docstring)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from seamscope.decisions.records._enums import (
    GuardResult,
    PaletteVerdict,
    PolicyResult,
    Seam,
    StageOutcomeKind,
    WinnerSource,
)

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
    if not isinstance(tool, dict):
        # an object with a ``name`` (read first: the abstract Mapping check is
        # the dearest test here, and the stages ask for names many times a call)
        name = getattr(tool, "name", None)
        if isinstance(name, str):
            return name
        if not isinstance(tool, Mapping):
            return None
    name = tool.get("name")
    if name is None and isinstance(tool.get("function"), Mapping):
        name = tool["function"].get("name")
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
class PassedOver:
    """The policies a seam evaluated that are not recorded one by one.

    First match wins, so the policies a seam looked at are a prefix of its
    policies in order: the first ``evaluated`` of ``order`` (the router's
    policy names, shared by every record, never copied). Of that prefix, the
    evaluations that matched, were stopped by their guard or raised are in
    the record's ``evaluations`` in full (their names in ``recorded``); the
    rest did not match (``not_matched``) or did not apply at this seam
    (``skipped``) and are kept as these counts and :meth:`names`.

    :meth:`per_policy` re-derives one :class:`PolicyEvaluation` per policy
    of the prefix, in order, from the prefix and the policies (nothing is
    built until it is called). A record built without a router (a
    framework's own policies) has an empty ``PassedOver``.
    """

    not_matched: int = 0
    skipped: int = 0
    evaluated: int = 0
    order: tuple[str, ...] = field(default=(), repr=False)
    recorded: tuple[str, ...] = ()
    view: Callable[[], tuple[PolicyEvaluation, ...]] | None = field(
        default=None, compare=False, repr=False
    )

    @property
    def count(self) -> int:
        """How many evaluations are kept as counts (not matched + skipped)."""
        return self.not_matched + self.skipped

    def names(self, limit: int | None = None) -> tuple[str, ...]:
        """The passed-over policy names in evaluation order (the first ``limit``)."""
        prefix = self.order[: self.evaluated]
        if not self.recorded:
            return prefix if limit is None else prefix[:limit]
        recorded = set(self.recorded)
        out: list[str] = []
        for name in prefix:
            if name not in recorded:
                out.append(name)
                if limit is not None and len(out) >= limit:
                    break
        return tuple(out)

    def per_policy(self) -> tuple[PolicyEvaluation, ...]:
        """Every evaluation of the prefix, in order (re-derived on each call)."""
        return () if self.view is None else self.view()


_NOTHING_PASSED_OVER = PassedOver()


@dataclass(frozen=True, slots=True)
class PreModelResult:
    """The PRE seam's verdict: which model reasons the turn, and who chose it.

    ``evaluations`` holds the matched and error evaluations in full; the
    policies that did not match or had no model are counted in
    ``passed_over``. :meth:`all_evaluations` gives one evaluation per policy
    the seam looked at, on demand.
    """

    model: ModelConfig
    source: WinnerSource
    policy: str | None
    evaluations: tuple[PolicyEvaluation, ...] = ()
    errors: tuple[ContainedError, ...] = ()
    duration_s: float = field(default=0.0, compare=False)
    passed_over: PassedOver = _NOTHING_PASSED_OVER

    def all_evaluations(self) -> tuple[PolicyEvaluation, ...]:
        """One :class:`PolicyEvaluation` per policy the seam looked at, in order
        (re-derived from ``passed_over``; costs nothing until called)."""
        return self.passed_over.per_policy() if self.passed_over.view else self.evaluations


@dataclass(frozen=True, slots=True)
class DispatchRecord:
    """One emitted tool call through policies, the adopter and the palette gate.

    ``final`` is what dispatches (it always keeps the emitted call's id).
    ``policy``/``redirect_to`` name the winning policy and its target (None
    when no policy won). ``guard`` is the winner's guard verdict, or when no
    policy won, the verdict of the last matched policy whose guard stopped it.
    ``source`` says who shaped the call that reached the palette gate:
    ``policy``, ``adopter`` or ``none``. ``structured_output``: the call is the
    framework's structured-output answer (LangChain's ``ToolStrategy`` tool,
    pydantic-ai's ``final_result``): the framework consumes it itself, so it
    is never routed, rewritten or handed to the tool runner. ``refused``: the
    framework refuses the final call (no tool by that name may run there:
    pydantic-ai's and ADK's unknown-tool answer), so nothing ran.
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
    passed_over: PassedOver = _NOTHING_PASSED_OVER
    structured_output: bool = False
    refused: bool = False

    @property
    def rewritten(self) -> bool:
        """The call dispatches to a different tool than the model emitted."""
        return self.final.name != self.emitted.name

    def all_evaluations(self) -> tuple[PolicyEvaluation, ...]:
        """One :class:`PolicyEvaluation` per policy the seam looked at for this
        call, in order (re-derived from ``passed_over``; costs nothing until
        called)."""
        return self.passed_over.per_policy() if self.passed_over.view else self.evaluations


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
    reused: bool = field(default=False, compare=False)
    """True: no stage ran; this is the previous iteration's selection, reused
    because its inputs had not changed (``DecisionLayer(reuse_selection=True)``).
    ``records`` are then the previous run's stage records; an observer records
    the selection but no stage."""

    @property
    def selected(self) -> tuple[str, ...]:
        """The selected tools' names (``?`` for an unnamed tool), read from
        ``tools`` on every call: a copy with other tools
        (``dataclasses.replace``) names its own (a str is its own name)."""
        return tuple([(t if type(t) is str else tool_name(t)) or "?" for t in self.tools])

    @property
    def dropped(self) -> tuple[str, ...]:
        chosen = set(self.selected)
        return tuple(n for n in self.offered if n not in chosen)

    @property
    def reinstated(self) -> bool:
        return any(r.forced_reinstated for r in self.records)
