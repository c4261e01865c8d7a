"""ToolCallPolicy, ModelConfig and the DispatchContext both seams share."""

from __future__ import annotations

import dataclasses
from types import MappingProxyType

import pytest

from seamscope.decisions import DispatchContext, Message, ModelConfig, ToolCall, ToolCallPolicy
from seamscope.decisions._policy import build_dispatch_context
from seamscope.decisions.records import Seam


def yes(ctx: DispatchContext) -> bool:
    return True


HAIKU = ModelConfig("claude-haiku-4-5")


# -- ToolCallPolicy: the data model -------------------------------------------


def test_policy_has_exactly_the_seeds_fields_in_order() -> None:
    assert (
        "name",
        "match",
        "when_tool",
        "redirect_to",
        "model",
        "args_transform",
        "guard",
    ) == tuple(f.name for f in dataclasses.fields(ToolCallPolicy))


def test_policy_defaults_leave_every_optional_field_unset() -> None:
    policy = ToolCallPolicy(name="cheap", match=yes, model=HAIKU)
    assert (None, None, HAIKU, None, None) == (
        policy.when_tool,
        policy.redirect_to,
        policy.model,
        policy.args_transform,
        policy.guard,
    )


def test_policy_is_frozen() -> None:
    policy = ToolCallPolicy(name="cheap", match=yes, model=HAIKU)
    with pytest.raises(dataclasses.FrozenInstanceError):
        policy.name = "other"  # type: ignore[misc]


def test_the_seeds_example_policy_constructs() -> None:
    def transform(args: object, ctx: DispatchContext) -> dict[str, str]:
        return {"table": "brand_sales"}

    policy = ToolCallPolicy(
        name="sales_data_read",
        match=lambda ctx: "sales" in ctx.user_text.lower(),
        model=HAIKU,
        when_tool="run_block",
        redirect_to="fetch_data",
        guard=yes,
        args_transform=transform,
    )
    assert ("sales_data_read", "run_block", "fetch_data", HAIKU, transform, yes) == (
        policy.name,
        policy.when_tool,
        policy.redirect_to,
        policy.model,
        policy.args_transform,
        policy.guard,
    )


@pytest.mark.parametrize(
    "kwargs",
    [
        {"name": "redirect-only", "match": yes, "redirect_to": "fetch_data"},
        {"name": "model-only", "match": yes, "model": HAIKU},
        {"name": "both", "match": yes, "model": HAIKU, "redirect_to": "fetch_data"},
        {
            "name": "frozenset",
            "match": yes,
            "when_tool": frozenset({"run_block", "run_sql"}),
            "redirect_to": "fetch_data",
        },
        {"name": "when-none", "match": yes, "when_tool": None, "redirect_to": "fetch_data"},
    ],
    ids=lambda kw: kw["name"],
)
def test_valid_policies_construct(kwargs: dict[str, object]) -> None:
    assert kwargs["name"] == ToolCallPolicy(**kwargs).name  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"name": "", "match": yes, "model": HAIKU}, "name"),
        ({"name": "   ", "match": yes, "model": HAIKU}, "name"),
        ({"name": 7, "match": yes, "model": HAIKU}, "name"),
        ({"name": None, "match": yes, "model": HAIKU}, "name"),
        ({"name": "p", "match": "sales", "model": HAIKU}, "match"),
        ({"name": "p", "match": None, "model": HAIKU}, "match"),
        ({"name": "p", "match": yes, "redirect_to": "t", "guard": True}, "guard"),
        ({"name": "p", "match": yes, "redirect_to": "t", "args_transform": {}}, "args_transform"),
        ({"name": "p", "match": yes}, "redirect_to"),
        ({"name": "p", "match": yes, "model": HAIKU, "when_tool": "run_block"}, "when_tool"),
        (
            {"name": "p", "match": yes, "model": HAIKU, "args_transform": lambda a, c: a},
            "args_transform",
        ),
        ({"name": "p", "match": yes, "redirect_to": ""}, "redirect_to"),
        ({"name": "p", "match": yes, "redirect_to": 3}, "redirect_to"),
        ({"name": "p", "match": yes, "redirect_to": "t", "when_tool": ["a", "b"]}, "when_tool"),
        ({"name": "p", "match": yes, "redirect_to": "t", "when_tool": {"a"}}, "when_tool"),
        (
            {"name": "p", "match": yes, "redirect_to": "t", "when_tool": frozenset({1})},
            "when_tool",
        ),
        ({"name": "p", "match": yes, "redirect_to": "t", "when_tool": 5}, "when_tool"),
        ({"name": "p", "match": yes, "model": "claude-haiku-4-5"}, "model"),
    ],
    ids=[
        "empty-name",
        "blank-name",
        "int-name",
        "none-name",
        "str-match",
        "none-match",
        "non-callable-guard",
        "non-callable-args-transform",
        "no-op",
        "when-tool-without-redirect",
        "args-transform-without-redirect",
        "empty-redirect",
        "non-str-redirect",
        "list-when-tool",
        "set-when-tool",
        "frozenset-of-int-when-tool",
        "int-when-tool",
        "str-model",
    ],
)
def test_invalid_policy_fails_with_value_error_naming_the_field(
    kwargs: dict[str, object], field: str
) -> None:
    with pytest.raises(ValueError, match=rf"\b{field}\b"):
        ToolCallPolicy(**kwargs)  # type: ignore[arg-type]


def test_no_op_policy_error_names_both_model_and_redirect_to() -> None:
    with pytest.raises(ValueError) as info:
        ToolCallPolicy(name="noop", match=yes)
    message = str(info.value)
    assert (True, True, True) == ("model" in message, "redirect_to" in message, "noop" in message)


@pytest.mark.parametrize(
    ("when_tool", "admitted"),
    [
        (None, {"run_block": True, "fetch_data": True, "anything": True}),
        ("run_block", {"run_block": True, "fetch_data": False, "anything": False}),
        (
            frozenset({"run_block", "run_sql"}),
            {"run_block": True, "run_sql": True, "fetch_data": False},
        ),
    ],
)
def test_when_tool_filters_the_emitted_tool(
    when_tool: str | frozenset[str] | None, admitted: dict[str, bool]
) -> None:
    policy = ToolCallPolicy(name="p", match=yes, when_tool=when_tool, redirect_to="fetch_data")
    assert admitted == {tool: policy.applies_to_tool(tool) for tool in admitted}


# -- ModelConfig ---------------------------------------------------------------


def test_model_config_is_a_frozen_value() -> None:
    config = ModelConfig("claude-haiku-4-5", {"temperature": 0.0})
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.model_name = "other"  # type: ignore[misc]


def test_equal_model_configs_hash_equal_whatever_the_parameter_order() -> None:
    a = ModelConfig("claude-haiku-4-5", {"temperature": 0.0, "max_tokens": 512})
    b = ModelConfig("claude-haiku-4-5", [("max_tokens", 512), ("temperature", 0.0)])
    assert (True, True) == (a == b, hash(a) == hash(b))


def test_model_config_is_usable_as_a_dict_key() -> None:
    table = {ModelConfig("claude-haiku-4-5", {"temperature": 0.0}): "cheap"}
    assert "cheap" == table[ModelConfig("claude-haiku-4-5", {"temperature": 0.0})]


def test_model_configs_differing_in_name_or_parameters_are_different_keys() -> None:
    keys = {
        ModelConfig("claude-haiku-4-5"),
        ModelConfig("claude-haiku-4-5", {"temperature": 0.0}),
        ModelConfig("claude-opus-4-6"),
    }
    assert 3 == len(keys)


def test_model_config_parameters_read_back_as_a_dict() -> None:
    config = ModelConfig("claude-haiku-4-5", {"temperature": 0.2, "max_tokens": 64})
    assert (
        "claude-haiku-4-5",
        (("max_tokens", 64), ("temperature", 0.2)),
        {"max_tokens": 64, "temperature": 0.2},
        None,
    ) == (config.model_name, config.parameters, config.params, config.provider)


@pytest.mark.parametrize("name", ["", None, 3])
def test_model_config_needs_a_model_name(name: object) -> None:
    with pytest.raises(ValueError, match="model_name"):
        ModelConfig(name)  # type: ignore[arg-type]


# -- DispatchContext -----------------------------------------------------------

USER = Message("user", "show me the sales numbers")
EMITTED = Message(
    "assistant", "", tool_calls=(ToolCall("call_1", "run_block", {"code": "select 1"}),)
)


def test_pre_seam_context_is_the_conversation_so_far() -> None:
    ctx = build_dispatch_context(
        Seam.PRE_MODEL,
        [USER],
        resolved_tool_names=["run_block", "fetch_data"],
        forced_tool_choice="fetch_data",
        scope={"tenant": "acme"},
        iteration=2,
        role="analyst",
        conversation_id="c-1",
        agent_name="sales",
    )
    assert (
        DispatchContext(
            seam=Seam.PRE_MODEL,
            messages=(USER,),
            resolved_tool_names=frozenset({"run_block", "fetch_data"}),
            forced_tool_choice="fetch_data",
            scope={"tenant": "acme"},
            iteration=2,
            role="analyst",
            conversation_id="c-1",
            agent_name="sales",
        )
        == ctx
    )


def test_post_seam_context_includes_the_just_emitted_assistant_message() -> None:
    ctx = build_dispatch_context(Seam.POST_MODEL, [USER], emitted_message=EMITTED)
    assert (Seam.POST_MODEL, (USER, EMITTED)) == (ctx.seam, ctx.messages)


def test_emitted_message_already_last_is_not_appended_twice() -> None:
    ctx = build_dispatch_context(Seam.POST_MODEL, [USER, EMITTED], emitted_message=EMITTED)
    assert (USER, EMITTED) == ctx.messages


def test_post_seam_carries_this_iterations_routed_tools_and_force() -> None:
    pre = build_dispatch_context(
        Seam.PRE_MODEL, [USER], resolved_tool_names=["run_block"], forced_tool_choice=None
    )
    post = build_dispatch_context(
        Seam.POST_MODEL,
        [USER],
        emitted_message=EMITTED,
        resolved_tool_names=["run_block", "fetch_data"],
        forced_tool_choice="run_block",
    )
    assert (
        (frozenset({"run_block"}), None),
        (frozenset({"run_block", "fetch_data"}), "run_block"),
    ) == (
        (pre.resolved_tool_names, pre.forced_tool_choice),
        (post.resolved_tool_names, post.forced_tool_choice),
    )


def test_user_text_reads_the_last_user_message_at_both_seams() -> None:
    history = [Message("user", "first question"), Message("assistant", "answer"), USER]
    pre = build_dispatch_context(Seam.PRE_MODEL, history)
    post = build_dispatch_context(Seam.POST_MODEL, history, emitted_message=EMITTED)
    assert ("show me the sales numbers", "show me the sales numbers") == (
        pre.user_text,
        post.user_text,
    )


def test_user_text_reads_framework_message_shapes() -> None:
    history = [
        {"role": "user", "content": "plain dict"},
        {"type": "human", "content": [{"type": "text", "text": "multi"}, "part"]},
        {"role": "assistant", "content": "reply"},
    ]
    ctx = build_dispatch_context(Seam.PRE_MODEL, history)
    assert "multipart" == ctx.user_text


def test_user_text_is_empty_without_a_user_message() -> None:
    ctx = build_dispatch_context(Seam.POST_MODEL, [], emitted_message=EMITTED)
    assert "" == ctx.user_text


def test_context_is_frozen_and_its_scope_read_only() -> None:
    scope = {"tenant": "acme"}
    ctx = build_dispatch_context(Seam.PRE_MODEL, [USER], scope=scope)
    scope["tenant"] = "changed"
    with pytest.raises(dataclasses.FrozenInstanceError):
        ctx.iteration = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        ctx.scope["tenant"] = "x"  # type: ignore[index]
    assert (MappingProxyType, {"tenant": "acme"}) == (type(ctx.scope), dict(ctx.scope))
