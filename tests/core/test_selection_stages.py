"""The six selection stages and their seed decision matrices."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from seamscope.decisions import Message, ToolCall
from seamscope.decisions.records import (
    StageOutcome,
    StageOutcomeKind,
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
    SelectionStage,
    ToolCatalog,
    ToolSpec,
)

from ._support import raising

UNNAMED = object()  # a tool whose name cannot be read


def ctx(**kw: Any) -> SelectionContext:
    return SelectionContext(**kw)


# -- StageOutcome, the protocol, the catalogue ------------------------------------


def test_select_outcome_carries_the_tools_and_a_reason() -> None:
    assert StageOutcome(StageOutcomeKind.SELECT, ("a", "b"), "narrowed", False, None) == (
        StageOutcome.select(["a", "b"], "narrowed")
    )


def test_abstain_outcome_carries_a_reason_and_degraded() -> None:
    assert (
        StageOutcome(StageOutcomeKind.ABSTAIN, None, "nothing to do", False, None),
        StageOutcome(StageOutcomeKind.ABSTAIN, None, "resolver broke", True, None),
    ) == (
        StageOutcome.abstain("nothing to do"),
        StageOutcome.abstain("resolver broke", degraded=True),
    )


def test_outcome_selected_tells_select_from_abstain() -> None:
    assert (True, False) == (
        StageOutcome.select([], "empty").selected,
        StageOutcome.abstain("no").selected,
    )


STAGES: list[Any] = [
    AllowlistStage(),
    ForcedChoiceStage(),
    IntentRoutingStage(),
    LazyRoutingStage(),
    PolicyStage(catalog=ToolCatalog()),
    RolePaletteStage(),
]


def test_every_stage_satisfies_the_selection_stage_protocol() -> None:
    assert [True] * 6 == [isinstance(stage, SelectionStage) for stage in STAGES]


def test_stage_names_and_forced_protection_are_pinned() -> None:
    assert [
        ("allowlist", True),
        ("forced_choice", False),
        ("intent_routing", True),
        ("lazy_routing", True),
        ("policy", True),
        ("role_palette", True),
    ] == [(stage.name, stage.protects_forced) for stage in STAGES]


def test_catalogue_maps_names_to_specs_and_bindable_objects() -> None:
    bound = object()
    catalog = ToolCatalog(
        [ToolSpec("search", trigger_keywords=("find",)), ToolSpec("deploy", tool=bound)]
    )
    assert (
        ["search", "deploy"],
        {"search": ("find",), "deploy": ()},
        catalog["search"],
        bound,
    ) == (
        list(catalog),
        catalog.trigger_keywords(),
        catalog.bindable("search"),
        catalog.bindable("deploy"),
    )


@pytest.mark.parametrize(
    ("specs", "needle"),
    [
        ([ToolSpec("a"), ToolSpec("a")], "duplicate"),
        (["a"], "ToolSpec"),
    ],
    ids=["duplicate", "not-a-spec"],
)
def test_catalogue_rejects_bad_entries(specs: list[Any], needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        ToolCatalog(specs)


@pytest.mark.parametrize(
    ("kwargs", "error", "needle"),
    [
        ({"name": ""}, ValueError, "name"),
        ({"name": "a", "cost_usd": -1.0}, ValueError, "cost_usd"),
        ({"name": "a", "safety_level": "lethal"}, ValueError, "lethal"),
    ],
    ids=["empty-name", "negative-cost", "unknown-safety"],
)
def test_tool_spec_validates(kwargs: dict[str, Any], error: type[Exception], needle: str) -> None:
    with pytest.raises(error, match=needle):
        ToolSpec(**kwargs)


def test_tool_spec_normalises_its_collections() -> None:
    spec = ToolSpec(
        "a",
        safety_level="write",
        categories=["x"],  # type: ignore[arg-type]
        required_capabilities=[int],  # type: ignore[arg-type]
        trigger_keywords=("k",),
    )
    assert (SafetyLevel.WRITE, frozenset({"x"}), frozenset({int}), ("k",)) == (
        spec.safety_level,
        spec.categories,
        spec.required_capabilities,
        spec.trigger_keywords,
    )


# -- AllowlistStage ------------------------------------------------------------------


def test_allowlist_abstains_without_mandated_tools() -> None:
    assert StageOutcome.abstain("no mandated tools") == AllowlistStage().apply(("a",), ctx())


def test_allowlist_abstains_when_every_mandated_tool_is_present() -> None:
    stage = AllowlistStage(always_include=["hydrate_context"])
    assert StageOutcome.abstain("all mandated tools present") == stage.apply(
        ("search", "hydrate_context"), ctx(offered=("search", "hydrate_context"))
    )


def test_allowlist_re_adds_a_mandated_tool_an_earlier_stage_dropped() -> None:
    hydrate = ToolSpec("hydrate_context")
    stage = AllowlistStage(always_include=["hydrate_context"])
    assert StageOutcome.select(("search", hydrate), "re-added hydrate_context") == stage.apply(
        ("search",), ctx(offered=("search", hydrate))
    )


def test_allowlist_re_adds_a_catalogue_tool_by_its_bindable_object() -> None:
    bound = ToolSpec("hydrate_context")
    catalog = ToolCatalog([ToolSpec("hydrate_context", tool=bound)])
    stage = AllowlistStage(always_include=["hydrate_context"], catalog=catalog)
    outcome = stage.apply(("search",), ctx(offered=("search",)))
    assert (StageOutcome.select(("search", bound), "re-added hydrate_context"), True) == (
        outcome,
        outcome.tools is not None and outcome.tools[1] is bound,
    )


def test_allowlist_ignores_a_name_neither_offered_nor_catalogued() -> None:
    stage = AllowlistStage(always_include=["ghost"], catalog=ToolCatalog([ToolSpec("search")]))
    assert StageOutcome.abstain("all mandated tools present; ignored unknown ghost") == (
        stage.apply(("search",), ctx(offered=("search",)))
    )


def test_allowlist_re_adds_the_known_and_ignores_the_unknown() -> None:
    stage = AllowlistStage(always_include=["ghost", "hydrate_context", ""])
    assert StageOutcome.select(
        ("search", "hydrate_context"), "re-added hydrate_context; ignored unknown ghost"
    ) == stage.apply(("search",), ctx(offered=("search", "hydrate_context")))


def test_allowlist_rejects_a_bare_string() -> None:
    with pytest.raises(ValueError, match="always_include"):
        AllowlistStage(always_include="hydrate_context")


# -- ForcedChoiceStage ------------------------------------------------------------------

OFFERED = ("search", "fetch_data", "deploy")
USER = Message("user", "fetch the data")


class Resolver:
    def __init__(self, *answers: str | None) -> None:
        self.answers = list(answers)
        self.calls = 0

    def __call__(self, ctx: SelectionContext) -> str | None:
        self.calls += 1
        return self.answers.pop(0)


def test_forced_without_stamp_or_resolver_abstains() -> None:
    assert StageOutcome.abstain("no force this iteration") == ForcedChoiceStage().apply(
        OFFERED, ctx(messages=(USER,))
    )


def test_forced_state_stamp_wins_over_the_resolver() -> None:
    resolver = Resolver("deploy")
    stage = ForcedChoiceStage(resolver=resolver)
    outcome = stage.apply(
        OFFERED, ctx(messages=(USER,), state={"forced_tool_choice": "fetch_data"})
    )
    assert (
        StageOutcome.select(OFFERED, "forced 'fetch_data' (state stamp)", forced_tool="fetch_data"),
        0,
    ) == (outcome, resolver.calls)


def test_forced_resolver_is_re_run_every_iteration() -> None:
    resolver = Resolver("fetch_data", None)
    stage = ForcedChoiceStage(resolver=resolver)
    first = stage.apply(OFFERED, ctx(messages=(USER,), iteration=0))
    second = stage.apply(OFFERED, ctx(messages=(USER,), iteration=1))
    assert (
        StageOutcome.select(OFFERED, "forced 'fetch_data' (resolver)", forced_tool="fetch_data"),
        StageOutcome.abstain("no force this iteration"),
        2,
    ) == (first, second, resolver.calls)


def test_forced_stage_never_narrows_the_tools() -> None:
    outcome = ForcedChoiceStage().apply(
        OFFERED, ctx(messages=(USER,), state={"forced_tool_choice": "search"})
    )
    assert OFFERED == outcome.tools


def _history_after(tool: str, *, name: str | None = None) -> tuple[Any, ...]:
    call = ToolCall("call_1", tool, {})
    return (
        USER,
        Message("assistant", "", tool_calls=(call,)),
        Message("tool", "rows", name=name or tool, tool_call_id="call_1"),
    )


@pytest.mark.parametrize(
    ("state", "resolver"),
    [({"forced_tool_choice": "fetch_data"}, None), ({}, Resolver("fetch_data"))],
    ids=["stamp", "resolver"],
)
def test_force_is_released_once_the_forced_tool_ran_this_turn(
    state: dict[str, str], resolver: Resolver | None
) -> None:
    stage = ForcedChoiceStage(resolver=resolver)
    assert StageOutcome.abstain("force 'fetch_data' released: tool already ran") == stage.apply(
        OFFERED, ctx(messages=_history_after("fetch_data"), state=state)
    )


def test_force_is_released_by_a_dict_shaped_tool_message() -> None:
    history = (
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": ""},
        {"role": "tool", "name": "fetch_data", "content": "rows"},
    )
    stage = ForcedChoiceStage()
    assert StageOutcome.abstain("force 'fetch_data' released: tool already ran") == stage.apply(
        OFFERED, ctx(messages=history, state={"forced_tool_choice": "fetch_data"})
    )


def test_force_is_not_released_by_a_previous_turns_tool_message() -> None:
    history = (*_history_after("fetch_data"), Message("assistant", "done"), USER)
    stage = ForcedChoiceStage()
    assert StageOutcome.select(
        OFFERED, "forced 'fetch_data' (state stamp)", forced_tool="fetch_data"
    ) == stage.apply(OFFERED, ctx(messages=history, state={"forced_tool_choice": "fetch_data"}))


def test_force_is_not_released_by_another_tools_message() -> None:
    stage = ForcedChoiceStage()
    assert StageOutcome.select(
        OFFERED, "forced 'fetch_data' (state stamp)", forced_tool="fetch_data"
    ) == stage.apply(
        OFFERED,
        ctx(messages=_history_after("search"), state={"forced_tool_choice": "fetch_data"}),
    )


def test_a_raising_force_resolver_releases_degraded() -> None:
    stage = ForcedChoiceStage(resolver=raising(RuntimeError("resolver down")))
    assert StageOutcome.abstain(
        "resolver raised RuntimeError; force released", degraded=True
    ) == stage.apply(OFFERED, ctx(messages=(USER,)))


def test_a_forced_tool_that_was_not_offered_is_released_degraded() -> None:
    stage = ForcedChoiceStage()
    assert StageOutcome.abstain(
        "forced 'ghost' (state stamp) not offered; force released", degraded=True
    ) == stage.apply(OFFERED, ctx(messages=(USER,), state={"forced_tool_choice": "ghost"}))


def test_forced_stage_honours_a_custom_state_key_and_tool_message_test() -> None:
    stage = ForcedChoiceStage(
        state_key="pin",
        is_tool_message=lambda m: getattr(m, "role", None) == "function_result",
    )
    history = (USER, Message("tool", "rows", name="fetch_data"))
    outcomes = (
        stage.apply(OFFERED, ctx(messages=history, state={"pin": "fetch_data"})),
        stage.apply(
            OFFERED,
            ctx(
                messages=(USER, Message("function_result", "rows", name="fetch_data")),
                state={"pin": "fetch_data"},
            ),
        ),
        stage.apply(OFFERED, ctx(messages=(USER,), state={"forced_tool_choice": "fetch_data"})),
    )
    assert (
        StageOutcome.select(OFFERED, "forced 'fetch_data' (state stamp)", forced_tool="fetch_data"),
        StageOutcome.abstain("force 'fetch_data' released: tool already ran"),
        StageOutcome.abstain("no force this iteration"),
    ) == outcomes


# -- IntentRoutingStage ----------------------------------------------------------------

KEYWORDS = {"search": ["find"], "deploy": ["ship"], "calc": [], "hydrate_context": ["x"]}
INTENT_TOOLS = ("search", "deploy", "help", "calc", "hydrate_context", UNNAMED)


@pytest.mark.parametrize(
    "verdict", [None, IntentVerdict("ambiguous", ["search"])], ids=["none", "ambiguous"]
)
def test_intent_abstains_without_an_actionable_verdict(verdict: Any) -> None:
    stage = IntentRoutingStage(verdict=verdict, trigger_keywords=KEYWORDS)
    assert StageOutcome.abstain("no actionable verdict") == stage.apply(INTENT_TOOLS, ctx())


def test_intent_abstains_without_candidate_tools() -> None:
    stage = IntentRoutingStage(verdict=IntentVerdict("action", ["search"]))
    assert StageOutcome.abstain("no candidate tools") == stage.apply((), ctx())


def test_intent_knowledge_turn_keeps_only_always_include_and_unnamed_tools() -> None:
    stage = IntentRoutingStage(
        verdict=IntentVerdict("knowledge"),
        trigger_keywords=KEYWORDS,
        always_include=["hydrate_context"],
    )
    assert StageOutcome.select(
        ("hydrate_context", UNNAMED),
        "knowledge turn: always-include only (−4: search, deploy, help, …)",
    ) == stage.apply(INTENT_TOOLS, ctx())


def test_intent_action_turn_keeps_matched_keywordless_and_always_include_tools() -> None:
    stage = IntentRoutingStage(
        verdict=IntentVerdict("action", ["search", "not_offered"]),
        trigger_keywords=KEYWORDS,
        always_include=["hydrate_context"],
    )
    assert StageOutcome.select(
        ("search", "help", "calc", "hydrate_context", UNNAMED),
        "action turn: keyword intersection (−1: deploy)",
    ) == stage.apply(INTENT_TOOLS, ctx())


def test_intent_action_turn_without_always_include_drops_keyworded_unmatched_tools() -> None:
    stage = IntentRoutingStage(
        verdict=IntentVerdict("action", ["deploy"]), trigger_keywords=KEYWORDS
    )
    assert StageOutcome.select(
        ("deploy", "help", "calc", UNNAMED),
        "action turn: keyword intersection (−2: search, hydrate_context)",
    ) == stage.apply(INTENT_TOOLS, ctx())


def test_intent_verdict_may_be_a_callable_of_the_context() -> None:
    stage = IntentRoutingStage(
        verdict=lambda c: IntentVerdict("knowledge") if c.role == "faq" else None,
        trigger_keywords=KEYWORDS,
    )
    assert (
        StageOutcome.select(
            (UNNAMED,), "knowledge turn: always-include only (−5: search, deploy, help, …)"
        ),
        StageOutcome.abstain("no actionable verdict"),
    ) == (stage.apply(INTENT_TOOLS, ctx(role="faq")), stage.apply(INTENT_TOOLS, ctx()))


def test_intent_decide_is_the_same_matrix_synchronously() -> None:
    verdict = IntentVerdict("action", ["search"])
    stage = IntentRoutingStage(verdict=verdict, trigger_keywords=KEYWORDS)
    assert stage.apply(INTENT_TOOLS, ctx()) == stage.decide(list(INTENT_TOOLS), verdict)


# -- LazyRoutingStage --------------------------------------------------------------------


def test_lazy_abstains_without_procedural_routing() -> None:
    assert StageOutcome.abstain("no procedural routing") == LazyRoutingStage().apply(OFFERED, ctx())


def test_lazy_narrows_to_the_routed_names_and_never_adds() -> None:
    stage = LazyRoutingStage(allowed_names=["fetch_data", "not_offered"])
    assert StageOutcome.select(
        ("fetch_data", UNNAMED), "procedural routing (−2: search, deploy)"
    ) == stage.apply((*OFFERED, UNNAMED), ctx())


def test_lazy_routing_may_be_resolved_per_turn() -> None:
    stage = LazyRoutingStage(allowed_names=lambda c: ["search"] if c.iteration else None)
    assert (
        StageOutcome.abstain("no procedural routing"),
        StageOutcome.select(("search",), "procedural routing (−2: fetch_data, deploy)"),
    ) == (stage.apply(OFFERED, ctx(iteration=0)), stage.apply(OFFERED, ctx(iteration=1)))


def test_lazy_rejects_a_bare_string() -> None:
    with pytest.raises(ValueError, match="allowed_names"):
        LazyRoutingStage(allowed_names="search")


# -- PolicyStage --------------------------------------------------------------------------


class Network:
    pass


class Gpu:
    pass


CATALOG = ToolCatalog(
    [
        ToolSpec("read_db", SafetyLevel.READ, 0.01, frozenset({Network}), frozenset({"data"})),
        ToolSpec("write_db", SafetyLevel.WRITE, 0.05, categories=frozenset({"data"})),
        ToolSpec("delete_rows", SafetyLevel.DESTRUCTIVE, 0.0, categories=frozenset({"data"})),
        ToolSpec("paid_search", cost_usd=2.0, categories=frozenset({"web"})),
        ToolSpec("mystery", cost_usd=None, categories=frozenset({"web"})),
        ToolSpec(
            "render",
            cost_usd=0.0,
            required_capabilities=frozenset({Gpu}),
            categories=frozenset({"media"}),
        ),
        ToolSpec("internal", cost_usd=0.0, agent_visible=False, categories=frozenset({"data"})),
        ToolSpec("uncategorised", cost_usd=0.0),
    ]
)
POLICY_TOOLS = (*CATALOG, "unregistered", UNNAMED)


def policy_apply(**kw: Any) -> StageOutcome:
    return PolicyStage(catalog=CATALOG, **kw).apply(POLICY_TOOLS, ctx())


def _without(*names: str) -> tuple[Any, ...]:
    return tuple(t for t in POLICY_TOOLS if t not in names)


def test_policy_without_a_rule_abstains() -> None:
    assert StageOutcome.abstain("no policy configured") == policy_apply()


def test_policy_safety_ceiling() -> None:
    assert (
        StageOutcome.select(_without("delete_rows"), "safety ceiling 'write' (−1: delete_rows)"),
        StageOutcome.select(
            _without("write_db", "delete_rows"),
            "safety ceiling 'read' (−2: write_db, delete_rows)",
        ),
    ) == (policy_apply(max_safety_level="write"), policy_apply(max_safety_level=SafetyLevel.READ))


def test_policy_budget_keeps_unknown_cost_by_default() -> None:
    assert StageOutcome.select(
        _without("paid_search"), "budget $1 (−1: paid_search)"
    ) == policy_apply(budget_usd=1.0)


def test_policy_budget_drops_unknown_cost_when_told() -> None:
    assert StageOutcome.select(
        _without("paid_search", "mystery"),
        "budget $1 (−1: paid_search); unknown cost (−1: mystery)",
    ) == policy_apply(budget_usd=1.0, include_unknown_cost=False)


def test_policy_capabilities() -> None:
    assert StageOutcome.select(
        _without("render"), "missing capability (−1: render)"
    ) == policy_apply(available_capabilities={Network})


def test_policy_capabilities_none_available() -> None:
    assert StageOutcome.select(
        _without("read_db", "render"), "missing capability (−2: read_db, render)"
    ) == policy_apply(available_capabilities=set())


def test_policy_agent_visibility() -> None:
    assert StageOutcome.select(
        _without("internal"), "not agent-visible (−1: internal)"
    ) == policy_apply(agent_visible_only=True)


def test_policy_categories() -> None:
    assert StageOutcome.select(
        _without("paid_search", "mystery", "render", "uncategorised"),
        "category (−4: paid_search, mystery, render, …)",
    ) == policy_apply(categories=["data"])


def test_policy_keeps_tools_absent_from_the_catalogue() -> None:
    outcome = PolicyStage(catalog=CATALOG, max_safety_level="read", categories=[]).apply(
        ("unregistered", "delete_rows", UNNAMED), ctx()
    )
    assert ("unregistered", UNNAMED) == outcome.tools


def test_policy_that_admits_every_tool_says_so() -> None:
    assert StageOutcome.select(POLICY_TOOLS, "policy admits every tool") == policy_apply(
        max_safety_level="destructive"
    )


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"catalog": ["read_db"]}, "catalog"),
        ({"catalog": CATALOG, "max_safety_level": "lethal"}, "max_safety_level"),
        ({"catalog": CATALOG, "budget_usd": -1}, "budget_usd"),
        ({"catalog": CATALOG, "categories": "data"}, "categories"),
    ],
    ids=["catalog", "safety", "budget", "categories"],
)
def test_policy_stage_validates_its_configuration(kwargs: dict[str, Any], needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        PolicyStage(**kwargs)


# -- RolePaletteStage ----------------------------------------------------------------------

PALETTE_TOOLS = ("search", "fetch_data", "deploy", "shell", UNNAMED)


def test_role_palette_without_resolver_abstains() -> None:
    assert StageOutcome.abstain("no role resolver") == RolePaletteStage().apply(
        PALETTE_TOOLS, ctx()
    )


def test_role_palette_none_means_no_policy() -> None:
    stage = RolePaletteStage(resolver=lambda role: None, role="analyst")
    assert StageOutcome.abstain("no palette for role 'analyst'") == stage.apply(
        PALETTE_TOOLS, ctx()
    )


def test_role_palette_only_narrows() -> None:
    stage = RolePaletteStage(
        resolver=lambda role: ["search", "fetch_data", "not_offered"], role="analyst"
    )
    assert StageOutcome.select(
        ("search", "fetch_data", UNNAMED), "analyst palette (−2: deploy, shell)"
    ) == stage.apply(PALETTE_TOOLS, ctx())


def test_an_empty_role_palette_abstains_degraded_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    stage = RolePaletteStage(resolver=lambda role: [], role="analyst")
    with caplog.at_level(logging.WARNING, logger="seamscope.decisions"):
        outcome = stage.apply(PALETTE_TOOLS, ctx())
    assert (
        StageOutcome.abstain("empty palette for role 'analyst': kept all tools", degraded=True)
        == outcome
    )
    assert [
        (
            "seamscope.decisions",
            logging.WARNING,
            "role palette resolver returned [] for role 'analyst': kept all tools",
        )
    ] == caplog.record_tuples


def test_a_raising_role_resolver_abstains_degraded() -> None:
    stage = RolePaletteStage(resolver=raising(LookupError("no map")), role="analyst")
    assert StageOutcome.abstain("role resolver raised LookupError", degraded=True) == (
        stage.apply(PALETTE_TOOLS, ctx())
    )


def test_role_palette_reads_the_contexts_role_when_not_configured() -> None:
    seen: list[str] = []

    def resolver(role: str) -> list[str]:
        seen.append(role)
        return ["search"]

    outcome = RolePaletteStage(resolver=resolver).apply(PALETTE_TOOLS, ctx(role="support"))
    assert (["support"], ("search", UNNAMED)) == (seen, outcome.tools)
