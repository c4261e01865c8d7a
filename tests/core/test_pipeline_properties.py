"""Properties of the selection pipeline over generated stages and tool sets."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from seamscope.decisions.records import (
    SelectionResult,
    StageOutcome,
)
from seamscope.decisions.selection import (
    ForcedChoiceStage,
    SelectionContext,
    SelectionPipeline,
    ToolCatalog,
    ToolSpec,
)

from ._support import ScriptedStage

UNIVERSE = [f"t{i}" for i in range(8)]
STRANGERS = ["ghost", "phantom"]  # never offered, never catalogued

names = st.lists(st.sampled_from(UNIVERSE), unique=True, max_size=len(UNIVERSE))


@dataclass(frozen=True)
class StageSpec:
    kind: str  # "select" | "abstain" | "raise"
    names: tuple[str, ...]
    protects_forced: bool


stage_specs = st.builds(
    StageSpec,
    kind=st.sampled_from(["select", "abstain", "raise"]),
    names=st.lists(st.sampled_from(UNIVERSE + STRANGERS), max_size=10).map(tuple),
    protects_forced=st.booleans(),
)


def build_stage(index: int, spec: StageSpec) -> ScriptedStage:
    name = f"s{index}"
    if spec.kind == "raise":
        return ScriptedStage(
            name, protects_forced=spec.protects_forced, error=RuntimeError("stage bug")
        )
    if spec.kind == "abstain":
        return ScriptedStage(
            name, StageOutcome.abstain("no opinion"), protects_forced=spec.protects_forced
        )
    return ScriptedStage(
        name, StageOutcome.select(spec.names, "scripted"), protects_forced=spec.protects_forced
    )


@st.composite
def scenarios(
    draw: st.DrawFn,
) -> tuple[list[str], list[str], list[StageSpec], str | None, bool]:
    offered = draw(names)
    catalogued = draw(names)
    specs = draw(st.lists(stage_specs, max_size=6))
    forced = draw(st.none() | st.sampled_from(offered)) if offered else None
    via_stage = draw(st.booleans())
    return offered, catalogued, specs, forced, via_stage


def run(
    offered: list[str],
    catalogued: list[str],
    specs: list[StageSpec],
    forced: str | None,
    via_stage: bool,
) -> tuple[SelectionResult, list[str]]:
    stages: list[object] = [build_stage(i, spec) for i, spec in enumerate(specs)]
    if forced is not None and via_stage:
        stages.insert(0, ForcedChoiceStage())
        ctx = SelectionContext(state={"forced_tool_choice": forced})
    else:
        ctx = SelectionContext(forced_tool=forced)
    catalog = ToolCatalog(ToolSpec(n) for n in catalogued)
    pipeline = SelectionPipeline(stages, catalog=catalog)  # type: ignore[arg-type]
    return pipeline.run(offered, ctx), [s.name for s in stages]  # type: ignore[attr-defined]


@settings(max_examples=200, deadline=None)
@given(scenarios())
def test_the_pipeline_never_authors_a_tool(
    scenario: tuple[list[str], list[str], list[StageSpec], str | None, bool],
) -> None:
    offered, catalogued, *_ = scenario
    result, _ = run(*scenario)
    strays = set(result.selected) - set(offered) - set(catalogued)
    assert set() == strays


@settings(max_examples=200, deadline=None)
@given(scenarios())
def test_a_forced_tool_survives_every_protects_forced_stage(
    scenario: tuple[list[str], list[str], list[StageSpec], str | None, bool],
) -> None:
    _, _, specs, forced, _ = scenario
    result, _ = run(*scenario)
    lost = [
        r.name
        for r in result.records
        if r.protects_forced
        and r.forced_tool is not None
        and r.forced_tool in r.before
        and r.forced_tool not in r.after
    ]
    assert [] == lost
    if forced is not None and all(spec.protects_forced for spec in specs):
        assert (True, forced) == (forced in result.selected, result.forced_tool)


@settings(max_examples=200, deadline=None)
@given(scenarios())
def test_reinstatement_is_recorded_exactly_where_it_happened(
    scenario: tuple[list[str], list[str], list[StageSpec], str | None, bool],
) -> None:
    offered, catalogued, specs, forced, via_stage = scenario
    result, _ = run(*scenario)
    scripted = result.records[1:] if forced is not None and via_stage else result.records
    expected = []
    for record, spec in zip(scripted, specs, strict=True):
        allowed = set(offered) | set(catalogued)
        stage_kept = [n for n in spec.names if n in allowed]
        expected.append(
            spec.kind == "select"
            and spec.protects_forced
            and record.forced_tool is not None
            and record.forced_tool in record.before
            and record.forced_tool not in stage_kept
        )
    assert expected == [r.forced_reinstated for r in scripted]


@settings(max_examples=200, deadline=None)
@given(scenarios())
def test_the_trace_has_one_record_per_stage_in_order(
    scenario: tuple[list[str], list[str], list[StageSpec], str | None, bool],
) -> None:
    offered, *_ = scenario
    result, stage_names = run(*scenario)
    chain_before = [tuple(offered), *(r.after for r in result.records)][: len(result.records)]
    assert (
        stage_names,
        list(range(len(stage_names))),
        chain_before,
        result.records[-1].after if result.records else tuple(offered),
    ) == (
        [r.name for r in result.records],
        [r.index for r in result.records],
        [r.before for r in result.records],
        result.selected,
    )


@settings(max_examples=200, deadline=None)
@given(scenarios())
def test_a_raising_stage_is_always_a_degraded_abstain_with_its_error(
    scenario: tuple[list[str], list[str], list[StageSpec], str | None, bool],
) -> None:
    _, _, specs, forced, via_stage = scenario
    result, _ = run(*scenario)
    scripted = result.records[1:] if forced is not None and via_stage else result.records
    assert [spec.kind == "raise" for spec in specs] == [
        r.degraded and r.error is not None and r.before == r.after and r.outcome == "abstain"
        for r in scripted
    ]
