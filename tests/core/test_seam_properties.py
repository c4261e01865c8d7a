"""``policies=()`` is byte-identical to having no policy feature at all.

The baseline below is the loop without the feature, written out here: the
PRE seam asks the role model resolver and falls back to the default model;
the POST seam hands each call to the adopter callback, then the palette gate.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from seamscope.decisions import DispatchContext, Message, ModelConfig, SeamRouter, ToolCall
from seamscope.decisions._policy import build_dispatch_context
from seamscope.decisions.records import PaletteVerdict, Seam, WinnerSource

DEFAULT = ModelConfig("claude-opus-4-6")
TOOLS = ["run_block", "fetch_data", "search", "deploy"]
tool_names = st.sampled_from([*TOOLS, "unrouted"])
args = st.dictionaries(
    st.sampled_from(["q", "table", "n"]), st.integers(0, 3) | st.text(max_size=3)
)
messages = st.lists(
    st.builds(
        Message,
        role=st.sampled_from(["user", "assistant", "tool", "system"]),
        content=st.text(max_size=12),
    ),
    max_size=5,
)


@dataclass
class Resolver:
    """The adopter's role model resolver, scripted."""

    answer: Any
    calls: int = 0

    def __call__(self, ctx: DispatchContext) -> Any:
        self.calls += 1
        if self.answer == "raise":
            raise RuntimeError("resolver down")
        return self.answer


@dataclass
class Callback:
    """The adopter's on_tool_call_dispatch, scripted per emitted tool name."""

    answers: dict[str, Any]
    calls: int = 0

    def __call__(self, call: ToolCall, ctx: DispatchContext) -> Any:
        self.calls += 1
        answer = self.answers.get(call.name)
        if answer == "raise":
            raise ValueError("callback bug")
        return answer


resolver_answers = st.one_of(
    st.none(),
    st.just("raise"),
    st.just(42),
    st.sampled_from(["claude-haiku-4-5", "claude-sonnet-4-5"]),
    st.builds(ModelConfig, st.sampled_from(["claude-haiku-4-5", "gpt-4o"])),
)
callback_answers = st.dictionaries(
    st.sampled_from(TOOLS),
    st.one_of(
        st.none(),
        st.just("raise"),
        st.just("not a call"),
        st.builds(ToolCall, id=st.just("adopter-id"), name=tool_names, args=args),
    ),
    max_size=4,
)


@st.composite
def turns(draw: st.DrawFn) -> dict[str, Any]:
    calls = draw(st.lists(st.tuples(tool_names, args), max_size=4))
    return {
        "messages": draw(messages),
        "resolved": draw(st.lists(st.sampled_from(TOOLS), unique=True)),
        "calls": tuple(ToolCall(f"call_{i}", n, a) for i, (n, a) in enumerate(calls)),
        "resolver": draw(st.none() | resolver_answers.map(Resolver)),
        "callback": draw(st.none() | callback_answers.map(Callback)),
    }


def baseline_pre(
    ctx: DispatchContext, resolver: Callable[[DispatchContext], Any] | None
) -> tuple[ModelConfig, WinnerSource, list[str]]:
    if resolver is None:
        return DEFAULT, WinnerSource.DEFAULT, []
    try:
        chosen = resolver(ctx)
    except Exception:
        return DEFAULT, WinnerSource.DEFAULT, ["resolver"]
    if chosen is None:
        return DEFAULT, WinnerSource.DEFAULT, []
    if isinstance(chosen, str):
        return ModelConfig(chosen), WinnerSource.RESOLVER, []
    if isinstance(chosen, ModelConfig):
        return chosen, WinnerSource.RESOLVER, []
    return DEFAULT, WinnerSource.DEFAULT, ["resolver"]


def baseline_post(
    ctx: DispatchContext,
    calls: tuple[ToolCall, ...],
    callback: Callable[[ToolCall, DispatchContext], Any] | None,
) -> list[tuple[ToolCall, PaletteVerdict, list[str]]]:
    out = []
    for call in calls:
        rewrite, errors = call, []
        if callback is not None:
            try:
                answer = callback(call, ctx)
            except Exception:
                answer, errors = None, ["callback"]
            if answer is not None and not isinstance(answer, ToolCall):
                answer, errors = None, ["callback"]
            if answer is not None:
                rewrite = ToolCall(call.id, answer.name, answer.args)
        if rewrite.name != call.name and rewrite.name not in ctx.resolved_tool_names:
            out.append((call, PaletteVerdict.DROPPED, errors))
        else:
            out.append((rewrite, PaletteVerdict.KEPT, errors))
    return out


def contexts(turn: dict[str, Any]) -> tuple[DispatchContext, DispatchContext]:
    pre = build_dispatch_context(
        Seam.PRE_MODEL, turn["messages"], resolved_tool_names=turn["resolved"]
    )
    post = build_dispatch_context(
        Seam.POST_MODEL,
        turn["messages"],
        resolved_tool_names=turn["resolved"],
        emitted_message=Message("assistant", "", tool_calls=turn["calls"]),
    )
    return pre, post


@settings(max_examples=200, deadline=None)
@given(turns())
def test_empty_policies_match_the_baseline_without_the_feature(turn: dict[str, Any]) -> None:
    pre_ctx, post_ctx = contexts(turn)
    resolver, callback = turn["resolver"], turn["callback"]
    router = SeamRouter(
        policies=(),
        default_model=DEFAULT,
        role_model_resolver=resolver,
        on_tool_call_dispatch=callback,
    )
    pre = router.pre_model(pre_ctx)
    post = router.post_model(post_ctx, turn["calls"])
    router_calls = (resolver.calls if resolver else 0, callback.calls if callback else 0)

    expected_pre = baseline_pre(pre_ctx, resolver)
    expected_post = baseline_post(post_ctx, turn["calls"], callback)
    assert (expected_pre, expected_post) == (
        (pre.model, pre.source, [e.source for e in pre.errors]),
        [(r.final, r.palette, [e.source for e in r.errors]) for r in post.records],
    )
    assert tuple(final for final, _, _ in expected_post) == post.calls
    # the adopter code ran exactly as often in the router as in the baseline
    totals = (resolver.calls if resolver else 0, callback.calls if callback else 0)
    baseline_calls = tuple(total - n for total, n in zip(totals, router_calls, strict=True))
    assert baseline_calls == router_calls


@settings(max_examples=200, deadline=None)
@given(turns())
def test_empty_policies_leave_no_policy_trace(turn: dict[str, Any]) -> None:
    pre_ctx, post_ctx = contexts(turn)
    router = SeamRouter(
        policies=(),
        default_model=DEFAULT,
        role_model_resolver=turn["resolver"],
        on_tool_call_dispatch=turn["callback"],
    )
    pre = router.pre_model(pre_ctx)
    post = router.post_model(post_ctx, turn["calls"])
    assert ((), None, [((), None, None, False)] * len(turn["calls"])) == (
        pre.evaluations,
        pre.policy,
        [(r.evaluations, r.policy, r.redirect_to, r.args_transformed) for r in post.records],
    )


@settings(max_examples=200, deadline=None)
@given(turns())
def test_empty_policies_equal_the_default_router(turn: dict[str, Any]) -> None:
    pre_ctx, post_ctx = contexts(turn)
    common = {
        "default_model": DEFAULT,
        "role_model_resolver": turn["resolver"],
        "on_tool_call_dispatch": turn["callback"],
    }
    empty = SeamRouter(policies=(), **common)
    plain = SeamRouter(**common)
    assert (plain.pre_model(pre_ctx), plain.post_model(post_ctx, turn["calls"])) == (
        empty.pre_model(pre_ctx),
        empty.post_model(post_ctx, turn["calls"]),
    )
