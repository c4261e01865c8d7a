"""The stage protocol, outcomes, the tool catalogue and the selection context."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol, runtime_checkable

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
        if not isinstance(self.name, str) or not self.name:
            raise ValueError("ToolSpec.name must be a non-empty str")
        object.__setattr__(self, "safety_level", SafetyLevel(self.safety_level))
        object.__setattr__(self, "required_capabilities", frozenset(self.required_capabilities))
        object.__setattr__(self, "categories", frozenset(self.categories))
        object.__setattr__(self, "roles", frozenset(self.roles))
        object.__setattr__(self, "trigger_keywords", tuple(self.trigger_keywords))
        if self.cost_usd is not None and (
            not isinstance(self.cost_usd, int | float) or self.cost_usd < 0
        ):
            raise ValueError(f"ToolSpec {self.name!r}: cost_usd must be a number >= 0 or None")


class ToolCatalogue(Mapping[str, ToolSpec]):
    """An immutable name → :class:`ToolSpec` mapping."""

    __slots__ = ("_specs",)

    def __init__(self, specs: Iterable[ToolSpec] = ()) -> None:
        table: dict[str, ToolSpec] = {}
        for spec in specs:
            if not isinstance(spec, ToolSpec):
                raise ValueError(f"ToolCatalog entries must be ToolSpec, got {type(spec)!r}")
            if spec.name in table:
                raise ValueError(f"ToolCatalog: duplicate tool {spec.name!r}")
            table[spec.name] = spec
        self._specs = table

    def __getitem__(self, name: str) -> ToolSpec:
        return self._specs[name]

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
        name = tool_name(tool)
        if name is None or name in names:
            kept.append(tool)
    return tuple(kept)


def names_of(tools: Sequence[Any]) -> tuple[str, ...]:
    """The readable names of ``tools`` (unnamed tools are shown as ``?``)."""
    return tuple(tool_name(t) or "?" for t in tools)
