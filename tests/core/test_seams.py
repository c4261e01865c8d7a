"""The two seams: precedence, first-match-wins, guard, palette gate, containment."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import pytest

from seamscope.decisions import (
    DispatchContext,
    ModelConfig,
    PostModelResult,
    PreModelResult,
    SeamRouter,
    ToolCall,
    ToolCallPolicy,
)
from seamscope.decisions._policy import build_dispatch_context
from seamscope.decisions.records import (
    ContainedError,
    DispatchRecord,
    GuardResult,
    PaletteVerdict,
    PassedOver,
    PolicyEvaluation,
    PolicyResult,
    Seam,
    WinnerSource,
)

from ._support import USER, Predicate, emitted, post_ctx, pre_ctx, raising

DEFAULT = ModelConfig("claude-opus-4-6")
HAIKU = ModelConfig("claude-haiku-4-5")
SONNET = ModelConfig("claude-sonnet-4-5")
RUN_BLOCK = ToolCall("call_1", "run_block", {"code": "select * from sales"})

PRE = Seam.PRE_MODEL
POST = Seam.POST_MODEL


def ev(policy: str, seam: Seam, result: PolicyResult, **kw: Any) -> PolicyEvaluation:
    return PolicyEvaluation(policy, seam, result, **kw)


def passed(
    order: tuple[str, ...],
    evaluated: int,
    not_matched: int = 0,
    skipped: int = 0,
    recorded: tuple[str, ...] = (),
) -> PassedOver:
    """The PassedOver of a seam decision (its view is not compared)."""
    return PassedOver(not_matched, skipped, evaluated, order, recorded)


def policy(name: str, match: Any = None, **kw: Any) -> ToolCallPolicy:
    return ToolCallPolicy(name=name, match=match or Predicate(True), **kw)


def record(**kw: Any) -> DispatchRecord:
    base: dict[str, Any] = {
        "index": 0,
        "emitted": RUN_BLOCK,
        "final": RUN_BLOCK,
        "policy": None,
        "redirect_to": None,
        "guard": GuardResult.NONE,
        "args_transformed": False,
        "adopter_override": False,
        "palette": PaletteVerdict.KEPT,
        "source": WinnerSource.NONE,
    }
    base.update(kw)
    return DispatchRecord(**base)


# -- PRE seam --------------------------------------------------------------------


def test_pre_first_declared_policy_with_model_and_true_match_wins() -> None:
    late = Predicate(True)
    router = SeamRouter(
        [
            policy("misses", Predicate(False), model=SONNET),
            policy("wins", Predicate(True), model=HAIKU),
            policy("late", late, model=SONNET),
        ],
        default_model=DEFAULT,
        role_model_resolver=lambda ctx: "claude-sonnet-4-5",
    )
    result = router.pre_model(pre_ctx())
    assert (
        PreModelResult(
            HAIKU,
            WinnerSource.POLICY,
            "wins",
            (ev("wins", PRE, PolicyResult.MATCHED),),
            passed_over=passed(("misses", "wins", "late"), 2, not_matched=1, recorded=("wins",)),
        )
        == result
    )
    # the per-policy view re-derives the evaluations that were only counted
    assert (
        ev("misses", PRE, PolicyResult.NOT_MATCHED),
        ev("wins", PRE, PolicyResult.MATCHED),
    ) == result.all_evaluations()
    assert ("misses",) == result.passed_over.names()
    assert 0 == late.calls


def test_pre_skips_a_policy_without_model_and_does_not_call_its_match() -> None:
    redirect_match = Predicate(True)
    router = SeamRouter(
        [
            policy("redirect_only", redirect_match, redirect_to="fetch_data"),
            policy("cheap", model=HAIKU),
        ],
        default_model=DEFAULT,
    )
    result = router.pre_model(pre_ctx())
    assert (
        PreModelResult(
            HAIKU,
            WinnerSource.POLICY,
            "cheap",
            (ev("cheap", PRE, PolicyResult.MATCHED),),
            passed_over=passed(("redirect_only", "cheap"), 2, skipped=1, recorded=("cheap",)),
        )
        == result
    )
    assert (
        ev("redirect_only", PRE, PolicyResult.SKIPPED),
        ev("cheap", PRE, PolicyResult.MATCHED),
    ) == result.all_evaluations()
    assert 0 == redirect_match.calls


def test_pre_falls_through_to_the_resolver_when_no_policy_matches() -> None:
    router = SeamRouter(
        [policy("cheap", Predicate(False), model=HAIKU)],
        default_model=DEFAULT,
        role_model_resolver=lambda ctx: "claude-sonnet-4-5",
    )
    result = router.pre_model(pre_ctx())
    assert (
        PreModelResult(
            SONNET, WinnerSource.RESOLVER, None, passed_over=passed(("cheap",), 1, not_matched=1)
        )
        == result
    )
    assert (ev("cheap", PRE, PolicyResult.NOT_MATCHED),) == result.all_evaluations()


def test_pre_resolver_may_return_a_model_config() -> None:
    tuned = ModelConfig("claude-sonnet-4-5", {"temperature": 0.0})
    router = SeamRouter(default_model=DEFAULT, role_model_resolver=lambda ctx: tuned)
    assert PreModelResult(tuned, WinnerSource.RESOLVER, None) == router.pre_model(pre_ctx())


def test_pre_resolver_sees_the_seam_context() -> None:
    seen: list[DispatchContext] = []

    def resolver(ctx: DispatchContext) -> None:
        seen.append(ctx)

    ctx = pre_ctx()
    SeamRouter(default_model=DEFAULT, role_model_resolver=resolver).pre_model(ctx)
    assert [ctx] == seen


def test_pre_falls_through_to_the_default_when_the_resolver_returns_none() -> None:
    router = SeamRouter(
        [policy("cheap", Predicate(False), model=HAIKU)],
        default_model=DEFAULT,
        role_model_resolver=lambda ctx: None,
    )
    assert PreModelResult(
        DEFAULT, WinnerSource.DEFAULT, None, passed_over=passed(("cheap",), 1, not_matched=1)
    ) == router.pre_model(pre_ctx())


def test_pre_uses_the_default_without_resolver_or_policies() -> None:
    router = SeamRouter(default_model="claude-opus-4-6")
    assert PreModelResult(DEFAULT, WinnerSource.DEFAULT, None) == router.pre_model(pre_ctx())


def test_pre_raising_resolver_falls_through_to_the_default_and_is_recorded() -> None:
    router = SeamRouter(
        default_model=DEFAULT, role_model_resolver=raising(RuntimeError("resolver down"))
    )
    assert PreModelResult(
        DEFAULT,
        WinnerSource.DEFAULT,
        None,
        errors=(ContainedError("resolver", "RuntimeError", "resolver down"),),
    ) == router.pre_model(pre_ctx())


def test_pre_resolver_returning_a_wrong_type_falls_through_and_is_recorded() -> None:
    def wrong(ctx: DispatchContext) -> Any:
        return 42

    router = SeamRouter(default_model=DEFAULT, role_model_resolver=wrong)
    assert PreModelResult(
        DEFAULT,
        WinnerSource.DEFAULT,
        None,
        errors=(
            ContainedError(
                "resolver",
                "TypeError",
                "role_model_resolver returned int, expected ModelConfig, str or None",
            ),
        ),
    ) == router.pre_model(pre_ctx())


def test_pre_raising_match_is_no_match_recorded_and_evaluation_continues() -> None:
    router = SeamRouter(
        [
            policy("broken", Predicate(error=KeyError("scope")), model=SONNET),
            policy("cheap", model=HAIKU),
        ],
        default_model=DEFAULT,
    )
    error = ContainedError("match", "KeyError", "'scope'", "broken")
    assert PreModelResult(
        HAIKU,
        WinnerSource.POLICY,
        "cheap",
        (
            ev("broken", PRE, PolicyResult.ERROR, error=error),
            ev("cheap", PRE, PolicyResult.MATCHED),
        ),
        (error,),
    ) == router.pre_model(pre_ctx())


@pytest.mark.parametrize(
    "guard",
    [Predicate(False), Predicate(error=RuntimeError("no table"))],
    ids=["failing-guard", "raising-guard"],
)
def test_guard_never_affects_the_model_seam(guard: Predicate) -> None:
    router = SeamRouter(
        [
            policy(
                "sales",
                model=HAIKU,
                when_tool="run_block",
                redirect_to="fetch_data",
                guard=guard,
            )
        ],
        default_model=DEFAULT,
    )
    assert PreModelResult(
        HAIKU, WinnerSource.POLICY, "sales", (ev("sales", PRE, PolicyResult.MATCHED),)
    ) == router.pre_model(pre_ctx())
    assert 0 == guard.calls


def test_pre_match_receives_the_seam_context() -> None:
    match = Predicate(True)
    ctx = pre_ctx()
    SeamRouter([policy("cheap", match, model=HAIKU)], default_model=DEFAULT).pre_model(ctx)
    assert [ctx] == match.seen


# -- POST seam -------------------------------------------------------------------


def test_post_policy_rewrites_the_call_and_keeps_its_id_and_args() -> None:
    router = SeamRouter(
        [policy("sales", when_tool="run_block", redirect_to="fetch_data")],
        default_model=DEFAULT,
    )
    redirected = ToolCall("call_1", "fetch_data", {"code": "select * from sales"})
    assert PostModelResult(
        (redirected,),
        (
            record(
                final=redirected,
                policy="sales",
                redirect_to="fetch_data",
                source=WinnerSource.POLICY,
                evaluations=(ev("sales", POST, PolicyResult.MATCHED),),
            ),
        ),
    ) == router.post_model(post_ctx((RUN_BLOCK,)), [RUN_BLOCK])


def _when_tool_id(when_tool: Any) -> str:
    """A set's names sorted: the id is the same in every process (pytest-xdist's workers
    compare their collections; a set's repr follows the process's hash seed)."""
    if isinstance(when_tool, frozenset):
        return "{" + ", ".join(map(repr, sorted(when_tool))) + "}"
    return repr(when_tool)


@pytest.mark.parametrize(
    "when_tool", [None, "run_block", frozenset({"run_block", "run_sql"})], ids=_when_tool_id
)
def test_post_when_tool_admits_the_emitted_tool(when_tool: Any) -> None:
    router = SeamRouter(
        [policy("sales", when_tool=when_tool, redirect_to="fetch_data")], default_model=DEFAULT
    )
    result = router.post_model(post_ctx((RUN_BLOCK,)), [RUN_BLOCK])
    assert (ToolCall("call_1", "fetch_data", RUN_BLOCK.args),) == result.calls


@pytest.mark.parametrize(
    "when_tool", ["run_sql", frozenset({"run_sql", "deploy"})], ids=_when_tool_id
)
def test_post_when_tool_mismatch_skips_without_calling_match(when_tool: Any) -> None:
    match = Predicate(True)
    router = SeamRouter(
        [policy("sales", match, when_tool=when_tool, redirect_to="fetch_data")],
        default_model=DEFAULT,
    )
    result = router.post_model(post_ctx((RUN_BLOCK,)), [RUN_BLOCK])
    assert (
        PostModelResult((RUN_BLOCK,), (record(passed_over=passed(("sales",), 1, skipped=1)),))
        == result
    )
    assert (ev("sales", POST, PolicyResult.SKIPPED),) == result.records[0].all_evaluations()
    assert 0 == match.calls


def test_post_skips_a_model_only_policy_without_calling_match() -> None:
    match = Predicate(True)
    router = SeamRouter([policy("cheap", match, model=HAIKU)], default_model=DEFAULT)
    result = router.post_model(post_ctx((RUN_BLOCK,)), [RUN_BLOCK])
    assert (
        PostModelResult((RUN_BLOCK,), (record(passed_over=passed(("cheap",), 1, skipped=1)),))
        == result
    )
    assert (ev("cheap", POST, PolicyResult.SKIPPED),) == result.records[0].all_evaluations()
    assert 0 == match.calls


def test_post_first_matching_policy_wins_and_later_ones_are_not_evaluated() -> None:
    late = Predicate(True)
    router = SeamRouter(
        [
            policy("misses", Predicate(False), redirect_to="run_sql"),
            policy("wins", redirect_to="fetch_data"),
            policy("late", late, redirect_to="run_sql"),
        ],
        default_model=DEFAULT,
    )
    result = router.post_model(
        post_ctx((RUN_BLOCK,), resolved=("run_block", "fetch_data", "run_sql")), [RUN_BLOCK]
    )
    assert (
        ("wins", "fetch_data"),
        (ev("wins", POST, PolicyResult.MATCHED),),
        passed(("misses", "wins", "late"), 2, not_matched=1, recorded=("wins",)),
        (ev("misses", POST, PolicyResult.NOT_MATCHED), ev("wins", POST, PolicyResult.MATCHED)),
    ) == (
        (result.records[0].policy, result.calls[0].name),
        result.records[0].evaluations,
        result.records[0].passed_over,
        result.records[0].all_evaluations(),
    )
    assert 0 == late.calls


def test_post_args_transform_gets_args_and_context_and_rewrites_args() -> None:
    seen: list[tuple[Mapping[str, Any], DispatchContext]] = []

    def transform(args: Mapping[str, Any], ctx: DispatchContext) -> dict[str, str]:
        seen.append((dict(args), ctx))
        return {"table": "brand_sales"}

    router = SeamRouter(
        [
            policy(
                "sales", when_tool="run_block", redirect_to="fetch_data", args_transform=transform
            )
        ],
        default_model=DEFAULT,
    )
    ctx = post_ctx((RUN_BLOCK,))
    result = router.post_model(ctx, [RUN_BLOCK])
    redirected = ToolCall("call_1", "fetch_data", {"table": "brand_sales"})
    assert (
        PostModelResult(
            (redirected,),
            (
                record(
                    final=redirected,
                    policy="sales",
                    redirect_to="fetch_data",
                    args_transformed=True,
                    source=WinnerSource.POLICY,
                    evaluations=(ev("sales", POST, PolicyResult.MATCHED),),
                ),
            ),
        ),
        [({"code": "select * from sales"}, ctx)],
    ) == (result, seen)


@pytest.mark.parametrize(
    ("transform", "error"),
    [
        (
            raising(ValueError("bad args")),
            ContainedError("args_transform", "ValueError", "bad args", "sales"),
        ),
        (
            lambda args, ctx: ["not", "a", "mapping"],
            ContainedError(
                "args_transform",
                "TypeError",
                "args_transform returned list, expected a mapping",
                "sales",
            ),
        ),
    ],
    ids=["raises", "returns-non-mapping"],
)
def test_post_failing_args_transform_keeps_the_redirect_with_original_args(
    transform: Any, error: ContainedError
) -> None:
    router = SeamRouter(
        [
            policy(
                "sales", when_tool="run_block", redirect_to="fetch_data", args_transform=transform
            )
        ],
        default_model=DEFAULT,
    )
    redirected = ToolCall("call_1", "fetch_data", {"code": "select * from sales"})
    assert PostModelResult(
        (redirected,),
        (
            record(
                final=redirected,
                policy="sales",
                redirect_to="fetch_data",
                source=WinnerSource.POLICY,
                evaluations=(ev("sales", POST, PolicyResult.MATCHED),),
                errors=(error,),
            ),
        ),
    ) == router.post_model(post_ctx((RUN_BLOCK,)), [RUN_BLOCK])


def test_post_failing_guard_passes_the_call_to_the_next_policy() -> None:
    router = SeamRouter(
        [
            policy("guarded", redirect_to="fetch_data", guard=Predicate(False)),
            policy("fallback", redirect_to="run_sql", guard=Predicate(True)),
        ],
        default_model=DEFAULT,
    )
    redirected = ToolCall("call_1", "run_sql", RUN_BLOCK.args)
    assert PostModelResult(
        (redirected,),
        (
            record(
                final=redirected,
                policy="fallback",
                redirect_to="run_sql",
                guard=GuardResult.PASSED,
                source=WinnerSource.POLICY,
                evaluations=(
                    ev("guarded", POST, PolicyResult.MATCHED, guard=GuardResult.FAILED),
                    ev("fallback", POST, PolicyResult.MATCHED, guard=GuardResult.PASSED),
                ),
            ),
        ),
    ) == router.post_model(
        post_ctx((RUN_BLOCK,), resolved=("run_block", "fetch_data", "run_sql")), [RUN_BLOCK]
    )


def test_post_failing_guard_on_the_only_policy_leaves_the_call_alone() -> None:
    guard = Predicate(False)
    router = SeamRouter(
        [policy("sales", when_tool="run_block", redirect_to="fetch_data", guard=guard)],
        default_model=DEFAULT,
    )
    ctx = post_ctx((RUN_BLOCK,))
    assert PostModelResult(
        (RUN_BLOCK,),
        (
            record(
                guard=GuardResult.FAILED,
                evaluations=(ev("sales", POST, PolicyResult.MATCHED, guard=GuardResult.FAILED),),
            ),
        ),
    ) == router.post_model(ctx, [RUN_BLOCK])
    assert [ctx] == guard.seen


def test_post_guard_is_not_called_when_match_is_false() -> None:
    guard = Predicate(True)
    router = SeamRouter(
        [policy("sales", Predicate(False), redirect_to="fetch_data", guard=guard)],
        default_model=DEFAULT,
    )
    router.post_model(post_ctx((RUN_BLOCK,)), [RUN_BLOCK])
    assert 0 == guard.calls


def test_post_raising_guard_is_no_match_recorded_and_evaluation_continues() -> None:
    router = SeamRouter(
        [
            policy("guarded", redirect_to="run_sql", guard=Predicate(error=OSError("db down"))),
            policy("fallback", redirect_to="fetch_data"),
        ],
        default_model=DEFAULT,
    )
    error = ContainedError("guard", "OSError", "db down", "guarded")
    redirected = ToolCall("call_1", "fetch_data", RUN_BLOCK.args)
    assert PostModelResult(
        (redirected,),
        (
            record(
                final=redirected,
                policy="fallback",
                redirect_to="fetch_data",
                source=WinnerSource.POLICY,
                evaluations=(
                    ev("guarded", POST, PolicyResult.ERROR, guard=GuardResult.ERROR, error=error),
                    ev("fallback", POST, PolicyResult.MATCHED),
                ),
                errors=(error,),
            ),
        ),
    ) == router.post_model(
        post_ctx((RUN_BLOCK,), resolved=("run_block", "fetch_data", "run_sql")), [RUN_BLOCK]
    )


def test_post_raising_match_is_no_match_recorded_and_evaluation_continues() -> None:
    router = SeamRouter(
        [
            policy("broken", Predicate(error=IndexError("no messages")), redirect_to="run_sql"),
            policy("fallback", redirect_to="fetch_data"),
        ],
        default_model=DEFAULT,
    )
    error = ContainedError("match", "IndexError", "no messages", "broken")
    redirected = ToolCall("call_1", "fetch_data", RUN_BLOCK.args)
    assert PostModelResult(
        (redirected,),
        (
            record(
                final=redirected,
                policy="fallback",
                redirect_to="fetch_data",
                source=WinnerSource.POLICY,
                evaluations=(
                    ev("broken", POST, PolicyResult.ERROR, error=error),
                    ev("fallback", POST, PolicyResult.MATCHED),
                ),
                errors=(error,),
            ),
        ),
    ) == router.post_model(
        post_ctx((RUN_BLOCK,), resolved=("run_block", "fetch_data", "run_sql")), [RUN_BLOCK]
    )


def test_post_adopter_callback_sees_the_policy_rewrite_as_input() -> None:
    seen: list[tuple[ToolCall, DispatchContext]] = []

    def callback(call: ToolCall, ctx: DispatchContext) -> None:
        seen.append((call, ctx))

    router = SeamRouter(
        [policy("sales", when_tool="run_block", redirect_to="fetch_data")],
        default_model=DEFAULT,
        on_tool_call_dispatch=callback,
    )
    ctx = post_ctx((RUN_BLOCK,))
    result = router.post_model(ctx, [RUN_BLOCK])
    redirected = ToolCall("call_1", "fetch_data", RUN_BLOCK.args)
    assert ([(redirected, ctx)], (redirected,), WinnerSource.POLICY) == (
        seen,
        result.calls,
        result.records[0].source,
    )


def test_post_adopter_callback_sees_the_emitted_call_when_no_policy_won() -> None:
    seen: list[ToolCall] = []
    router = SeamRouter(
        [policy("sales", Predicate(False), redirect_to="fetch_data")],
        default_model=DEFAULT,
        on_tool_call_dispatch=lambda call, ctx: seen.append(call),
    )
    router.post_model(post_ctx((RUN_BLOCK,)), [RUN_BLOCK])
    assert [RUN_BLOCK] == seen


def test_post_adopter_callback_overrides_the_policy_and_the_call_keeps_its_id() -> None:
    router = SeamRouter(
        [policy("sales", when_tool="run_block", redirect_to="fetch_data")],
        default_model=DEFAULT,
        on_tool_call_dispatch=lambda call, ctx: ToolCall("other_id", "run_sql", {"q": "1"}),
    )
    final = ToolCall("call_1", "run_sql", {"q": "1"})
    assert PostModelResult(
        (final,),
        (
            record(
                final=final,
                policy="sales",
                redirect_to="fetch_data",
                adopter_override=True,
                source=WinnerSource.ADOPTER,
                evaluations=(ev("sales", POST, PolicyResult.MATCHED),),
            ),
        ),
    ) == router.post_model(
        post_ctx((RUN_BLOCK,), resolved=("run_block", "fetch_data", "run_sql")), [RUN_BLOCK]
    )


def test_post_adopter_callback_returning_the_same_call_is_not_an_override() -> None:
    router = SeamRouter(
        default_model=DEFAULT, on_tool_call_dispatch=lambda call, ctx: ToolCall(**_fields(call))
    )
    assert PostModelResult((RUN_BLOCK,), (record(),)) == router.post_model(
        post_ctx((RUN_BLOCK,)), [RUN_BLOCK]
    )


def _fields(call: ToolCall) -> dict[str, Any]:
    return {"id": call.id, "name": call.name, "args": dict(call.args)}


@pytest.mark.parametrize(
    ("callback", "error"),
    [
        (
            raising(RuntimeError("adopter bug")),
            ContainedError("callback", "RuntimeError", "adopter bug"),
        ),
        (
            lambda call, ctx: "fetch_data",
            ContainedError(
                "callback",
                "TypeError",
                "on_tool_call_dispatch returned str, expected ToolCall or None",
            ),
        ),
    ],
    ids=["raises", "returns-non-call"],
)
def test_post_failing_callback_falls_through_to_the_policy_rewrite(
    callback: Any, error: ContainedError
) -> None:
    router = SeamRouter(
        [policy("sales", when_tool="run_block", redirect_to="fetch_data")],
        default_model=DEFAULT,
        on_tool_call_dispatch=callback,
    )
    redirected = ToolCall("call_1", "fetch_data", RUN_BLOCK.args)
    assert PostModelResult(
        (redirected,),
        (
            record(
                final=redirected,
                policy="sales",
                redirect_to="fetch_data",
                source=WinnerSource.POLICY,
                evaluations=(ev("sales", POST, PolicyResult.MATCHED),),
                errors=(error,),
            ),
        ),
    ) == router.post_model(post_ctx((RUN_BLOCK,)), [RUN_BLOCK])


def test_palette_gate_drops_an_unrouted_policy_target_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    router = SeamRouter(
        [
            policy(
                "sales",
                when_tool="run_block",
                redirect_to="fetch_data",
                args_transform=lambda args, ctx: {"table": "brand_sales"},
            )
        ],
        default_model=DEFAULT,
    )
    with caplog.at_level(logging.WARNING, logger="seamscope.decisions"):
        result = router.post_model(post_ctx((RUN_BLOCK,), resolved=("run_block",)), [RUN_BLOCK])
    assert (
        PostModelResult(
            (RUN_BLOCK,),
            (
                record(
                    policy="sales",
                    redirect_to="fetch_data",
                    args_transformed=True,
                    palette=PaletteVerdict.DROPPED,
                    source=WinnerSource.POLICY,
                    evaluations=(ev("sales", POST, PolicyResult.MATCHED),),
                ),
            ),
        )
        == result
    )
    assert [
        (
            "seamscope.decisions",
            logging.WARNING,
            "palette gate dropped redirect of run_block to unrouted tool fetch_data "
            "(policy sales, call call_1)",
        )
    ] == caplog.record_tuples


def test_palette_gate_runs_last_on_the_adopter_override(caplog: pytest.LogCaptureFixture) -> None:
    router = SeamRouter(
        [policy("sales", when_tool="run_block", redirect_to="fetch_data")],
        default_model=DEFAULT,
        on_tool_call_dispatch=lambda call, ctx: ToolCall(call.id, "deploy", {}),
    )
    with caplog.at_level(logging.WARNING, logger="seamscope.decisions"):
        result = router.post_model(post_ctx((RUN_BLOCK,)), [RUN_BLOCK])
    assert (
        (RUN_BLOCK,),
        PaletteVerdict.DROPPED,
        WinnerSource.ADOPTER,
        [("seamscope.decisions", logging.WARNING)],
    ) == (
        result.calls,
        result.records[0].palette,
        result.records[0].source,
        [(name, level) for name, level, _ in caplog.record_tuples],
    )


def test_palette_gate_keeps_a_routed_adopter_override_of_an_unrouted_policy_target(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # the gate judges whatever rewrite survived, not the policy's target
    router = SeamRouter(
        [policy("sales", when_tool="run_block", redirect_to="deploy")],
        default_model=DEFAULT,
        on_tool_call_dispatch=lambda call, ctx: ToolCall(call.id, "fetch_data", {}),
    )
    with caplog.at_level(logging.WARNING, logger="seamscope.decisions"):
        result = router.post_model(post_ctx((RUN_BLOCK,)), [RUN_BLOCK])
    assert ((ToolCall("call_1", "fetch_data", {}),), PaletteVerdict.KEPT, []) == (
        result.calls,
        result.records[0].palette,
        caplog.record_tuples,
    )


def test_palette_gate_keeps_an_args_only_rewrite_of_the_emitted_tool() -> None:
    router = SeamRouter(
        default_model=DEFAULT,
        on_tool_call_dispatch=lambda call, ctx: ToolCall(call.id, call.name, {"code": "select 1"}),
    )
    final = ToolCall("call_1", "run_block", {"code": "select 1"})
    assert PostModelResult(
        (final,), (record(final=final, adopter_override=True, source=WinnerSource.ADOPTER),)
    ) == router.post_model(post_ctx((RUN_BLOCK,), resolved=()), [RUN_BLOCK])


def test_post_handles_each_emitted_call_independently() -> None:
    sql = ToolCall("call_2", "run_sql", {"q": "select 1"})
    router = SeamRouter(
        [policy("sales", when_tool="run_block", redirect_to="fetch_data")],
        default_model=DEFAULT,
    )
    result = router.post_model(post_ctx((RUN_BLOCK, sql)), [RUN_BLOCK, sql])
    redirected = ToolCall("call_1", "fetch_data", RUN_BLOCK.args)
    assert (
        PostModelResult(
            (redirected, sql),
            (
                record(
                    final=redirected,
                    policy="sales",
                    redirect_to="fetch_data",
                    source=WinnerSource.POLICY,
                    evaluations=(ev("sales", POST, PolicyResult.MATCHED),),
                ),
                record(
                    index=1, emitted=sql, final=sql, passed_over=passed(("sales",), 1, skipped=1)
                ),
            ),
        )
        == result
    )
    assert 1 == result.rewritten


def test_post_match_sees_the_post_llm_context() -> None:
    match = Predicate(True)
    router = SeamRouter([policy("sales", match, redirect_to="fetch_data")], default_model=DEFAULT)
    ctx = post_ctx((RUN_BLOCK,))
    router.post_model(ctx, [RUN_BLOCK])
    assert [("assistant", (RUN_BLOCK,))] == [
        (c.messages[-1].role, c.messages[-1].tool_calls) for c in match.seen
    ]


# -- both seams --------------------------------------------------------------------


def test_first_match_wins_independently_at_each_seam() -> None:
    router = SeamRouter(
        [
            policy("cheap_model", model=HAIKU),
            policy("pin_tool", when_tool="run_block", redirect_to="fetch_data"),
            policy("both", model=SONNET, redirect_to="run_sql"),
        ],
        default_model=DEFAULT,
    )
    pre = router.pre_model(pre_ctx())
    post = router.post_model(post_ctx((RUN_BLOCK,)), [RUN_BLOCK])
    assert (("cheap_model", HAIKU), ("pin_tool", "fetch_data")) == (
        (pre.policy, pre.model),
        (post.records[0].policy, post.calls[0].name),
    )


def test_one_policy_wins_both_seams_from_one_declaration() -> None:
    router = SeamRouter(
        [
            policy(
                "sales_data_read",
                lambda ctx: "sales" in ctx.user_text.lower(),
                model=HAIKU,
                when_tool="run_block",
                redirect_to="fetch_data",
                guard=lambda ctx: ctx.scope.get("brand_sales_table") is True,
                args_transform=lambda args, ctx: {"table": "brand_sales"},
            )
        ],
        default_model=DEFAULT,
    )
    scope = {"brand_sales_table": True}
    pre = router.pre_model(build_dispatch_context(PRE, [USER], scope=scope))
    post = router.post_model(
        build_dispatch_context(
            POST,
            [USER],
            scope=scope,
            resolved_tool_names=["run_block", "fetch_data"],
            emitted_message=emitted(RUN_BLOCK),
        ),
        [RUN_BLOCK],
    )
    assert (
        (HAIKU, WinnerSource.POLICY, "sales_data_read"),
        (ToolCall("call_1", "fetch_data", {"table": "brand_sales"}),),
    ) == ((pre.model, pre.source, pre.policy), post.calls)


def test_a_turn_without_tool_calls_leaves_post_empty_and_pre_standing() -> None:
    match = Predicate(True)
    guard = Predicate(True)
    router = SeamRouter(
        [policy("sales", match, model=HAIKU, redirect_to="fetch_data", guard=guard)],
        default_model=DEFAULT,
    )
    pre = router.pre_model(pre_ctx())
    calls_after_pre = match.calls
    post = router.post_model(post_ctx(()), [])
    assert (
        PostModelResult((), ()),
        PreModelResult(
            HAIKU, WinnerSource.POLICY, "sales", (ev("sales", PRE, PolicyResult.MATCHED),)
        ),
        (1, 1, 0),
    ) == (post, pre, (calls_after_pre, match.calls, guard.calls))


def test_every_kind_of_adopter_failure_in_one_dispatch_is_contained_in_order() -> None:
    router = SeamRouter(
        [
            policy("m", Predicate(error=RuntimeError("match")), redirect_to="run_sql"),
            policy("g", redirect_to="run_sql", guard=Predicate(error=RuntimeError("guard"))),
            policy("t", redirect_to="fetch_data", args_transform=raising(RuntimeError("args"))),
        ],
        default_model=DEFAULT,
        on_tool_call_dispatch=raising(RuntimeError("callback")),
    )
    result = router.post_model(
        post_ctx((RUN_BLOCK,), resolved=("run_block", "fetch_data", "run_sql")), [RUN_BLOCK]
    )
    assert (
        (ToolCall("call_1", "fetch_data", RUN_BLOCK.args),),
        (
            ContainedError("match", "RuntimeError", "match", "m"),
            ContainedError("guard", "RuntimeError", "guard", "g"),
            ContainedError("args_transform", "RuntimeError", "args", "t"),
            ContainedError("callback", "RuntimeError", "callback"),
        ),
    ) == (result.calls, result.records[0].errors)


def test_contained_error_message_is_truncated_and_non_builtin_types_qualified() -> None:
    class AdopterError(Exception):
        pass

    router = SeamRouter(
        [policy("p", Predicate(error=AdopterError("x" * 1000)), model=HAIKU)],
        default_model=DEFAULT,
    )
    error = router.pre_model(pre_ctx()).errors[0]
    assert (
        "match",
        f"{__name__}.test_contained_error_message_is_truncated_and_non_builtin_types_qualified"
        ".<locals>.AdopterError",
        "x" * 256,
        "p",
    ) == (error.source, error.error_type, error.message, error.policy)


# -- construction --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "kwargs", "needle"),
    [
        (([policy("a", model=HAIKU), policy("a", model=SONNET)],), {}, "duplicate"),
        ((["not a policy"],), {}, r"policies\[0\]"),
        ((), {"default_model": 3}, "default_model"),
        ((), {"role_model_resolver": "claude"}, "role_model_resolver"),
        ((), {"on_tool_call_dispatch": 1}, "on_tool_call_dispatch"),
    ],
    ids=["duplicate-name", "not-a-policy", "bad-default", "bad-resolver", "bad-callback"],
)
def test_router_construction_fails_fast(
    args: tuple[Any, ...], kwargs: dict[str, Any], needle: str
) -> None:
    kwargs = {"default_model": DEFAULT, **kwargs}
    with pytest.raises(ValueError, match=needle):
        SeamRouter(*args, **kwargs)
