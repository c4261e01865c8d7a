"""The six selection stages, each with its documented decision matrix.

They share one signature (``apply(tools, ctx) -> StageOutcome``). Inputs
that vary per turn (an intent verdict, lazily routed names, a forced-tool
resolver) may be given as values or as callables of the
:class:`SelectionContext`, so a pipeline can be built once and reused.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from seamscope.decisions._messages import (
    is_tool_message,
    message_role,
    tool_message_name,
    tool_name,
)
from seamscope.decisions.selection._types import (
    SafetyLevel,
    SelectionContext,
    StageOutcome,
    ToolCatalog,
    filter_by_names,
    safety_rank,
)

_log = logging.getLogger("seamscope.decisions")

__all__ = [
    "DEFAULT_ALWAYS_INCLUDE",
    "AllowlistStage",
    "ForcedChoiceStage",
    "IntentRoutingStage",
    "IntentVerdict",
    "LazyRoutingStage",
    "PolicyStage",
    "RolePaletteStage",
]

DEFAULT_ALWAYS_INCLUDE: tuple[str, ...] = ()
"""Names IntentRoutingStage keeps on every routed turn unless told otherwise."""


def _dropped(before: Sequence[Any], after: Sequence[Any]) -> list[str]:
    kept = {id(t) for t in after}
    return [tool_name(t) or "?" for t in before if id(t) not in kept]


def _short(names: Sequence[str], limit: int = 3) -> str:
    shown = ", ".join(names[:limit])
    return shown + (", …" if len(names) > limit else "")


def _resolve(value: Any, ctx: SelectionContext) -> Any:
    return value(ctx) if callable(value) else value


class AllowlistStage:
    """Re-add mandated tools that an earlier stage dropped.

    A mandated name is re-added from the tools offered this turn, or else
    from the catalogue (its bindable object). A name in neither is ignored,
    never fabricated: the pipeline constrains the choice set, it never
    authors tools. Abstains when it has nothing to re-add.
    """

    name = "allowlist"
    protects_forced = True

    def __init__(self, *, always_include: Sequence[str] = (), catalog: ToolCatalog | None = None):
        if isinstance(always_include, str):
            raise ValueError("AllowlistStage.always_include must be a sequence of names, not a str")
        self._always_include = tuple(name for name in always_include if name)
        self._catalog = catalog

    def apply(self, tools: tuple[Any, ...], ctx: SelectionContext) -> StageOutcome:
        if not self._always_include:
            return StageOutcome.abstain("no mandated tools")
        present = {tool_name(t) for t in tools}
        offered: dict[str | None, Any] | None = None  # read only when a name is missing
        added: list[Any] = []
        ignored: list[str] = []
        for name in self._always_include:
            if name in present:
                continue
            if offered is None:
                offered = {tool_name(t): t for t in ctx.offered}
            if name in offered:
                added.append(offered[name])
            elif self._catalog is not None and name in self._catalog:
                added.append(self._catalog.bindable(name))
            else:
                ignored.append(name)
            present.add(name)
        if not added:
            why = "all mandated tools present"
            if ignored:
                why += f"; ignored unknown {_short(ignored)}"
            return StageOutcome.abstain(why)
        reason = f"re-added {_short([tool_name(t) or '?' for t in added])}"
        if ignored:
            reason += f"; ignored unknown {_short(ignored)}"
        return StageOutcome.select((*tools, *added), reason)


class ForcedChoiceStage:
    """Resolve the forced tool choice for this iteration.

    Precedence: (1) an explicit ``state[state_key]`` stamp; (2) the resolver,
    re-run every iteration so force and release are symmetric; (3) None.
    The release check runs on both paths: once a tool message naming the
    forced tool is in this turn's history (after the last user message) the
    force is spent. A resolver that raises releases (a stalled loop is worse
    than an unforced turn) and the outcome is degraded. A forced tool that
    was not offered cannot be forced (the pipeline never authors tools):
    abstain, degraded. This stage never narrows the tools.
    """

    name = "forced_choice"
    protects_forced = False

    def __init__(
        self,
        *,
        resolver: Callable[[SelectionContext], str | None] | None = None,
        state_key: str = "forced_tool_choice",
        is_tool_message: Callable[[Any], bool] = is_tool_message,
    ) -> None:
        if resolver is not None and not callable(resolver):
            raise ValueError("ForcedChoiceStage.resolver must be callable or None")
        if not callable(is_tool_message):
            raise ValueError("ForcedChoiceStage.is_tool_message must be callable")
        self._resolver = resolver
        self._state_key = state_key
        self._is_tool_message = is_tool_message

    def _spent(self, forced: str, ctx: SelectionContext) -> bool:
        for message in reversed(ctx.messages):
            if message_role(message) == "user":
                return False
            if self._is_tool_message(message) and tool_message_name(message) == forced:
                return True
        return False

    def apply(self, tools: tuple[Any, ...], ctx: SelectionContext) -> StageOutcome:
        stamped = ctx.state.get(self._state_key) if ctx.state else None
        if stamped:
            forced, source = str(stamped), "state stamp"
        elif self._resolver is not None:
            try:
                resolved = self._resolver(ctx)
            except Exception as exc:
                return StageOutcome.abstain(
                    f"resolver raised {type(exc).__name__}; force released", degraded=True
                )
            if not resolved:
                return StageOutcome.abstain("no force this iteration")
            forced, source = str(resolved), "resolver"
        else:
            return StageOutcome.abstain("no force this iteration")
        if self._spent(forced, ctx):
            return StageOutcome.abstain(f"force {forced!r} released: tool already ran")
        if forced not in {tool_name(t) for t in tools}:
            return StageOutcome.abstain(
                f"forced {forced!r} ({source}) not offered; force released", degraded=True
            )
        return StageOutcome.select(tools, f"forced {forced!r} ({source})", forced_tool=forced)


class IntentVerdict:
    """A minimal IntentVerdict shape: ``label`` and ``matched_tool_keywords``.

    ``label`` is ``knowledge``, ``action`` or ``ambiguous``; any object with
    these attributes works.
    """

    __slots__ = ("label", "matched_tool_keywords")

    def __init__(self, label: str, matched_tool_keywords: Sequence[str] = ()) -> None:
        self.label = label
        self.matched_tool_keywords = tuple(matched_tool_keywords)

    def __repr__(self) -> str:
        return f"IntentVerdict({self.label!r}, {self.matched_tool_keywords!r})"


class IntentRoutingStage:
    """Narrow the turn's tools from an IntentVerdict-shaped object.

    Decision matrix:

    * no verdict, or ``ambiguous``: abstain (a noisy signal must not cost recall);
    * ``knowledge``: keep only the always-include names (unnamed tools survive);
    * ``action`` (or any other label): keep the verdict's matched tools, every
      tool with no trigger keywords declared (an absent entry means "always
      include"), and the always-include names.

    ``verdict`` may be a value or a callable of the SelectionContext.
    """

    name = "intent_routing"
    protects_forced = True

    def __init__(
        self,
        *,
        verdict: Any = None,
        trigger_keywords: Mapping[str, Sequence[str]] | None = None,
        always_include: Sequence[str] = DEFAULT_ALWAYS_INCLUDE,
    ) -> None:
        self._verdict = verdict
        self._trigger_keywords = dict(trigger_keywords or {})
        self._always_include = tuple(name for name in always_include if name)

    def apply(self, tools: tuple[Any, ...], ctx: SelectionContext) -> StageOutcome:
        return self.decide(tools, _resolve(self._verdict, ctx))

    def decide(self, tools: Sequence[Any], verdict: Any = None) -> StageOutcome:
        """The decision matrix, synchronously, for a given verdict."""
        tools = tuple(tools)
        if not tools:
            return StageOutcome.abstain("no candidate tools")
        label = getattr(verdict, "label", None)
        if verdict is None or label == "ambiguous":
            return StageOutcome.abstain("no actionable verdict")
        always = set(self._always_include)
        if label == "knowledge":
            kept = filter_by_names(tools, always)
            return StageOutcome.select(
                kept, f"knowledge turn: always-include only{_delta(tools, kept)}"
            )
        keep = set(always)
        keep.update(getattr(verdict, "matched_tool_keywords", None) or ())
        for tool in tools:
            name = tool_name(tool)
            if name is not None and not self._trigger_keywords.get(name):
                keep.add(name)
        kept = filter_by_names(tools, keep)
        return StageOutcome.select(kept, f"{label} turn: keyword intersection{_delta(tools, kept)}")


def _delta(before: Sequence[Any], after: Sequence[Any]) -> str:
    dropped = _dropped(before, after)
    return f" (−{len(dropped)}: {_short(dropped)})" if dropped else ""


class LazyRoutingStage:
    """Narrow to the tool names procedural (lazy) routing resolved.

    ``allowed_names`` None (or a callable returning None) means no
    procedural routing this turn: abstain.
    """

    name = "lazy_routing"
    protects_forced = True

    def __init__(
        self,
        *,
        allowed_names: (
            Sequence[str] | Callable[[SelectionContext], Sequence[str] | None] | None
        ) = None,
    ) -> None:
        if isinstance(allowed_names, str):
            raise ValueError("LazyRoutingStage.allowed_names must be a sequence of names")
        self._allowed = (
            allowed_names
            if callable(allowed_names) or allowed_names is None
            else (tuple(allowed_names))
        )

    def apply(self, tools: tuple[Any, ...], ctx: SelectionContext) -> StageOutcome:
        allowed = _resolve(self._allowed, ctx)
        if allowed is None:
            return StageOutcome.abstain("no procedural routing")
        kept = filter_by_names(tools, set(allowed))
        return StageOutcome.select(kept, f"procedural routing{_delta(tools, kept)}")


class PolicyStage:
    """Drop tools the configured policy forbids.

    Rules, each applied only when configured: a safety ceiling
    (``max_safety_level``), a per-call budget (``budget_usd``; a tool of
    unknown cost passes only when ``include_unknown_cost``), required
    capabilities (all must be in ``available_capabilities``), agent
    visibility (``agent_visible_only``), categories (a tool must share one
    with ``categories``; a tool with none does not). A tool absent from the
    catalogue is kept: "the registry has never heard of this tool" must stay
    distinguishable from "policy forbids this tool". With no rule configured
    the stage abstains.
    """

    name = "policy"
    protects_forced = True

    def __init__(
        self,
        *,
        catalog: ToolCatalog,
        max_safety_level: SafetyLevel | str | None = None,
        budget_usd: float | None = None,
        include_unknown_cost: bool = True,
        available_capabilities: set[Any] | frozenset[Any] | None = None,
        agent_visible_only: bool = False,
        categories: Sequence[str] | None = None,
    ) -> None:
        if not isinstance(catalog, Mapping):
            raise ValueError("PolicyStage.catalog must be a ToolCatalog")
        try:
            self._max_safety = None if max_safety_level is None else SafetyLevel(max_safety_level)
        except ValueError:
            raise ValueError(
                f"PolicyStage.max_safety_level must be one of "
                f"{[s.value for s in SafetyLevel]}, got {max_safety_level!r}"
            ) from None
        if budget_usd is not None and (not isinstance(budget_usd, int | float) or budget_usd < 0):
            raise ValueError("PolicyStage.budget_usd must be a number >= 0 or None")
        if isinstance(categories, str):
            raise ValueError("PolicyStage.categories must be a sequence of names")
        self._catalog = catalog
        self._budget = budget_usd
        self._include_unknown_cost = include_unknown_cost
        self._capabilities = (
            None if available_capabilities is None else frozenset(available_capabilities)
        )
        self._visible_only = agent_visible_only
        self._categories = None if categories is None else frozenset(categories)

    def _configured(self) -> bool:
        return (
            self._max_safety is not None
            or self._budget is not None
            or (not self._include_unknown_cost and self._budget is not None)
            or self._capabilities is not None
            or self._visible_only
            or self._categories is not None
        )

    def _verdict(self, name: str) -> str | None:
        spec = self._catalog.get(name)
        if spec is None:
            return None
        if self._max_safety is not None and safety_rank(spec.safety_level) > self._max_safety.rank:
            return f"safety ceiling {self._max_safety.value!r}"
        if spec.cost_usd is None:
            if self._budget is not None and not self._include_unknown_cost:
                return "unknown cost"
        elif self._budget is not None and spec.cost_usd > self._budget:
            return f"budget ${self._budget:g}"
        if self._capabilities is not None and not spec.required_capabilities <= self._capabilities:
            return "missing capability"
        if self._visible_only and not spec.agent_visible:
            return "not agent-visible"
        if self._categories is not None and not (spec.categories & self._categories):
            return "category"
        return None

    def apply(self, tools: tuple[Any, ...], ctx: SelectionContext) -> StageOutcome:
        if not self._configured():
            return StageOutcome.abstain("no policy configured")
        kept: list[Any] = []
        by_rule: dict[str, list[str]] = {}
        for tool in tools:
            name = tool_name(tool)
            why = None if name is None else self._verdict(name)
            if why is None:
                kept.append(tool)
            else:
                by_rule.setdefault(why, []).append(name or "?")
        if not by_rule:
            return StageOutcome.select(kept, "policy admits every tool")
        parts = [f"{rule} (−{len(names)}: {_short(names)})" for rule, names in by_rule.items()]
        return StageOutcome.select(kept, "; ".join(parts))


class RolePaletteStage:
    """Narrow to the palette a role resolver returns.

    Three answers, three meanings: None, no palette (abstain); a non-empty
    list, the palette (it only narrows: names that were not offered are not
    honoured); ``[]``, abstain degraded with a warning, since binding an
    empty palette would silently drop every tool and any forced choice.

    ``resolver(role)`` receives ``role`` or, when empty, the context's role.
    A raising resolver abstains degraded.
    """

    name = "role_palette"
    protects_forced = True

    def __init__(
        self, *, resolver: Callable[[str], Sequence[str] | None] | None = None, role: str = ""
    ) -> None:
        if resolver is not None and not callable(resolver):
            raise ValueError("RolePaletteStage.resolver must be callable or None")
        self._resolver = resolver
        self._role = role

    def apply(self, tools: tuple[Any, ...], ctx: SelectionContext) -> StageOutcome:
        if self._resolver is None:
            return StageOutcome.abstain("no role resolver")
        role = self._role or ctx.role or ""
        try:
            palette = self._resolver(role)
        except Exception as exc:
            return StageOutcome.abstain(f"role resolver raised {type(exc).__name__}", degraded=True)
        if palette is None:
            return StageOutcome.abstain(f"no palette for role {role!r}")
        names = [palette] if isinstance(palette, str) else list(palette)
        if not names:
            _log.warning("role palette resolver returned [] for role %r: kept all tools", role)
            return StageOutcome.abstain(
                f"empty palette for role {role!r}: kept all tools", degraded=True
            )
        kept = filter_by_names(tools, set(names))
        return StageOutcome.select(kept, f"{role} palette{_delta(tools, kept)}")
