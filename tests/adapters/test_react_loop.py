"""The framework-free API and the reference ReAct loop, driven by a scripted chat model."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

from seamscope.adapters import (
    RECALL_TOOL,
    ChatRequest,
    ChatResponse,
    DecisionLayer,
    ReActAgent,
)
from seamscope.decisions import (
    Message,
    ModelConfig,
    ModelUsage,
    RolePaletteStage,
    SelectionContext,
    StageOutcome,
    ToolCall,
    ToolCallPolicy,
    ToolCatalog,
    ToolSpec,
)
from seamscope.telemetry import conventions as c

BIG = "x" * 80_000  # 20 000 tokens


def _raise(ctx: Any) -> bool:
    raise KeyError("tier")


POLICIES = (
    ToolCallPolicy(name="vip", match=_raise, model=ModelConfig("claude-sonnet-4-5")),
    ToolCallPolicy(
        name="sales_data_read",
        match=lambda ctx: "sales" in ctx.user_text.lower(),
        model=ModelConfig("claude-haiku-4-5"),
        when_tool="run_block",
        redirect_to="fetch_data",
        guard=lambda ctx: "brand_sales" in ctx.scope.get("tables", ()),
        args_transform=lambda args, ctx: {"table": "brand_sales"},
    ),
    ToolCallPolicy(
        name="archive_lookup",
        match=lambda ctx: True,
        when_tool="search",
        redirect_to="archive_search",  # registered, but never routed
    ),
)


class Script:
    """Replies in order; records the model and tools of every request."""

    def __init__(self, replies: list[Message]) -> None:
        self._replies = iter(replies)
        self.requests: list[tuple[str, tuple[str, ...], str | None]] = []

    def __call__(self, request: ChatRequest) -> ChatResponse:
        names = tuple(getattr(t, "name", t) for t in request.tools)
        self.requests.append((request.model.model_name, names, request.tool_choice))
        return ChatResponse(next(self._replies), ModelUsage(2_000, 40, 1_500, 0))


def _tools(ran: list[tuple[str, Mapping[str, Any]]]) -> dict[str, Any]:
    def tool(name: str, output: str) -> Any:
        def run(args: Mapping[str, Any]) -> str:
            ran.append((name, dict(args)))
            return output

        return run

    return {
        "run_block": tool("run_block", "ran"),
        "fetch_data": tool("fetch_data", "rows"),
        "search": tool("search", "hits"),
        "archive_search": tool("archive_search", "old hits"),
        "export_report": tool("export_report", BIG),
    }


def _call(call_id: str, name: str, **args: Any) -> Message:
    return Message("assistant", "", (ToolCall(call_id, name, args),))


@pytest.fixture
def layer(tracer_provider: Any, meter_provider: Any) -> DecisionLayer:
    palette = ("run_block", "fetch_data", "search", "export_report", RECALL_TOOL)
    return DecisionLayer(
        default_model="claude-opus-4-6",
        policies=POLICIES,
        stages=[RolePaletteStage(resolver=lambda role: palette)],
        agent_name="analyst",
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        offload_id_factory=lambda: "off-1",
    )


def _by_name(spans: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def test_a_conversation_takes_the_decisions_and_records_them(
    layer: DecisionLayer, span_exporter: Any
) -> None:
    ran: list[tuple[str, Mapping[str, Any]]] = []
    script = Script(
        [
            _call("c1", "run_block", code="select 1"),
            _call("c2", "search", q="q3"),
            _call("c3", "export_report"),
            Message("assistant", "done"),
            _call("c4", RECALL_TOOL, offload_id="off-1"),
            Message("assistant", "recalled"),
        ]
    )
    agent = ReActAgent(layer, script, _tools(ran))
    scope = {"tables": ("brand_sales",)}
    history: list[Any] = []
    first = agent.run_turn(
        "conv-1", "How did sales go?", messages=history, scope=scope, role="analyst"
    )
    second = agent.run_turn(
        "conv-1", "Show me the report again", messages=history, scope=scope, role="analyst"
    )
    settled = layer.end_conversation("conv-1")

    # what the loop really did
    assert [
        ("claude-haiku-4-5", ("run_block", "fetch_data", "search", "export_report"), None),
        ("claude-haiku-4-5", ("run_block", "fetch_data", "search", "export_report"), None),
        ("claude-haiku-4-5", ("run_block", "fetch_data", "search", "export_report"), None),
        # offered once the conversation has an offloaded output
        (
            "claude-haiku-4-5",
            ("run_block", "fetch_data", "search", "export_report", RECALL_TOOL),
            None,
        ),
        (
            "claude-opus-4-6",
            ("run_block", "fetch_data", "search", "export_report", RECALL_TOOL),
            None,
        ),
        (
            "claude-opus-4-6",
            ("run_block", "fetch_data", "search", "export_report", RECALL_TOOL),
            None,
        ),
    ] == script.requests
    assert [
        ("fetch_data", {"table": "brand_sales"}),
        ("search", {"q": "q3"}),
        ("export_report", {}),
    ] == ran
    assert ("done", "recalled") == (first.answer, second.answer)
    stub = next(m for m in first.messages if m.role == "tool" and m.tool_call_id == "c3")
    assert stub.content.startswith("[offloaded off-1: 20000 tokens from export_report;")
    recalled = next(m for m in second.messages if m.role == "tool" and m.tool_call_id == "c4")
    assert BIG == recalled.content
    # carried by the two calls before the recall; the recalled output is back in the prompt after
    assert [("off-1", 2, 1)] == [(s.offload_id, s.turns_carried, s.recalls) for s in settled]

    # what was recorded
    spans = span_exporter.get_finished_spans()
    turns = _by_name(spans, "invoke_agent analyst")
    assert 2 == len(turns)
    assert {turns[0].context.trace_id} == {
        s.context.trace_id
        for s in spans
        if s.start_time <= turns[0].end_time and s.name != c.SPAN_OFFLOAD_SETTLE
    }
    dispatches = [dict(s.attributes) for s in _by_name(spans, c.SPAN_DISPATCH)]
    assert [
        ("run_block", "sales_data_read", "fetch_data", "passed", "kept", "fetch_data"),
        ("search", "archive_lookup", "archive_search", "none", "dropped", "search"),
        ("export_report", None, None, "none", "kept", "export_report"),
        (RECALL_TOOL, None, None, "none", "kept", RECALL_TOOL),
    ] == [
        (
            a[c.ATTR_DISPATCH_EMITTED_TOOL],
            a.get(c.ATTR_POLICY_WINNER),
            a.get(c.ATTR_DISPATCH_REDIRECT_TO),
            a[c.ATTR_DISPATCH_GUARD],
            a[c.ATTR_DISPATCH_PALETTE_GATE],
            a[c.ATTR_DISPATCH_FINAL_TOOL],
        )
        for a in dispatches
    ]
    pre = _by_name(spans, c.SPAN_SEAM_PRE_MODEL)[0]
    assert ("policy", "sales_data_read", "claude-haiku-4-5") == (
        pre.attributes[c.ATTR_SEAM_WINNER_SOURCE],
        pre.attributes[c.ATTR_POLICY_WINNER],
        pre.attributes[c.ATTR_GEN_AI_REQUEST_MODEL],
    )
    assert [
        ("vip", "pre_model", "error", "KeyError"),
        ("sales_data_read", "pre_model", "matched", None),
    ] == [
        (
            e.attributes[c.ATTR_POLICY_NAME],
            e.attributes[c.ATTR_SEAM],
            e.attributes[c.ATTR_POLICY_RESULT],
            e.attributes.get(c.ATTR_ERROR_TYPE),
        )
        for e in pre.events
    ]
    gate = [s for s in _by_name(spans, c.SPAN_OFFLOAD_GATE) if s.attributes[c.ATTR_OFFLOAD_FIRE]]
    assert [("off-1", "claude-haiku-4-5", 0.092725, "net_positive")] == [
        (
            s.attributes[c.ATTR_OFFLOAD_ID],
            s.attributes[c.ATTR_GEN_AI_REQUEST_MODEL],
            s.attributes[c.ATTR_OFFLOAD_NET_SAVING_USD],
            s.attributes[c.ATTR_OFFLOAD_REASON_CODE],
        )
        for s in gate
    ]
    settle = _by_name(spans, c.SPAN_OFFLOAD_SETTLE)[0]
    assert [gate[0].context.span_id] == [link.context.span_id for link in settle.links]


def test_genai_spans_wrap_the_decision_spans(layer: DecisionLayer, span_exporter: Any) -> None:
    script = Script([_call("c1", "fetch_data", table="t"), Message("assistant", "ok")])
    ReActAgent(layer, script, _tools([])).run_turn("conv-2", "hello", role="analyst")
    spans = span_exporter.get_finished_spans()
    by_id = {s.context.span_id: s for s in spans}

    def parent(span: ReadableSpan) -> str | None:
        return None if span.parent is None else by_id[span.parent.span_id].name

    chat = _by_name(spans, "chat claude-opus-4-6")
    tool = _by_name(spans, "execute_tool fetch_data")[0]
    assert [(SpanKind.CLIENT, "chat", 2_000, 40, c.SPAN_ITERATION)] * 2 == [
        (
            s.kind,
            s.attributes[c.ATTR_GEN_AI_OPERATION_NAME],
            s.attributes[c.ATTR_GEN_AI_USAGE_INPUT_TOKENS],
            s.attributes[c.ATTR_GEN_AI_USAGE_OUTPUT_TOKENS],
            parent(s),
        )
        for s in chat
    ]
    assert ("execute_tool", "fetch_data", "c1", c.SPAN_ITERATION) == (
        tool.attributes[c.ATTR_GEN_AI_OPERATION_NAME],
        tool.attributes[c.ATTR_GEN_AI_TOOL_NAME],
        tool.attributes[c.ATTR_GEN_AI_TOOL_CALL_ID],
        parent(tool),
    )
    iterations = _by_name(spans, c.SPAN_ITERATION)
    assert ["invoke_agent analyst"] * 2 == [parent(s) for s in iterations]
    assert [("conv-2", "analyst")] * 2 == [
        (s.attributes[c.ATTR_GEN_AI_CONVERSATION_ID], s.attributes[c.ATTR_GEN_AI_AGENT_NAME])
        for s in iterations
    ]


def test_a_tool_that_raises_is_recorded_and_the_loop_goes_on(
    layer: DecisionLayer, span_exporter: Any
) -> None:
    def broken(args: Mapping[str, Any]) -> str:
        raise RuntimeError("boom")

    script = Script([_call("c1", "search"), Message("assistant", "sorry")])
    tools = {**_tools([]), "search": broken}
    result = ReActAgent(layer, script, tools).run_turn("conv-3", "find it", role="analyst")
    assert "sorry" == result.answer
    tool_message = next(m for m in result.messages if m.role == "tool")
    assert "error: RuntimeError" == tool_message.content
    span = _by_name(span_exporter.get_finished_spans(), "execute_tool search")[0]
    assert (StatusCode.ERROR, "RuntimeError") == (
        span.status.status_code,
        span.attributes[c.ATTR_ERROR_TYPE],
    )


def test_the_chat_models_exception_propagates_unchanged(
    layer: DecisionLayer, span_exporter: Any
) -> None:
    error = ConnectionError("provider down")

    def chat(request: ChatRequest) -> ChatResponse:
        raise error

    with pytest.raises(ConnectionError) as raised:
        ReActAgent(layer, chat, _tools([])).run_turn("conv-4", "hi", role="analyst")
    assert error is raised.value
    spans = span_exporter.get_finished_spans()
    failed = {s.name for s in spans if s.status.status_code is StatusCode.ERROR}
    assert {"chat claude-opus-4-6", c.SPAN_ITERATION, "invoke_agent analyst"} == failed


def test_the_direct_api_at_each_point_of_an_iteration(
    layer: DecisionLayer, span_exporter: Any
) -> None:
    messages: list[Any] = [Message("user", "sales by brand")]
    with layer.turn("conv-5", messages, scope={"tables": ["brand_sales"]}) as turn:
        with turn.iteration() as it:
            selection = it.select_tools(["run_block", "fetch_data", "shell"])
            pre = it.pre_model()
            with it.chat(pre.model.model_name) as call:
                call.report(ModelUsage(1_000, 20))
            emitted = _call("c1", "run_block", code="x")
            post = it.post_model(emitted)
            for tool_call in post.calls:
                with it.execute_tool(tool_call):
                    pass
                decision = it.offload(tool_call, 30_000.0)
    assert ("run_block", "fetch_data") == selection.selected  # the palette has no shell
    assert "claude-haiku-4-5" == pre.model.model_name
    assert [ToolCall("c1", "fetch_data", {"table": "brand_sales"})] == list(post.calls)
    assert (True, "off-1") == (decision.fire, decision.offload_id)
    assert ("off-1",) == layer.ledger.live_offloads("conv-5")
    names = [s.name for s in span_exporter.get_finished_spans()]
    assert [
        c.SPAN_STAGE,
        c.SPAN_SELECT_TOOLS,
        c.SPAN_SEAM_PRE_MODEL,
        "chat claude-haiku-4-5",
        c.SPAN_DISPATCH,
        c.SPAN_SEAM_POST_MODEL,
        "execute_tool fetch_data",
        c.SPAN_OFFLOAD_GATE,
        c.SPAN_ITERATION,
        "invoke_agent analyst",
    ] == names


def test_bad_configuration_fails_fast_naming_the_field(layer: DecisionLayer) -> None:
    with pytest.raises(ValueError, match="max_iterations"):
        ReActAgent(layer, lambda r: None, {}, max_iterations=0)  # type: ignore[arg-type,return-value]
    with pytest.raises(ValueError, match="recall_tool_result"):
        ReActAgent(layer, lambda r: None, {RECALL_TOOL: lambda a: ""})  # type: ignore[arg-type,return-value]
    with pytest.raises(ValueError, match="recall_probability"):
        DecisionLayer(default_model="m", recall_probability=1.5)
    with pytest.raises(ValueError, match="horizon"):
        DecisionLayer(default_model="m", horizon=-1)


# selection reuse (opt-in) --------------------------------------------------------


class CountingStage:
    """A real stage: keeps the tools in its palette and counts its runs."""

    name = "counting"
    protects_forced = True

    def __init__(self, palette: tuple[str, ...]) -> None:
        self.palette = palette
        self.calls = 0

    def apply(self, tools: tuple[Any, ...], ctx: SelectionContext) -> StageOutcome:
        self.calls += 1
        return StageOutcome.select([t for t in tools if t in self.palette], "palette")


def _reuse_layer(
    tracer_provider: Any, meter_provider: Any, *, reuse: bool, **kw: Any
) -> tuple[DecisionLayer, CountingStage]:
    stage = CountingStage(("search", "fetch_data"))
    layer = DecisionLayer(
        default_model="claude-opus-4-6",
        stages=[stage],
        agent_name="analyst",
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        reuse_selection=reuse,
        **kw,
    )
    return layer, stage


def _select_twice(
    layer: DecisionLayer,
    first: list[str],
    second: list[str],
    *,
    role: str = "analyst",
    second_role: str | None = None,
) -> tuple[Any, Any]:
    messages: list[Any] = [Message("user", "find it")]
    with layer.turn("conv-r", messages, role=role) as turn:
        with turn.iteration() as it:
            one = it.select_tools(first)
        messages.append(Message("assistant", "calling"))
        if second_role is not None:
            turn.role = second_role
        with turn.iteration() as it:
            two = it.select_tools(second)
    return one, two


def _stage_outcome_adds(metric_reader: Any) -> int:
    data = metric_reader.get_metrics_data()
    total = 0
    for rm in data.resource_metrics if data else ():
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                if metric.name == c.METRIC_STAGE_OUTCOMES.name:
                    total += sum(int(p.value) for p in metric.data.data_points)
    return total


TOOLS = ["run_block", "search", "fetch_data", "shell"]


def test_reuse_skips_the_stages_when_the_inputs_are_unchanged(
    tracer_provider: Any, meter_provider: Any, span_exporter: Any, metric_reader: Any
) -> None:
    layer, stage = _reuse_layer(tracer_provider, meter_provider, reuse=True)
    one, two = _select_twice(layer, TOOLS, list(TOOLS))  # an equal list, another object
    assert 1 == stage.calls  # the second iteration ran no stage
    assert ("search", "fetch_data") == one.selected == two.selected
    assert (False, True) == (one.reused, two.reused)
    assert one.records == two.records
    spans = span_exporter.get_finished_spans()
    selects = _by_name(spans, c.SPAN_SELECT_TOOLS)
    assert 2 == len(selects)
    assert 1 == len(_by_name(spans, c.SPAN_STAGE))  # the first iteration's only
    first, second = (dict(s.attributes or {}) for s in selects)
    assert c.ATTR_SELECTION_REUSED not in first
    assert True is second.pop(c.ATTR_SELECTION_REUSED)
    for key in (c.ATTR_SELECTION_OFFERED, c.ATTR_SELECTION_SELECTED, c.ATTR_SELECTION_DROPPED):
        assert first[key] == second[key]
    assert ("run_block", "search", "fetch_data", "shell") == second[c.ATTR_SELECTION_OFFERED]
    assert ("run_block", "shell") == second[c.ATTR_SELECTION_DROPPED]
    # the reused selection's span sits in its own iteration
    iterations = _by_name(spans, c.SPAN_ITERATION)
    assert selects[1].parent is not None
    assert iterations[1].context.span_id == selects[1].parent.span_id
    assert 1 == _stage_outcome_adds(metric_reader)  # no stage outcome for the reuse


@pytest.mark.parametrize(
    ("second", "second_role", "why"),
    [
        (["search", "run_block", "fetch_data", "shell"], None, "another order"),
        (["run_block", "search", "fetch_data"], None, "a tool fewer"),
        (list(TOOLS), "auditor", "another role"),
    ],
)
def test_any_input_changed_runs_the_stages_again(
    tracer_provider: Any,
    meter_provider: Any,
    span_exporter: Any,
    second: list[str],
    second_role: str | None,
    why: str,
) -> None:
    layer, stage = _reuse_layer(tracer_provider, meter_provider, reuse=True)
    _, two = _select_twice(layer, TOOLS, second, second_role=second_role)
    assert 2 == stage.calls, why
    assert not two.reused
    spans = span_exporter.get_finished_spans()
    assert 2 == len(_by_name(spans, c.SPAN_STAGE))
    assert all(
        c.ATTR_SELECTION_REUSED not in (s.attributes or {})
        for s in _by_name(spans, c.SPAN_SELECT_TOOLS)
    )


def test_a_changed_agent_catalog_or_fixed_tool_runs_the_stages_again(
    tracer_provider: Any, meter_provider: Any
) -> None:
    catalog = ToolCatalog([ToolSpec("search"), ToolSpec("fetch_data")])
    layer, stage = _reuse_layer(tracer_provider, meter_provider, reuse=True, catalog=catalog)
    with layer.turn("conv-k", [Message("user", "go")], role="analyst") as turn:
        with turn.iteration() as it:
            it.select_tools(TOOLS)
        turn.agent_name = "auditor"  # a handoff
        with turn.iteration() as it:
            assert not it.select_tools(TOOLS).reused
        with turn.iteration() as it:
            assert it.select_tools(TOOLS).reused
        layer.catalog = ToolCatalog([ToolSpec("search")])
        with turn.iteration() as it:
            assert not it.select_tools(TOOLS).reused
        with turn.iteration() as it:
            assert not it.select_tools(TOOLS, fixed=["final_answer"]).reused
    assert 4 == stage.calls
    # a new turn starts afresh
    with layer.turn("conv-k", [Message("user", "again")], role="analyst") as turn:
        with turn.iteration() as it:
            assert not it.select_tools(TOOLS).reused
    assert 5 == stage.calls


def test_unnamed_tools_are_never_reused(tracer_provider: Any, meter_provider: Any) -> None:
    layer, stage = _reuse_layer(tracer_provider, meter_provider, reuse=True)
    unnamed = object()
    _select_twice(layer, ["search", unnamed], ["search", unnamed])  # type: ignore[list-item]
    assert 2 == stage.calls


def _span_shapes(spans: tuple[ReadableSpan, ...]) -> list[tuple[str, dict[str, Any]]]:
    return [(s.name, dict(s.attributes or {})) for s in spans]


def test_reuse_off_records_what_it_always_did(
    tracer_provider: Any, meter_provider: Any, span_exporter: Any
) -> None:
    plain, plain_stage = _reuse_layer(tracer_provider, meter_provider, reuse=False)
    _select_twice(plain, TOOLS, list(TOOLS))
    off = _span_shapes(span_exporter.get_finished_spans())
    span_exporter.clear()
    default = DecisionLayer(
        default_model="claude-opus-4-6",
        stages=[CountingStage(("search", "fetch_data"))],
        agent_name="analyst",
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
    )
    assert default.reuse_selection is False
    one, two = _select_twice(default, TOOLS, list(TOOLS))
    assert 2 == plain_stage.calls
    assert (False, False) == (one.reused, two.reused)
    assert off == _span_shapes(span_exporter.get_finished_spans())
    assert 2 == len([n for n, _ in off if n == c.SPAN_STAGE])
    assert not any(c.ATTR_SELECTION_REUSED in attrs for _, attrs in off)


def test_reuse_selection_must_be_a_bool() -> None:
    with pytest.raises(ValueError, match=r"DecisionLayer\.reuse_selection"):
        DecisionLayer(default_model="m", reuse_selection="yes")  # type: ignore[arg-type]
