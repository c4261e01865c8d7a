"""The selection pipeline: declared order, containment, forced reinstatement, trace."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from seamscope.decisions import Message, ToolCall
from seamscope.decisions.records import (
    ContainedError,
    SelectionResult,
    StageOutcome,
    StageOutcomeKind,
    StageRecord,
)
from seamscope.decisions.selection import (
    AllowlistStage,
    ForcedChoiceStage,
    IntentRoutingStage,
    IntentVerdict,
    LazyRoutingStage,
    PolicyStage,
    RolePaletteStage,
    SafetyLevel,
    SelectionContext,
    SelectionPipeline,
    ToolCatalog,
    ToolSpec,
)

from ._support import ScriptedStage

SELECT = StageOutcomeKind.SELECT
ABSTAIN = StageOutcomeKind.ABSTAIN


def rec(index: int, name: str, outcome: StageOutcomeKind, reason: str, **kw: Any) -> StageRecord:
    base: dict[str, Any] = {
        "degraded": False,
        "protects_forced": True,
        "dropped": (),
        "added": (),
        "rejected": (),
        "forced_tool": None,
        "forced_reinstated": False,
        "error": None,
    }
    base.update(kw)
    return StageRecord(index=index, name=name, outcome=outcome, reason=reason, **base)


def keep(*names: str) -> Any:
    return lambda tools: tuple(t for t in tools if t in names)


def test_stages_run_in_declared_order_each_over_the_previous_result() -> None:
    first = ScriptedStage("first", keep("a", "b", "c"))
    second = ScriptedStage("second", StageOutcome.abstain("nothing to say"))
    third = ScriptedStage("third", keep("a", "c"))
    result = SelectionPipeline([first, second, third]).run(["a", "b", "c", "d"])
    assert (
        [("a", "b", "c", "d")],
        [("a", "b", "c")],
        [("a", "b", "c")],
        ("a", "c"),
    ) == (
        [tools for tools, _ in first.seen],
        [tools for tools, _ in second.seen],
        [tools for tools, _ in third.seen],
        result.tools,
    )


def test_pipeline_returns_the_tools_and_one_record_per_stage() -> None:
    result = SelectionPipeline(
        [
            ScriptedStage("narrow", keep("a", "b", "c")),
            ScriptedStage("quiet", StageOutcome.abstain("nothing to say")),
            ScriptedStage("narrow_more", keep("a", "c"), protects_forced=False),
        ]
    ).run(["a", "b", "c", "d"])
    assert (
        SelectionResult(
            tools=("a", "c"),
            forced_tool=None,
            records=(
                rec(
                    0,
                    "narrow",
                    SELECT,
                    "narrow narrowed",
                    before=("a", "b", "c", "d"),
                    after=("a", "b", "c"),
                    dropped=("d",),
                ),
                rec(
                    1,
                    "quiet",
                    ABSTAIN,
                    "nothing to say",
                    before=("a", "b", "c"),
                    after=("a", "b", "c"),
                ),
                rec(
                    2,
                    "narrow_more",
                    SELECT,
                    "narrow_more narrowed",
                    protects_forced=False,
                    before=("a", "b", "c"),
                    after=("a", "c"),
                    dropped=("b",),
                ),
            ),
            offered=("a", "b", "c", "d"),
        )
        == result
    )
    assert (("a", "c"), ("b", "d"), False) == (result.selected, result.dropped, result.reinstated)


def test_records_carry_a_non_negative_duration() -> None:
    result = SelectionPipeline([ScriptedStage("s", keep("a"))]).run(["a", "b"])
    assert [True] == [
        isinstance(r.duration_s, float) and r.duration_s >= 0.0 for r in result.records
    ]


def test_stages_see_the_offered_tools_in_their_context() -> None:
    stage = ScriptedStage("s", StageOutcome.abstain("x"))
    SelectionPipeline([stage]).run(["a", "b"], SelectionContext(role="analyst", iteration=3))
    _, seen = stage.seen[0]
    assert (("a", "b"), "analyst", 3) == (seen.offered, seen.role, seen.iteration)


@pytest.mark.parametrize(
    ("stage", "error"),
    [
        (
            ScriptedStage("boom", error=RuntimeError("stage bug")),
            ContainedError("stage", "RuntimeError", "stage bug"),
        ),
        (
            ScriptedStage("wrong", ["a"]),
            ContainedError("stage", "TypeError", "stage returned list, expected StageOutcome"),
        ),
    ],
    ids=["raises", "returns-non-outcome"],
)
def test_a_failing_stage_is_contained_as_a_degraded_abstain(
    stage: ScriptedStage, error: ContainedError
) -> None:
    after = ScriptedStage("after", keep("a"))
    result = SelectionPipeline([stage, after]).run(["a", "b"])
    assert (
        (
            rec(
                0,
                stage.name,
                ABSTAIN,
                f"stage raised {error.error_type}: contained as abstain",
                degraded=True,
                before=("a", "b"),
                after=("a", "b"),
                error=error,
            ),
            rec(
                1,
                "after",
                SELECT,
                "after narrowed",
                before=("a", "b"),
                after=("a",),
                dropped=("b",),
            ),
        ),
        ("a",),
    ) == (result.records, result.tools)


def test_a_forced_tool_dropped_by_a_protecting_stage_is_reinstated_and_recorded() -> None:
    result = SelectionPipeline(
        [
            ForcedChoiceStage(),
            RolePaletteStage(resolver=lambda role: ["search"], role="analyst"),
        ]
    ).run(
        ["search", "fetch_data", "deploy"],
        SelectionContext(state={"forced_tool_choice": "fetch_data"}),
    )
    assert (
        SelectionResult(
            tools=("search", "fetch_data"),
            forced_tool="fetch_data",
            records=(
                rec(
                    0,
                    "forced_choice",
                    SELECT,
                    "forced 'fetch_data' (state stamp)",
                    protects_forced=False,
                    before=("search", "fetch_data", "deploy"),
                    after=("search", "fetch_data", "deploy"),
                    forced_tool="fetch_data",
                ),
                rec(
                    1,
                    "role_palette",
                    SELECT,
                    "analyst palette (−2: fetch_data, deploy)",
                    before=("search", "fetch_data", "deploy"),
                    after=("search", "fetch_data"),
                    dropped=("deploy",),
                    forced_tool="fetch_data",
                    forced_reinstated=True,
                ),
            ),
            offered=("search", "fetch_data", "deploy"),
        )
        == result
    )
    assert True is result.reinstated


def test_a_stage_that_does_not_protect_the_force_may_drop_it_and_the_force_is_released() -> None:
    result = SelectionPipeline(
        [
            ForcedChoiceStage(),
            ScriptedStage("security", keep("search"), protects_forced=False),
            RolePaletteStage(resolver=lambda role: ["search"], role="analyst"),
        ]
    ).run(["search", "deploy"], SelectionContext(state={"forced_tool_choice": "deploy"}))
    assert (("search",), None, [False, False, False]) == (
        result.tools,
        result.forced_tool,
        [r.forced_reinstated for r in result.records],
    )


def test_later_stages_see_the_force_an_earlier_stage_resolved() -> None:
    later = ScriptedStage("later", StageOutcome.abstain("x"))
    SelectionPipeline([ForcedChoiceStage(resolver=lambda c: "deploy"), later]).run(
        ["search", "deploy"]
    )
    assert ["deploy"] == [c.forced_tool for _, c in later.seen]


def test_a_force_given_in_the_context_is_protected() -> None:
    result = SelectionPipeline([LazyRoutingStage(allowed_names=["search"])]).run(
        ["search", "deploy"], SelectionContext(forced_tool="deploy")
    )
    assert (("search", "deploy"), "deploy", True) == (
        result.tools,
        result.forced_tool,
        result.reinstated,
    )


def test_the_pipeline_never_authors_a_tool() -> None:
    fabricated_unnamed = object()
    result = SelectionPipeline(
        [ScriptedStage("widen", StageOutcome.select(["a", "ghost", fabricated_unnamed], "widen"))]
    ).run(["a", "b"])
    assert (
        ("a",),
        rec(
            0,
            "widen",
            SELECT,
            "widen",
            before=("a", "b"),
            after=("a",),
            dropped=("b",),
            rejected=("ghost", "?"),
        ),
    ) == (result.tools, result.records[0])


def test_unnamed_offered_tools_may_pass_through_a_stage() -> None:
    offered_unnamed = object()
    result = SelectionPipeline([ScriptedStage("echo", lambda tools: tools)]).run(
        ["a", offered_unnamed]
    )
    assert (("a", offered_unnamed), ()) == (result.tools, result.records[0].rejected)


def test_catalogue_tools_may_be_re_added_by_the_allowlist() -> None:
    catalog = ToolCatalog([ToolSpec("hydrate_context"), ToolSpec("search")])
    result = SelectionPipeline(
        [
            LazyRoutingStage(allowed_names=["search"]),
            AllowlistStage(always_include=["hydrate_context", "ghost"], catalog=catalog),
        ],
        catalog=catalog,
    ).run(["search", "deploy"])
    assert (
        ("search", "hydrate_context"),
        rec(
            1,
            "allowlist",
            SELECT,
            "re-added hydrate_context; ignored unknown ghost",
            before=("search",),
            after=("search", "hydrate_context"),
            added=("hydrate_context",),
        ),
    ) == (result.selected, result.records[1])


def test_a_catalogue_name_is_not_accepted_without_the_catalogue_given_to_the_pipeline() -> None:
    result = SelectionPipeline(
        [ScriptedStage("widen", StageOutcome.select(["a", "hydrate_context"], "widen"))]
    ).run(["a"])
    assert (("a",), ("hydrate_context",)) == (result.tools, result.records[0].rejected)


def test_the_design_documents_iteration() -> None:
    """Six stages, twelve offered tools, one readable trace."""
    catalog = ToolCatalog(
        [
            ToolSpec("search", trigger_keywords=("find",)),
            ToolSpec("fetch_data", trigger_keywords=("sales",)),
            ToolSpec("run_block", trigger_keywords=("code",)),
            ToolSpec("deploy", SafetyLevel.WRITE, trigger_keywords=("ship",)),
            ToolSpec("shell", SafetyLevel.DESTRUCTIVE, trigger_keywords=("bash",)),
            ToolSpec("delete_rows", SafetyLevel.DESTRUCTIVE),
            ToolSpec("summarise"),
            ToolSpec("chart"),
            ToolSpec("email", trigger_keywords=("mail",)),
            ToolSpec("calendar", trigger_keywords=("meet",)),
            ToolSpec("translate", trigger_keywords=("lang",)),
            ToolSpec("hydrate_context", trigger_keywords=("ctx",)),
        ]
    )
    offered = list(catalog)
    pipeline = SelectionPipeline(
        [
            ForcedChoiceStage(),
            IntentRoutingStage(
                verdict=IntentVerdict("action", ["search", "fetch_data", "run_block", "deploy"]),
                trigger_keywords=catalog.trigger_keywords(),
            ),
            LazyRoutingStage(),
            RolePaletteStage(
                resolver=lambda role: [
                    "search",
                    "fetch_data",
                    "run_block",
                    "delete_rows",
                    "summarise",
                    "chart",
                ],
                role="analyst",
            ),
            PolicyStage(catalog=catalog, max_safety_level="read"),
            AllowlistStage(always_include=["hydrate_context"], catalog=catalog),
        ],
        catalog=catalog,
    )
    result = pipeline.run(offered, SelectionContext(messages=(Message("user", "sales?"),)))
    assert [
        ("forced_choice", ABSTAIN, "no force this iteration", ()),
        (
            "intent_routing",
            SELECT,
            "action turn: keyword intersection (−5: shell, email, calendar, …)",
            ("shell", "email", "calendar", "translate", "hydrate_context"),
        ),
        ("lazy_routing", ABSTAIN, "no procedural routing", ()),
        ("role_palette", SELECT, "analyst palette (−1: deploy)", ("deploy",)),
        ("policy", SELECT, "safety ceiling 'read' (−1: delete_rows)", ("delete_rows",)),
        ("allowlist", SELECT, "re-added hydrate_context", ()),
    ] == [(r.name, r.outcome, r.reason, r.dropped) for r in result.records]
    assert (
        ("search", "fetch_data", "run_block", "summarise", "chart", "hydrate_context"),
        None,
    ) == (result.selected, result.forced_tool)


def test_an_empty_pipeline_selects_every_offered_tool() -> None:
    assert SelectionResult(("a", "b"), None, (), ("a", "b")) == SelectionPipeline([]).run(
        ["a", "b"]
    )


def test_forced_release_after_the_tool_ran_flows_through_the_pipeline() -> None:
    history = (
        Message("user", "fetch"),
        Message("assistant", "", tool_calls=(ToolCall("c1", "fetch_data", {}),)),
        Message("tool", "rows", name="fetch_data", tool_call_id="c1"),
    )
    result = SelectionPipeline([ForcedChoiceStage(resolver=lambda c: "fetch_data")]).run(
        ["search", "fetch_data"], SelectionContext(messages=history)
    )
    assert (None, "force 'fetch_data' released: tool already ran") == (
        result.forced_tool,
        result.records[0].reason,
    )


@pytest.mark.parametrize(
    ("stages", "needle"),
    [
        ([ScriptedStage("a", None), ScriptedStage("a", None)], "duplicate"),
        ([object()], "missing 'name'"),
        ([ScriptedStage("", None)], "name"),
    ],
    ids=["duplicate", "not-a-stage", "empty-name"],
)
def test_pipeline_construction_fails_fast(stages: list[Any], needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        SelectionPipeline(stages)


def test_a_copy_of_a_selection_with_other_tools_names_its_own_tools() -> None:
    """An adapter that narrows a selection further (``dataclasses.replace``) gets
    the names of the tools it kept, which the palette gate then routes."""
    result = SelectionPipeline([]).run(["run_block", {"name": "search"}, "web_search"])
    narrowed = dataclasses.replace(result, tools=("run_block", {"name": "search"}))
    assert (("run_block", "search", "web_search"), ("run_block", "search")) == (
        result.selected,
        narrowed.selected,
    )
