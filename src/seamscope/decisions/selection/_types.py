"""The stage protocol, outcomes, the tool catalogue and the selection context."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol, runtime_checkable

from seamscope.decisions import _checks as _c
from seamscope.decisions._messages import last_user_text, tool_name
from seamscope.decisions.records import (
    StageOutcome,
)

__all__ = [
    "SafetyLevel",
    "SelectionContext",
    "SelectionStage",
    "StageOutcome",
    "ToolCatalog",
    "ToolSpec",
    "filter_by_names",
]

_EMPTY: Mapping[str, Any] = MappingProxyType({})


class SafetyLevel(enum.StrEnum):
    """How much harm a tool can do, in rank order (``read`` < ``write`` < ``destructive``)."""

    READ = "read"
    WRITE = "write"
    DESTRUCTIVE = "destructive"

    @property
    def rank(self) -> int:
        return _SAFETY_RANK[self]


def safety_rank(level: SafetyLevel | str) -> int:
    """The rank of a safety level (its value or the enum)."""
    rank = _SAFETY_RANK.get(level) if isinstance(level, str) else None
    return _SAFETY_RANK[SafetyLevel(level)] if rank is None else rank


_SAFETY_RANK: dict[str, int] = {
    SafetyLevel.READ: 0,
    SafetyLevel.WRITE: 1,
    SafetyLevel.DESTRUCTIVE: 2,
}


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """Metadata of one tool in the catalogue.

    * ``safety_level``: :class:`SafetyLevel` (or its value).
    * ``cost_usd``: cost of one call in USD, None when unknown.
    * ``required_capabilities``: what the runtime must provide.
    * ``categories``: labels the category filter matches.
    * ``agent_visible``: False for tools reserved to the framework.
    * ``trigger_keywords``: intent keywords; empty means "always include" on
      an action turn.
    * ``tool``: the bindable tool object, when the allowlist may re-add a
      tool that was not offered this turn.

    Construction fails with a ValueError naming the field: ``name`` a
    non-empty str; ``safety_level`` a SafetyLevel or its value; ``cost_usd``
    a finite int, float or Decimal >= 0, or None (NaN would pass every
    budget); ``categories``, ``roles`` and ``trigger_keywords`` iterables of
    str, never a str itself (it would read as one name per character);
    ``required_capabilities`` an iterable of hashable values (not a str);
    ``agent_visible`` a bool; ``description`` a str.
    """

    name: str
    safety_level: SafetyLevel | str = SafetyLevel.READ
    cost_usd: float | None = None
    required_capabilities: frozenset[Any] = frozenset()
    categories: frozenset[str] = frozenset()
    agent_visible: bool = True
    trigger_keywords: tuple[str, ...] = ()
    roles: frozenset[str] = frozenset()
    description: str = ""
    tool: Any = field(default=None, compare=False, hash=False)

    def __post_init__(self) -> None:
        owner = "ToolSpec"
        _c.nonempty_str(owner, "name", self.name)
        note = f"tool {self.name!r}"
        try:
            level = SafetyLevel(self.safety_level)
        except (ValueError, TypeError):
            raise _c.fail(
                owner,
                "safety_level",
                f"one of {[s.value for s in SafetyLevel]}",
                self.safety_level,
                note,
            ) from None
        object.__setattr__(self, "safety_level", level)
        if self.cost_usd is not None:
            _c.money(owner, "cost_usd", self.cost_usd)
        caps = self.required_capabilities
        if isinstance(caps, str | bytes) or not isinstance(caps, Iterable):
            raise _c.fail(owner, "required_capabilities", "an iterable (not a str)", caps, note)
        try:
            object.__setattr__(self, "required_capabilities", frozenset(caps))
        except TypeError:
            raise _c.fail(
                owner, "required_capabilities", "an iterable of hashable values", caps, note
            ) from None
        object.__setattr__(
            self, "categories", frozenset(_c.names(owner, "categories", self.categories))
        )
        object.__setattr__(self, "roles", frozenset(_c.names(owner, "roles", self.roles)))
        object.__setattr__(
            self, "trigger_keywords", _c.names(owner, "trigger_keywords", self.trigger_keywords)
        )
        _c.flag(owner, "agent_visible", self.agent_visible)
        if not isinstance(self.description, str):
            raise _c.fail(owner, "description", "a str", self.description, note)


class ToolCatalogue(Mapping[str, ToolSpec]):
    """An immutable name → :class:`ToolSpec` mapping.

    ``specs`` is an iterable of ToolSpec with unique names; anything else
    fails with a ValueError naming ``ToolCatalog.specs``.
    """

    __slots__ = ("_specs",)

    def __init__(self, specs: Iterable[ToolSpec] = ()) -> None:
        if isinstance(specs, str | bytes | Mapping) or not isinstance(specs, Iterable):
            raise _c.fail("ToolCatalog", "specs", "an iterable of ToolSpec", specs)
        table: dict[str, ToolSpec] = {}
        for i, spec in enumerate(specs):
            if not isinstance(spec, ToolSpec):
                raise _c.fail("ToolCatalog", f"specs[{i}]", "a ToolSpec", spec)
            if spec.name in table:
                raise _c.fail(
                    "ToolCatalog", "specs", "uniquely named", spec.name, "a duplicate tool"
                )
            table[spec.name] = spec
        self._specs = table

    def __getitem__(self, name: str) -> ToolSpec:
        return self._specs[name]

    def get(self, name: str, default: Any = None) -> Any:
        """The spec named ``name``, else ``default`` (the dict's own lookup)."""
        return self._specs.get(name, default)

    def __iter__(self) -> Any:
        return iter(self._specs)

    def __len__(self) -> int:
        return len(self._specs)

    def trigger_keywords(self) -> dict[str, tuple[str, ...]]:
        """name → trigger keywords, as IntentRoutingStage takes them."""
        return {name: spec.trigger_keywords for name, spec in self._specs.items()}

    def bindable(self, name: str) -> Any:
        """The object to bind for ``name``: its ``tool`` or the spec itself."""
        spec = self._specs[name]
        return spec if spec.tool is None else spec.tool


ToolCatalog = ToolCatalogue


@dataclass(frozen=True, slots=True)
class SelectionContext:
    """What stages see: the turn's messages and state, the offered tools,
    the role, and the forced tool resolved so far this iteration."""

    messages: tuple[Any, ...] = ()
    state: Mapping[str, Any] = field(default_factory=lambda: _EMPTY, hash=False)
    offered: tuple[Any, ...] = ()
    forced_tool: str | None = None
    role: str | None = None
    iteration: int = 0
    conversation_id: str | None = None
    agent_name: str | None = None

    @property
    def user_text(self) -> str:
        """Text of the most recent user message ('' when there is none)."""
        return last_user_text(self.messages)


@runtime_checkable
class SelectionStage(Protocol):
    """One narrowing (or widening) lever in the selection pipeline.

    ``name`` labels the stage in the decision trace. ``protects_forced``
    declares whether the pipeline reinstates a forced tool this stage
    dropped: True for preference stages (a role palette, a policy ceiling);
    a hard security filter sets it False. ``apply`` should not raise: a
    stage that can degrade returns ``StageOutcome.abstain(..., degraded=True)``;
    the pipeline contains a raise as a degraded abstain anyway.
    """

    name: str
    protects_forced: bool

    def apply(self, tools: tuple[Any, ...], ctx: SelectionContext) -> StageOutcome: ...


def filter_by_names(tools: Iterable[Any], names: set[str] | frozenset[str]) -> tuple[Any, ...]:
    """Keep tools whose name is in ``names``; unnamed tools survive."""
    kept = []
    for tool in tools:
        name = tool if type(tool) is str else tool_name(tool)
        if name is None or name in names:
            kept.append(tool)
    return tuple(kept)


def names_of(tools: Sequence[Any]) -> tuple[str, ...]:
    """The readable names of ``tools`` (unnamed tools are shown as ``?``)."""
    return tuple(tool_name(t) or "?" for t in tools)
