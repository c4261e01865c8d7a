"""The six selection stages, each with its documented decision matrix.

They share one signature (``apply(tools, ctx) -> StageOutcome``). Inputs
that vary per turn (an intent verdict, lazily routed names, a forced-tool
resolver) may be given as values or as callables of the
:class:`SelectionContext`, so a pipeline can be built once and reused.

Construction fails with a ValueError naming the class and field
(``IntentRoutingStage.always_include must be an iterable of str (not a
str), got 'abc'``). A sequence of names is never a str (it would read as
one name per character) and a callable is always synchronous. At run time
a name list that adopter code returns as one str is read as that one name
(as the role palette always did); a return value a stage cannot use makes
it abstain degraded, with the reason.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from seamscope.decisions import _checks as _c
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
    return [(t if type(t) is str else tool_name(t)) or "?" for t in before if id(t) not in kept]


def _short(names: Sequence[str], limit: int = 3) -> str:
    shown = ", ".join(names[:limit])
    return shown + (", …" if len(names) > limit else "")


def _resolve(value: Any, ctx: SelectionContext) -> Any:
    return value(ctx) if callable(value) else value


def _catalog(owner: str, value: object, *, optional: bool) -> None:
    if value is None and optional:
        return
    if not isinstance(value, ToolCatalog):
        raise _c.fail(owner, "catalog", "a ToolCatalog" + (" or None" if optional else ""), value)


def _names_at_run_time(value: Any) -> set[str] | None:
    """Names adopter code returned: a str is one name; None when the value
    is not an iterable of names at all."""
    if isinstance(value, str):
        return {value}
    if isinstance(value, bytes | Mapping) or not isinstance(value, Iterable):
        return None
    try:
        return {n for n in value if isinstance(n, str)}
    except Exception:
        return None


class AllowlistStage:
    """Re-add mandated tools that an earlier stage dropped.

    A mandated name is re-added from the tools offered this turn, or else
    from the catalogue (its bindable object). A name in neither is ignored,
    never fabricated: the pipeline constrains the choice set, it never
    authors tools. Abstains when it has nothing to re-add. Empty names in
    ``always_include`` are skipped, as the seed's stage skips them.
    """

    name = "allowlist"
    protects_forced = True

    def __init__(self, *, always_include: Sequence[str] = (), catalog: ToolCatalog | None = None):
        names = _c.names("AllowlistStage", "always_include", always_include)
        _catalog("AllowlistStage", catalog, optional=True)
        self._always_include = tuple(name for name in names if name)
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
        _c.maybe_callable("ForcedChoiceStage", "resolver", resolver)
        _c.nonempty_str("ForcedChoiceStage", "state_key", state_key)
        _c.maybe_callable("ForcedChoiceStage", "is_tool_message", is_tool_message, required=True)
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
    these attributes works. ``label`` must be a non-empty str and
    ``matched_tool_keywords`` an iterable of str (not a str).
    """

    __slots__ = ("label", "matched_tool_keywords")

    def __init__(self, label: str, matched_tool_keywords: Sequence[str] = ()) -> None:
        _c.nonempty_str("IntentVerdict", "label", label)
        self.label = label
        self.matched_tool_keywords = _c.names(
            "IntentVerdict", "matched_tool_keywords", matched_tool_keywords
        )

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

    ``verdict`` may be a value with a ``label`` (an :class:`IntentVerdict`
    or any object of that shape), a callable of the SelectionContext, or
    None. ``trigger_keywords`` maps tool names to iterables of keywords;
    empty names in ``always_include`` are skipped, as the seed's stage skips
    them. At run time a verdict without a ``label`` abstains degraded, and
    ``matched_tool_keywords`` given as one str is read as one name.
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
        owner = "IntentRoutingStage"
        if callable(verdict):
            _c.maybe_callable(owner, "verdict", verdict)
        elif verdict is not None and not hasattr(verdict, "label"):
            raise _c.fail(
                owner,
                "verdict",
                "an object with a label (an IntentVerdict), a callable or None",
                verdict,
            )
        _c.mapping(owner, "trigger_keywords", trigger_keywords)
        table: dict[str, tuple[str, ...]] = {}
        for name, keywords in (trigger_keywords or {}).items():
            if not isinstance(name, str) or not name:
                raise _c.fail(owner, "trigger_keywords", "keyed by non-empty tool names", name)
            table[name] = _c.names(owner, f"trigger_keywords[{name!r}]", keywords)
        names = _c.names(owner, "always_include", always_include)
        self._verdict = verdict
        self._trigger_keywords = table
        self._always_include = tuple(name for name in names if name)

    def apply(self, tools: tuple[Any, ...], ctx: SelectionContext) -> StageOutcome:
        verdict = _resolve(self._verdict, ctx)
        if verdict is not None and not hasattr(verdict, "label"):
            return StageOutcome.abstain(
                f"verdict {type(verdict).__name__} has no label; abstained", degraded=True
            )
        return self.decide(tools, verdict)

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
        keep.update(_names_at_run_time(getattr(verdict, "matched_tool_keywords", None)) or ())
        for tool in tools:
            name = tool if type(tool) is str else tool_name(tool)
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
    procedural routing this turn: abstain. A callable that returns one str
    routes to that one name; one that returns something that is not names
    makes the stage abstain degraded.
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
        self._allowed: Any
        if allowed_names is None:
            self._allowed = None
        elif callable(allowed_names):
            _c.maybe_callable("LazyRoutingStage", "allowed_names", allowed_names)
            self._allowed = allowed_names
        else:
            self._allowed = _c.names("LazyRoutingStage", "allowed_names", allowed_names)

    def apply(self, tools: tuple[Any, ...], ctx: SelectionContext) -> StageOutcome:
        allowed = _resolve(self._allowed, ctx)
        if allowed is None:
            return StageOutcome.abstain("no procedural routing")
        names = _names_at_run_time(allowed)
        if names is None:
            return StageOutcome.abstain(
                f"allowed_names returned {type(allowed).__name__}, not names; abstained",
                degraded=True,
            )
        kept = filter_by_names(tools, names)
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

    ``budget_usd`` is a finite int, float or Decimal >= 0 (NaN would turn
    the rule off silently); the flags are bools; ``available_capabilities``
    and ``categories`` iterables, never a str.
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
        owner = "PolicyStage"
        _catalog(owner, catalog, optional=False)
        try:
            self._max_safety = None if max_safety_level is None else SafetyLevel(max_safety_level)
        except (ValueError, TypeError):
            raise _c.fail(
                owner,
                "max_safety_level",
                f"one of {[s.value for s in SafetyLevel]} or None",
                max_safety_level,
            ) from None
        if budget_usd is not None:
            _c.money(owner, "budget_usd", budget_usd)
        caps = available_capabilities
        if caps is not None:
            if isinstance(caps, str | bytes) or not isinstance(caps, Iterable):
                raise _c.fail(
                    owner, "available_capabilities", "an iterable (not a str) or None", caps
                )
            try:
                caps = frozenset(caps)
            except TypeError:
                raise _c.fail(
                    owner, "available_capabilities", "an iterable of hashable values", caps
                ) from None
        self._catalog = catalog
        self._budget = budget_usd
        self._include_unknown_cost = _c.flag(owner, "include_unknown_cost", include_unknown_cost)
        self._capabilities = caps
        self._visible_only = _c.flag(owner, "agent_visible_only", agent_visible_only)
        self._categories = (
            None if categories is None else frozenset(_c.names(owner, "categories", categories))
        )
        # the catalogue and the rules are immutable: each tool's verdict is
        # judged once, here (a name absent from the catalogue is kept)
        self._verdicts = {name: self._verdict(name) for name in catalog}

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
            name = tool if type(tool) is str else tool_name(tool)
            why = None if name is None else self._verdicts.get(name)
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
    A raising resolver abstains degraded, as does one that returns
    something that is not names; a str is one name.
    """

    name = "role_palette"
    protects_forced = True

    def __init__(
        self, *, resolver: Callable[[str], Sequence[str] | None] | None = None, role: str = ""
    ) -> None:
        _c.maybe_callable("RolePaletteStage", "resolver", resolver)
        if not isinstance(role, str):
            raise _c.fail("RolePaletteStage", "role", "a str ('' for the context's role)", role)
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
        names = _names_at_run_time(palette)
        if names is None:
            return StageOutcome.abstain(
                f"role resolver returned {type(palette).__name__}, not names", degraded=True
            )
        if not names:
            _log.warning("role palette resolver returned [] for role %r: kept all tools", role)
            return StageOutcome.abstain(
                f"empty palette for role {role!r}: kept all tools", degraded=True
            )
        kept = filter_by_names(tools, names)
        return StageOutcome.select(kept, f"{role} palette{_delta(tools, kept)}")
