"""The selection pipeline: stages in declared order, and its decision trace."""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from seamscope.decisions import _checks as _c
from seamscope.decisions._messages import tool_name
from seamscope.decisions._observer import DecisionObserver, check_observer, guard_observer
from seamscope.decisions.records import (
    SelectionResult,
    StageOutcomeKind,
    StageRecord,
    contained_error,
)
from seamscope.decisions.selection._types import (
    SelectionContext,
    SelectionStage,
    StageOutcome,
    ToolCatalog,
)

__all__ = ["SelectionPipeline", "SelectionResult", "StageRecord"]

_log = logging.getLogger("seamscope.decisions")


def _offered_tools(tools: object) -> tuple[Any, ...]:
    """The offered tools as a tuple. A single tool where the sequence belongs
    (a str, a mapping that names one tool, anything not iterable) is read as
    that one tool and None as no tools, with a WARNING: reading a str one
    tool per character would offer tools that do not exist. An iterable that
    raises while it is read offers no tools (WARNING too)."""
    if isinstance(tools, tuple):
        return tools
    if isinstance(tools, list):
        return tuple(tools)
    if tools is None:
        _log.warning("selection: tools=None read as no tools")
        return ()
    single = isinstance(tools, str | bytes) or not isinstance(tools, Iterable)
    if not single and isinstance(tools, Mapping):
        single = tool_name(tools) is not None
    if single:
        _log.warning("selection: tools given as one %s, read as one tool", type(tools).__qualname__)
        return (tools,)
    try:
        return tuple(tools)  # type: ignore[arg-type]
    except Exception as exc:
        _log.warning("selection: reading the tools raised %s; no tools", type(exc).__qualname__)
        return ()


class SelectionPipeline:
    """Runs selection stages in declared order over the offered tools.

    Guarantees (each is a test):

    * never authors a tool: the result holds only offered tools, or
      catalogue tools a stage (the allowlist) re-added;
    * a stage that raises, or returns anything but a StageOutcome (an
      awaitable included: it is closed, never awaited), is contained as a
      degraded abstain, its error recorded (``source`` ``stage``);
    * a forced tool dropped by a ``protects_forced`` stage is reinstated and
      that is recorded;
    * the trace has exactly one record per stage, in order.

    Construction fails fast with a ValueError naming the field: ``stages``
    an iterable of stages, each with a non-empty, unique str ``name``, a
    bool ``protects_forced`` and a synchronous callable ``apply``;
    ``catalog`` a ToolCatalog or None; ``observer`` a DecisionObserver or
    None. :meth:`run` reads a single tool given where the sequence belongs
    as that one tool (a WARNING is logged), never one tool per character.
    """

    __slots__ = ("_catalog", "_observer", "_stages")

    def __init__(
        self,
        stages: Sequence[SelectionStage],
        *,
        catalog: ToolCatalog | None = None,
        observer: DecisionObserver | None = None,
    ) -> None:
        owner = "SelectionPipeline"
        if isinstance(stages, str | bytes | Mapping) or not isinstance(stages, Iterable):
            raise _c.fail(owner, "stages", "an iterable of SelectionStage", stages)
        stages = tuple(stages)
        names: set[str] = set()
        for i, stage in enumerate(stages):
            for attr in ("name", "protects_forced", "apply"):
                if not hasattr(stage, attr):
                    raise _c.fail(
                        owner, f"stages[{i}]", "a SelectionStage", stage, f"missing {attr!r}"
                    )
            _c.nonempty_str(owner, f"stages[{i}].name", stage.name)
            _c.flag(owner, f"stages[{i}].protects_forced", stage.protects_forced)
            _c.maybe_callable(owner, f"stages[{i}].apply", stage.apply, required=True)
            if stage.name in names:
                raise _c.fail(
                    owner, "stages", "uniquely named", stage.name, "a duplicate stage name"
                )
            names.add(stage.name)
        if catalog is not None and not isinstance(catalog, ToolCatalog):
            raise _c.fail(owner, "catalog", "a ToolCatalog or None", catalog)
        check_observer(owner, observer)
        self._stages = stages
        self._catalog = catalog
        self._observer = guard_observer(observer)

    @property
    def stages(self) -> tuple[SelectionStage, ...]:
        return self._stages

    def _allowed_unnamed(
        self, offered_tools: tuple[Any, ...], offered_raw: list[str | None]
    ) -> set[int]:
        pairs = zip(offered_tools, offered_raw, strict=True)
        allowed = {id(t) for t, name in pairs if name is None}
        if self._catalog is not None:
            allowed.update(id(self._catalog.bindable(n)) for n in self._catalog)
        return allowed

    def reuse(
        self,
        previous: SelectionResult,
        tools: Sequence[Any],
        ctx: SelectionContext | None = None,
    ) -> SelectionResult:
        """``previous`` again, with no stage run: the caller found this
        iteration's selection inputs unchanged. The observer records the
        selection (``reused`` set on the result it reads) and no stage.

        Valid only for stages that decide from the inputs the caller compared
        (a stage that reads the messages or the state may decide otherwise
        on a later iteration)."""
        start = time.perf_counter()
        ctx = SelectionContext() if ctx is None else ctx
        ctx = replace(ctx, offered=_offered_tools(tools))
        obs = self._observer
        handle = obs.start_selection(ctx, previous.offered)
        result = replace(previous, reused=True, duration_s=time.perf_counter() - start)
        obs.end_selection(handle, result)
        return result

    def run(
        self,
        tools: Sequence[Any],
        ctx: SelectionContext | None = None,
        *,
        fixed: Sequence[Any] = (),
    ) -> SelectionResult:
        """Select this iteration's tools from ``tools`` (the offered set).

        ``fixed``: tools the framework binds whatever the stages decide (a
        structured-output tool). No stage sees them; they are added as they
        are to the offered and the selected tools, so the result (and its
        trace) names every tool the model is bound to.
        """
        offered_tools = _offered_tools(tools)
        fixed_tools = tuple(fixed)
        fixed_names = tuple([tool_name(t) or "?" for t in fixed_tools])
        # each tool's name is read once per run: ``raw`` lists tool_name()
        # (None for an unnamed tool), ``names`` the readable names (``?``)
        offered_raw = [t if type(t) is str else tool_name(t) for t in offered_tools]
        offered = tuple([n or "?" for n in offered_raw])
        ctx = SelectionContext() if ctx is None else ctx
        ctx = replace(ctx, offered=offered_tools)
        obs = self._observer
        handle = obs.start_selection(ctx, offered + fixed_names)
        start = time.perf_counter()
        allowed = set(offered)
        if self._catalog is not None:
            allowed.update(self._catalog)
        # unnamed tools cannot be checked by name: admit only the very objects
        # that were offered (or a catalogue entry's bindable object); built
        # the first time a stage returns an unnamed tool
        allowed_unnamed: set[int] | None = None
        current = offered_tools
        current_raw = offered_raw
        current_names = offered
        forced = ctx.forced_tool
        records = []
        for index, stage in enumerate(self._stages):
            stage_ctx = ctx if forced == ctx.forced_tool else replace(ctx, forced_tool=forced)
            h = obs.start_stage(stage_ctx, index, stage)
            t0 = time.perf_counter()
            before = current
            before_raw = current_raw
            before_names = current_names
            error = None
            try:
                outcome = stage.apply(before, stage_ctx)
                if not isinstance(outcome, StageOutcome):
                    if inspect.iscoroutine(outcome):
                        outcome.close()  # never awaited: close it so it does not warn later
                    raise TypeError(
                        f"stage returned {type(outcome).__name__}, expected StageOutcome"
                    )
            except Exception as exc:
                error = contained_error("stage", exc)
                outcome = StageOutcome.abstain(
                    f"stage raised {error.error_type}: contained as abstain", degraded=True
                )
            rejected: list[str] = []
            reinstated = False
            if outcome.forced_tool is not None:
                forced = outcome.forced_tool
            if outcome.kind is StageOutcomeKind.SELECT and outcome.tools is not None:
                after: list[Any] = []
                after_raw: list[str | None] = []
                for tool in outcome.tools:
                    # a str is its own name (the common case, read without a call)
                    name = tool if type(tool) is str else tool_name(tool)
                    if name is None:
                        if allowed_unnamed is None:
                            allowed_unnamed = self._allowed_unnamed(offered_tools, offered_raw)
                        if id(tool) not in allowed_unnamed:
                            rejected.append("?")
                            continue
                    elif name not in allowed:
                        rejected.append(name)
                        continue
                    after.append(tool)
                    after_raw.append(name)
                if forced is not None and stage.protects_forced and forced not in after_raw:
                    for tool, name in zip(before, before_raw, strict=True):
                        if name == forced:
                            after.append(tool)
                            after_raw.append(name)
                            reinstated = True
                            break
                current = tuple(after)
                current_raw = after_raw
                current_names = tuple([n or "?" for n in after_raw])
            after_names = current_names
            if after_names == before_names:
                dropped: tuple[str, ...] = ()
                added: tuple[str, ...] = ()
            else:
                after_set = set(after_names)
                before_set = set(before_names)
                dropped = tuple([n for n in before_names if n not in after_set])
                added = tuple([n for n in after_names if n not in before_set])
            record = StageRecord(
                index=index,
                name=stage.name,
                outcome=outcome.kind,
                reason=outcome.reason,
                degraded=outcome.degraded,
                protects_forced=bool(stage.protects_forced),
                before=before_names,
                after=after_names,
                dropped=dropped,
                added=added,
                rejected=tuple(rejected),
                forced_tool=forced,
                forced_reinstated=reinstated,
                error=error,
                duration_s=time.perf_counter() - t0,
            )
            records.append(record)
            obs.end_stage(h, record)
        if forced is not None and forced not in current_raw:
            # a stage that may drop a forced tool (protects_forced=False) did:
            # forcing an unbound tool would stall the model, so release it.
            forced = None
        result = SelectionResult(
            tools=current + fixed_tools,
            forced_tool=forced,
            records=tuple(records),
            offered=offered + fixed_names,
            duration_s=time.perf_counter() - start,
        )
        obs.end_selection(handle, result)
        return result
