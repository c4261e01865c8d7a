"""The pure translators of LangChain's decision middlewares, one per middleware.

Every input is what the real middleware of the pinned LangChain really did:
the request it passed inward (captured by a handler), the state update it
returned, the result it answered a tool call with. Its models are scripted.
"""

from __future__ import annotations

import warnings
from collections import deque
from typing import Any

import pytest
from langchain.agents.middleware import (
    AutoModeMiddleware,
    ClearToolUsesEdit,
    ContextEditingMiddleware,
    LLMToolSelectorMiddleware,
    ModelChoice,
    ModelFallbackMiddleware,
    ModelRequest,
    ModelResponse,
    ModelRouterMiddleware,
    ProviderToolSearchMiddleware,
    SummarizationMiddleware,
    ToolCallLimitMiddleware,
    ToolCallRequest,
)
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from seamscope.adapters.langchain import _explain as explain
from seamscope.decisions import ToolCall

from ._langchain_support import (
    BIG_REPORT_CHARS,
    ProviderChatModel,
    ScriptedDecisionModel,
    Toolbox,
    ai,
    choice,
    risk,
    scripted_models,
    selection,
)

TOOLS = ("run_block", "fetch_data", "search", "web_search", "big_report")
BIG = ("x" * 79 + "\n") * (BIG_REPORT_CHARS // 80)


def request(model: Any, messages: list[Any], tools: list[Any] | None = None) -> ModelRequest:
    return ModelRequest(
        model=model,
        messages=messages,
        tools=Toolbox().tools() if tools is None else tools,
        state={"messages": messages},
    )


class Inward:
    """The handler a middleware calls: keeps every request it passes inward."""

    def __init__(self, error_for: set[str] | None = None) -> None:
        self.requests: list[ModelRequest] = []
        self.error_for = error_for or set()

    def __call__(self, req: ModelRequest) -> ModelResponse:
        self.requests.append(req)
        if req.model.model_name in self.error_for:
            raise ConnectionError(f"{req.model.model_name} is down")
        return ModelResponse(result=[AIMessage("ok")])


def main_model() -> Any:
    models, _ = scripted_models(["claude-opus-4-6"], [])
    return models["claude-opus-4-6"]


# -- LLMToolSelectorMiddleware ----------------------------------------------------------


def test_a_selection_is_the_tools_the_selector_kept_in_the_agents_order() -> None:
    selectors, log = scripted_models(
        ["selector"], [selection("search", "fetch_data", "big_report")]
    )
    middleware = LLMToolSelectorMiddleware(model=selectors["selector"], max_tools=2)
    received = request(main_model(), [HumanMessage("sales q3")])
    inward = Inward()
    middleware.wrap_model_call(received, inward)

    change = explain.narrowing(received.tools, inward.requests[0].tools)

    assert ["fetch_data", "search"] == [t.name for t in inward.requests[0].tools]
    assert explain.Narrowing(TOOLS, ("fetch_data", "search")) == change
    assert change is not None and not change.search_kind
    assert "selected 2 of 5 tools (max_tools=2)" == explain.tool_selection_reason(
        middleware, change
    )
    assert explain.tool_selection_reason(middleware, change) == explain.narrowing_reason(
        middleware, change
    )
    assert 1 == len(log)


def test_a_selection_with_always_include_names_the_tools_it_adds() -> None:
    selectors, _ = scripted_models(["selector"], [selection("big_report", "run_block")])
    middleware = LLMToolSelectorMiddleware(
        model=selectors["selector"], max_tools=1, always_include=["search"]
    )
    received = request(main_model(), [HumanMessage("sales q3")])
    inward = Inward()
    middleware.wrap_model_call(received, inward)

    change = explain.narrowing(received.tools, inward.requests[0].tools)

    assert explain.Narrowing(TOOLS, ("big_report", "search")) == change
    assert change is not None
    assert (
        "selected 2 of 5 tools (max_tools=1; always included: search)"
        == explain.tool_selection_reason(middleware, change)
    )


def test_the_same_tools_are_no_narrowing() -> None:
    tools = Toolbox().tools()
    assert explain.narrowing(tools, list(tools)) is None


# -- ProviderToolSearchMiddleware -------------------------------------------------------


@pytest.mark.parametrize(
    ("provider", "search"),
    [("anthropic", "tool_search_tool_bm25"), ("openai", "tool_search")],
)
def test_a_provider_tool_search_defers_tools_behind_the_providers_search_tool(
    provider: str, search: str
) -> None:
    model = ProviderChatModel(
        messages=iter([]), model_name="claude-opus-4-6", log=[], provider=provider
    )
    middleware = ProviderToolSearchMiddleware(searchable_tools=["web_search", "big_report"])
    received = request(model, [HumanMessage("hi")])
    inward = Inward()
    middleware.wrap_model_call(received, inward)

    change = explain.narrowing(received.tools, inward.requests[0].tools)

    assert (
        explain.Narrowing(
            TOOLS,
            ("run_block", "fetch_data", "search", search),
            deferred=("web_search", "big_report"),
            search=(search,),
        )
        == change
    )
    assert change is not None and change.search_kind
    assert (
        f"deferred 2 of 5 tools behind {search}; the provider loads a deferred tool "
        "only when its search finds it"
    ) == explain.narrowing_reason(middleware, change)


def test_nothing_deferred_is_no_tool_search() -> None:
    model = ProviderChatModel(messages=iter([]), model_name="m", log=[])
    received = request(model, [HumanMessage("hi")])
    inward = Inward()
    ProviderToolSearchMiddleware().wrap_model_call(received, inward)

    assert inward.requests[0] is received
    assert explain.narrowing(received.tools, inward.requests[0].tools) is None


# -- ModelRouterMiddleware ----------------------------------------------------------------


def router(classifier: ScriptedDecisionModel) -> ModelRouterMiddleware:
    models, _ = scripted_models(["claude-haiku-4-5", "claude-opus-4-6"], [])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the router is a beta middleware
        return ModelRouterMiddleware(
            choices={
                "fast": ModelChoice(model=models["claude-haiku-4-5"], criteria="simple tasks"),
                "deep": ModelChoice(model=models["claude-opus-4-6"], criteria="hard tasks"),
            },
            instructions="Choose the cheapest model suited to the task.",
            classifier=classifier,
        )


def test_a_route_is_the_label_its_classifier_chose_and_the_model_it_names() -> None:
    log: list[Any] = []
    classifier = ScriptedDecisionModel(
        model="router-clf",
        answers=deque([choice("fast", 0.92, model="router-clf", usage=(50, 2))]),
        log=log,
    )
    middleware = router(classifier)
    state: dict[str, Any] = {"messages": [HumanMessage("what time is it")]}
    update = middleware.before_agent(state, None)  # type: ignore[arg-type]
    answer = explain.route_answer({**state, **update})

    assert ("fast", 0.92) == answer
    assert "route 'fast' (confidence 0.92) -> claude-haiku-4-5" == explain.model_route_reason(
        middleware, answer, "claude-haiku-4-5"
    )
    assert ["model_route"] == log[0].questions


def test_a_model_change_without_a_route_answer_names_the_model() -> None:
    assert explain.route_answer({"messages": []}) is None
    assert "routed to gpt-4o" == explain.model_route_reason(None, None, "gpt-4o")


# -- ModelFallbackMiddleware --------------------------------------------------------------


def test_a_fallback_names_each_failed_model_and_the_one_that_answered() -> None:
    models, _ = scripted_models(["claude-opus-4-6", "claude-haiku-4-5", "gpt-4o"], [])
    middleware = ModelFallbackMiddleware(models["claude-haiku-4-5"], models["gpt-4o"])
    inward = Inward(error_for={"claude-opus-4-6", "claude-haiku-4-5"})
    middleware.wrap_model_call(request(models["claude-opus-4-6"], [HumanMessage("hi")]), inward)
    attempts = [r.model.model_name for r in inward.requests]
    failed = [(m, "ConnectionError") for m in attempts[:-1]]

    assert ["claude-opus-4-6", "claude-haiku-4-5", "gpt-4o"] == attempts
    assert (
        "claude-opus-4-6 failed (ConnectionError), claude-haiku-4-5 failed (ConnectionError); "
        "gpt-4o answered"
    ) == explain.model_fallback_reason(failed, attempts[-1])
    assert (
        "claude-opus-4-6 failed (ConnectionError); no model answered"
        == explain.model_fallback_reason(failed[:1], None)
    )


# -- ToolCallLimitMiddleware --------------------------------------------------------------


def limited_turn() -> list[Any]:
    return [
        HumanMessage("search twice"),
        ai(("search", {"query": "a"}, "c1"), ("search", {"query": "b"}, "c2")),
    ]


def test_a_run_limit_blocks_the_calls_past_it() -> None:
    middleware = ToolCallLimitMiddleware(run_limit=1)
    messages = limited_turn()
    update = middleware.after_model({"messages": messages}, None)  # type: ignore[arg-type]

    blocked = explain.blocked_calls(messages, update)

    text = "Tool call limit exceeded. Do not make additional tool calls."
    assert [explain.Blocked(ToolCall("c2", "search", {"query": "b"}), text)] == blocked
    assert (
        "run_limit=1 reached for all tools (exit_behavior=continue), 1 call(s) not run: " + text
        == explain.tool_call_limit_reason(middleware, blocked)
    )
    assert explain.tool_call_limit_reason(middleware, blocked) == explain.blocked_reason(
        middleware, blocked
    )


def test_a_limit_that_ends_the_run_blocks_every_call_of_the_message() -> None:
    middleware = ToolCallLimitMiddleware(tool_name="search", thread_limit=1, exit_behavior="end")
    messages = limited_turn()
    update = middleware.after_model({"messages": messages}, None)  # type: ignore[arg-type]

    blocked = explain.blocked_calls(messages, update)

    assert ["c2", "c1"] == [b.call.id for b in blocked]
    assert (
        "thread_limit=1 reached for tool 'search' (exit_behavior=end), 2 call(s) not run: "
        "Tool call limit exceeded. Do not call 'search' again."
    ) == explain.tool_call_limit_reason(middleware, blocked)


def test_calls_within_the_limit_are_not_blocked() -> None:
    middleware = ToolCallLimitMiddleware(run_limit=5)
    messages = limited_turn()
    update = middleware.after_model({"messages": messages}, None)  # type: ignore[arg-type]

    assert [] == explain.blocked_calls(messages, update)
    assert [] == explain.blocked_calls(messages, None)


# -- AutoModeMiddleware -------------------------------------------------------------------


def risk_checked(probability: float) -> tuple[explain.Blocked | None, list[str]]:
    classifier = ScriptedDecisionModel(
        model="risk-clf",
        answers=deque([risk(probability, model="risk-clf", usage=(40, 1))]),
        log=[],
    )
    middleware = AutoModeMiddleware(tools=["search"], classifier=classifier)
    tool = next(t for t in Toolbox().tools() if t.name == "search")
    call = {"name": "search", "args": {"query": "payroll"}, "id": "c1", "type": "tool_call"}
    ran: list[str] = []

    def handler(req: ToolCallRequest) -> ToolMessage:
        ran.append(req.tool_call["id"])
        return ToolMessage("3 hits", tool_call_id="c1", name="search")

    tool_request = ToolCallRequest(
        tool_call=call,  # type: ignore[arg-type]
        tool=tool,
        state={"messages": [HumanMessage("search payroll")]},
        runtime=None,  # type: ignore[arg-type]
    )
    result = middleware.wrap_tool_call(tool_request, handler)
    return explain.blocked_call(call, result, handler_called=bool(ran)), ran


def test_a_risky_call_is_blocked_with_its_classifiers_verdict() -> None:
    blocked, ran = risk_checked(0.9)

    assert [] == ran
    assert blocked is not None
    assert ToolCall("c1", "search", {"query": "payroll"}) == blocked.call
    assert "classified as risky (probability: 0.90)" == explain.auto_mode_reason(blocked.text)
    assert explain.auto_mode_reason(blocked.text) == explain.blocked_reason(
        AutoModeMiddleware(tools=["search"], classifier=None),
        [blocked],  # type: ignore[arg-type]
    )


def test_a_low_risk_call_runs_and_is_not_blocked() -> None:
    blocked, ran = risk_checked(0.2)

    assert ["c1"] == ran
    assert blocked is None


def test_another_middlewares_error_text_is_never_quoted() -> None:
    blocked = [explain.Blocked(ToolCall("c1", "search", {}), "denied: the payroll of ann")]

    assert "1 call(s) answered with an error instead of running" == explain.blocked_reason(
        object(), blocked
    )


# -- ContextEditingMiddleware -------------------------------------------------------------


def edited_conversation() -> list[Any]:
    return [
        HumanMessage("the q3 report"),
        ai(("big_report", {"topic": "q3"}, "c1")),
        ToolMessage(BIG, tool_call_id="c1", name="big_report"),
        ai(("search", {"query": "q3"}, "c2")),
        ToolMessage("3 archive hits for q3", tool_call_id="c2", name="search"),
    ]


@pytest.mark.parametrize("clear_inputs", [False, True])
def test_a_cleared_tool_result_is_the_call_that_produced_it_and_its_size(
    clear_inputs: bool,
) -> None:
    edit = ClearToolUsesEdit(trigger=1_000, keep=1, clear_tool_inputs=clear_inputs)
    middleware = ContextEditingMiddleware(edits=[edit])
    messages = edited_conversation()
    inward = Inward()
    middleware.wrap_model_call(request(main_model(), messages), inward)

    cleared = explain.cleared_results(messages, inward.requests[0].messages)

    expected = explain.Cleared("c1", "big_report", {"topic": "q3"}, 20_000.0, "[cleared]")
    assert [expected] == cleared
    assert (
        "ClearToolUsesEdit(trigger=1000, keep=1) cleared the result of big_report "
        "(20000 tokens) from the prompt"
    ) == explain.context_editing_reason(middleware, cleared[0])


def test_below_its_trigger_context_editing_clears_nothing() -> None:
    middleware = ContextEditingMiddleware(edits=[ClearToolUsesEdit(trigger=100_000)])
    messages = edited_conversation()
    inward = Inward()
    middleware.wrap_model_call(request(main_model(), messages), inward)

    assert [] == explain.cleared_results(messages, inward.requests[0].messages)


# -- SummarizationMiddleware --------------------------------------------------------------


def summarizer(trigger: Any, keep: Any) -> SummarizationMiddleware:
    models, _ = scripted_models(
        ["claude-haiku-4-5"], [ai(text="Q3 grew 12%.", usage=(500, 20, 0, 0))]
    )
    return SummarizationMiddleware(model=models["claude-haiku-4-5"], trigger=trigger, keep=keep)


def test_a_summary_is_the_messages_it_replaced_and_its_text() -> None:
    middleware = summarizer(("messages", 4), ("messages", 2))
    messages = [
        HumanMessage("a" * 400),
        ai(("search", {"query": "q3"}, "c1"), text="b" * 40),
        ToolMessage("c" * 80, tool_call_id="c1", name="search"),
        ai(text="d" * 8),
        HumanMessage("and q4?"),
    ]
    update = middleware.before_model({"messages": messages}, None)  # type: ignore[arg-type]

    summary = explain.summarized(messages, update)

    text = "Here is a summary of the conversation to date:\n\nQ3 grew 12%."
    assert explain.Summary(3, (400 + 40 + 80) / 4, text, 2) == summary
    assert summary is not None
    assert (
        "trigger ('messages', 4) reached: 3 messages summarized into one "
        "(keep ('messages', 2): 2 kept)"
    ) == explain.summarization_reason(middleware, summary)
    assert text == explain.summary_text(update["messages"][1])
    assert explain.summary_text(messages[0]) is None


def test_no_summary_below_its_trigger() -> None:
    middleware = summarizer(("messages", 50), ("messages", 2))
    messages = [HumanMessage("hi"), ai(text="hello")]
    update = middleware.before_model({"messages": messages}, None)  # type: ignore[arg-type]

    assert update is None
    assert explain.summarized(messages, update) is None
    assert explain.summarized(messages, {"messages": [HumanMessage("not a summary")]}) is None
