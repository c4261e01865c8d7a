"""LangChain behaves with ``SeamscopeMiddleware`` as it does alone.

Each test runs what ``create_agent`` promises (its errors, its routing, its
``stream`` chunks, its checkpoints, the ``recursion_limit`` a run needs)
with and without seamscope, with scripted chat models and no network; the
agent without seamscope is the ground truth. Where seamscope's class
docstring says a configuration changes something, a test holds it to that.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, hook_config
from langchain.agents.structured_output import ToolStrategy
from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.tools import BaseTool, ToolException, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.errors import GraphRecursionError
from langgraph.types import Command, interrupt
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from pydantic import BaseModel

from seamscope.adapters import DecisionLayer
from seamscope.adapters.langchain import SeamscopeMiddleware
from seamscope.telemetry import conventions as c

from ._langchain_support import ai, scripted_models

OPUS = "claude-opus-4-6"
AGENT = "analyst"
THREAD = "conv-1"
CONFIGS = {"default": {}, "offload_off": {"offload": False}}
"""``SeamscopeMiddleware`` options: the default, and without the offload gate."""


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


@tool
def refuse(key: str) -> str:
    """A lookup that refuses every key."""
    raise ToolException(f"no access to {key}")


refuse.handle_tool_error = True


@tool(return_direct=True)
def answer(text: str) -> str:
    """Answer the user directly."""
    return text


ONE_TOOL_CALL = [ai(("lookup", {"key": "k"}, "c1")), ai(text="k found.")]


def make_layer(tracer_provider: Any, meter_provider: Any) -> DecisionLayer:
    return DecisionLayer(
        default_model=OPUS,
        agent_name=AGENT,
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
    )


def agent_for(
    script: Sequence[Any],
    tools: Sequence[BaseTool],
    layer: DecisionLayer | None,
    options: dict[str, Any],
    *,
    middleware: Sequence[AgentMiddleware[Any, Any, Any]] = (),
    **kwargs: Any,
) -> Any:
    """The agent, with ``SeamscopeMiddleware(layer, **options)`` first (``layer``
    None: without seamscope)."""
    models, _ = scripted_models([OPUS], script)
    seamscope = [] if layer is None else [SeamscopeMiddleware(layer, **options)]
    return create_agent(models[OPUS], list(tools), middleware=[*seamscope, *middleware], **kwargs)


def view(message: BaseMessage) -> tuple[Any, ...]:
    """A message as the agent's behaviour (ids are random per run)."""
    calls = tuple((t["name"], repr(t["args"]), t["id"]) for t in getattr(message, "tool_calls", ()))
    return type(message).__name__, message.content, calls, getattr(message, "status", None)


def chunk_view(chunk: dict[str, Any]) -> list[tuple[str, Any]]:
    """An ``updates`` chunk: each node with what it wrote (None: nothing)."""
    return [
        (node, None if update is None else [view(m) for m in update.get("messages", [])])
        for node, update in chunk.items()
    ]


def start(text: str = "look k up") -> dict[str, Any]:
    return {"messages": [HumanMessage(text)]}


def named(spans: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    return sorted((s for s in spans if s.name == name), key=lambda s: s.start_time or 0)


def error_type(span: ReadableSpan) -> Any:
    return (span.attributes or {}).get(c.ATTR_ERROR_TYPE)


def parent(span: ReadableSpan, spans: Sequence[ReadableSpan]) -> ReadableSpan:
    assert span.parent is not None
    (found,) = [
        s for s in spans if s.context is not None and s.context.span_id == span.parent.span_id
    ]
    return found


# -- the graph, its chunks, its checkpoints, its recursion limit ----------------------------


@pytest.mark.parametrize("config", sorted(CONFIGS))
@pytest.mark.parametrize("mode", ["stream", "astream"])
def test_a_run_streams_the_same_update_chunks(
    config: str, mode: str, tracer_provider: Any, meter_provider: Any
) -> None:
    def chunks(layer: DecisionLayer | None) -> list[list[tuple[str, Any]]]:
        agent = agent_for(ONE_TOOL_CALL, [lookup], layer, CONFIGS[config])
        if mode == "stream":
            return [chunk_view(c) for c in agent.stream(start(), stream_mode="updates")]

        async def consume() -> list[list[tuple[str, Any]]]:
            return [chunk_view(c) async for c in agent.astream(start(), stream_mode="updates")]

        return asyncio.run(consume())

    alone = chunks(None)
    assert ["model", "tools", "model"] == [node for chunk in alone for node, _ in chunk]
    assert alone == chunks(make_layer(tracer_provider, meter_provider))


@pytest.mark.parametrize("config", sorted(CONFIGS))
@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_a_run_writes_the_same_checkpoints_and_state(
    config: str, mode: str, tracer_provider: Any, meter_provider: Any
) -> None:
    def checkpoints(layer: DecisionLayer | None) -> tuple[list[Any], list[Any]]:
        saver = InMemorySaver()
        agent = agent_for(ONE_TOOL_CALL, [lookup], layer, CONFIGS[config], checkpointer=saver)
        thread: Any = {"configurable": {"thread_id": THREAD}}
        if mode == "invoke":
            agent.invoke(start(), thread)
        else:
            asyncio.run(agent.ainvoke(start(), thread))
        written = [
            (
                saved.metadata.get("step"),
                saved.metadata.get("source"),
                sorted(saved.checkpoint["channel_versions"]),
            )
            for saved in saver.list(thread)
        ]
        state = agent.get_state(thread)
        return written, [view(m) for m in state.values["messages"]]

    alone = checkpoints(None)
    assert 5 == len(alone[0])
    assert alone == checkpoints(make_layer(tracer_provider, meter_provider))


def smallest_recursion_limit(layer: DecisionLayer | None, options: dict[str, Any]) -> int:
    for limit in range(1, 12):
        agent = agent_for(ONE_TOOL_CALL, [lookup], layer, options)
        try:
            agent.invoke(start(), {"recursion_limit": limit})
        except GraphRecursionError:
            continue
        return limit
    raise AssertionError("the run never finished")


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_a_run_needs_the_same_recursion_limit(
    config: str, tracer_provider: Any, meter_provider: Any
) -> None:
    alone = smallest_recursion_limit(None, CONFIGS[config])
    assert 4 == alone
    assert alone == smallest_recursion_limit(
        make_layer(tracer_provider, meter_provider), CONFIGS[config]
    )


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_seamscope_adds_no_node_to_the_graph(
    config: str, tracer_provider: Any, meter_provider: Any
) -> None:
    layer = make_layer(tracer_provider, meter_provider)
    alone = agent_for(ONE_TOOL_CALL, [lookup], None, {}).get_graph()
    mine = agent_for(ONE_TOOL_CALL, [lookup], layer, CONFIGS[config]).get_graph()
    assert sorted(alone.nodes) == sorted(mine.nodes)


# -- an agent without tools, LangChain's tool check -------------------------------------------


class JumpBack(AgentMiddleware[Any, Any, Any]):
    """An ``after_model`` hook returning a ``jump_to`` it never declared: LangChain
    ignores it in an agent without a tools node."""

    def after_model(self, state: Any, runtime: Any) -> dict[str, Any]:
        return {"jump_to": "model"}


class AddsUnknownTool(AgentMiddleware[Any, Any, Any]):
    """Adds, in ``wrap_model_call``, a tool the agent cannot execute."""

    def wrap_model_call(self, request: Any, handler: Any) -> Any:
        return handler(request.override(tools=[*request.tools, lookup]))


def outcome(agent: Any) -> Any:
    try:
        return [view(m) for m in agent.invoke(start(), {"recursion_limit": 10})["messages"]]
    except (GraphRecursionError, ValueError) as exc:
        return type(exc).__name__, str(exc)


TOOLLESS: dict[str, tuple[list[Any], list[AgentMiddleware[Any, Any, Any]]]] = {
    # an undeclared jump_to from after_model: ignored, the run ends after one call
    "undeclared_jump": ([ai(text="first"), ai(text="second")] * 6, [JumpBack()]),
    # a tool call the model emits in an agent without tools: the run ends there
    "tool_call": ([ai(("lookup", {"key": "k"}, f"c{i}")) for i in range(12)], []),
    # a middleware adds a tool the agent cannot execute: LangChain's ValueError
    "unknown_tool": ([ai(text="first")], [AddsUnknownTool()]),
}


@pytest.mark.parametrize("offload", [True, False], ids=["offload", "no_offload"])
@pytest.mark.parametrize("case", sorted(TOOLLESS))
def test_an_agent_without_tools_runs_as_without_seamscope(
    case: str, offload: bool, tracer_provider: Any, meter_provider: Any
) -> None:
    """Offloading or not: the same graph, routing and LangChain checks (its
    ValueError for a tool a middleware adds that the agent cannot execute)."""
    script, middleware = TOOLLESS[case]
    layer = make_layer(tracer_provider, meter_provider)
    alone = agent_for(script, [], None, {}, middleware=middleware)
    mine = agent_for(script, [], layer, {"offload": offload}, middleware=middleware)

    expected = outcome(alone)
    if case == "unknown_tool":
        assert "ValueError" == expected[0]
        assert "Middleware added tools that the agent doesn't know how to execute" in expected[1]
    else:
        assert 2 == len(expected)  # the question and one answer
    assert expected == outcome(mine)
    assert sorted(alone.get_graph().nodes) == sorted(mine.get_graph().nodes)


@pytest.mark.parametrize("offload", [True, False], ids=["offload", "no_offload"])
def test_seamscope_has_no_tool_hooks_and_registers_no_tool(
    offload: bool, tracer_provider: Any, meter_provider: Any
) -> None:
    """Unless a watched middleware has tool hooks: the recall tool is offered to
    the model as a description once there is something to recall, and
    answered in the model call (tests/adapters/test_langchain.py)."""
    seamscope = SeamscopeMiddleware(make_layer(tracer_provider, meter_provider), offload=offload)
    assert isinstance(seamscope, SeamscopeMiddleware)
    assert "SeamscopeMiddleware" == seamscope.name
    assert [] == list(seamscope.tools)
    assert type(seamscope).wrap_tool_call is AgentMiddleware.wrap_tool_call
    assert type(seamscope).awrap_tool_call is AgentMiddleware.awrap_tool_call
    for hook in ("before_agent", "after_agent", "abefore_agent", "aafter_agent"):
        assert getattr(type(seamscope), hook) is getattr(AgentMiddleware, hook)


# -- the spans of a run without seamscope's own nodes ----------------------------------------


@pytest.mark.parametrize("config", sorted(CONFIGS))
@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_each_invoke_is_one_run_whose_tool_calls_have_their_spans(
    config: str,
    mode: str,
    span_exporter: InMemorySpanExporter,
    tracer_provider: Any,
    meter_provider: Any,
) -> None:
    script = [
        ai(("lookup", {"key": "k"}, "c1"), ("refuse", {"key": "secret"}, "c2")),
        ai(text="k found, secret refused."),
        ai(text="Nothing else."),
    ]
    layer = make_layer(tracer_provider, meter_provider)
    agent = agent_for(
        script, [lookup, refuse], layer, CONFIGS[config], checkpointer=InMemorySaver()
    )
    thread: Any = {"configurable": {"thread_id": THREAD}}
    for text in ("look k and secret up", "anything else?"):
        if mode == "invoke":
            agent.invoke(start(text), thread)
        else:
            asyncio.run(agent.ainvoke(start(text), thread))
    spans = span_exporter.get_finished_spans()

    runs = named(spans, f"invoke_agent {AGENT}")
    assert [None, None] == [error_type(s) for s in runs]  # ended, neither abandoned
    assert 2 == len({s.context.trace_id for s in runs if s.context is not None})
    iterations = named(spans, c.SPAN_ITERATION)
    assert [runs[0], runs[0], runs[1]] == [parent(s, spans) for s in iterations]
    (ok,) = named(spans, "execute_tool lookup")
    (refused,) = named(spans, "execute_tool refuse")
    assert iterations[0] is parent(ok, spans)
    assert iterations[0] is parent(refused, spans)
    assert (StatusCode.UNSET, None) == (ok.status.status_code, error_type(ok))
    assert (StatusCode.ERROR, "ToolException") == (refused.status.status_code, error_type(refused))
    assert {"c1", "c2"} == {
        (s.attributes or {}).get(c.ATTR_GEN_AI_TOOL_CALL_ID) for s in (ok, refused)
    }


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_a_return_direct_answer_ends_the_run(
    config: str, span_exporter: InMemorySpanExporter, tracer_provider: Any, meter_provider: Any
) -> None:
    layer = make_layer(tracer_provider, meter_provider)
    agent = agent_for([ai(("answer", {"text": "42"}, "c1"))], [answer], layer, CONFIGS[config])
    assert "42" == agent.invoke(start("the answer?"))["messages"][-1].content
    (run,) = named(span_exporter.get_finished_spans(), f"invoke_agent {AGENT}")
    assert error_type(run) is None


class AnotherTry(AgentMiddleware[Any, Any, Any]):
    """Sends the agent back to the model once after its first answer."""

    def __init__(self) -> None:
        super().__init__()
        self.sent = False

    @hook_config(can_jump_to=["model"])
    def after_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        if self.sent or state["messages"][-1].tool_calls:
            return None
        self.sent = True
        return {"jump_to": "model"}


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_a_run_another_middleware_sends_on_after_its_answer_stays_in_one_trace(
    config: str, span_exporter: InMemorySpanExporter, tracer_provider: Any, meter_provider: Any
) -> None:
    layer = make_layer(tracer_provider, meter_provider)
    script = [ai(text="first answer"), ai(text="second answer")]
    agent = agent_for(script, [lookup], layer, CONFIGS[config], middleware=[AnotherTry()])
    assert "second answer" == agent.invoke(start())["messages"][-1].content
    spans = span_exporter.get_finished_spans()

    runs = named(spans, f"invoke_agent {AGENT}")
    assert [None] * len(runs) == [error_type(s) for s in runs]
    assert 1 == len({s.context.trace_id for s in spans if s.context is not None})
    iterations = named(spans, c.SPAN_ITERATION)
    assert [0, 1] == [(s.attributes or {}).get(c.ATTR_ITERATION_INDEX) for s in iterations]


class Weather(BaseModel):
    city: str
    celsius: int


@pytest.mark.parametrize("strategy", ["tool", "auto"])  # auto: this model's native JSON
@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_a_structured_answer_ends_the_run(
    strategy: str,
    config: str,
    span_exporter: InMemorySpanExporter,
    tracer_provider: Any,
    meter_provider: Any,
) -> None:
    weather = {"city": "Paris", "celsius": 21}
    script = [
        ai(("lookup", {"key": "paris"}, "c1")),
        ai(("Weather", weather, "c2")) if strategy == "tool" else ai(text=json.dumps(weather)),
    ]
    response_format = ToolStrategy(Weather) if strategy == "tool" else Weather

    def structured(layer: DecisionLayer | None) -> Any:
        agent = agent_for(script, [lookup], layer, CONFIGS[config], response_format=response_format)
        return agent.invoke(start("weather in Paris?"))["structured_response"]

    alone = structured(None)
    assert Weather(city="Paris", celsius=21) == alone
    assert alone == structured(make_layer(tracer_provider, meter_provider))
    (run,) = named(span_exporter.get_finished_spans(), f"invoke_agent {AGENT}")
    assert error_type(run) is None


@tool
def deploy(service: str) -> str:
    """Deploy a service after a human approves."""
    return f"deployed {service}: {interrupt({'deploy': service})}"


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_a_run_an_interrupt_paused_resumes_in_the_same_trace(
    config: str, span_exporter: InMemorySpanExporter, tracer_provider: Any, meter_provider: Any
) -> None:
    layer = make_layer(tracer_provider, meter_provider)
    script = [ai(("deploy", {"service": "api"}, "d1")), ai(text="shipped")]
    agent = agent_for(script, [deploy], layer, CONFIGS[config], checkpointer=InMemorySaver())
    thread: Any = {"configurable": {"thread_id": THREAD}}
    assert "__interrupt__" in agent.invoke(start("ship it"), thread)
    assert [] == named(span_exporter.get_finished_spans(), f"invoke_agent {AGENT}")

    assert "shipped" == agent.invoke(Command(resume="approved"), thread)["messages"][-1].content
    spans = span_exporter.get_finished_spans()
    (run,) = named(spans, f"invoke_agent {AGENT}")
    assert error_type(run) is None
    assert {run.context.trace_id if run.context else None} == {
        s.context.trace_id if s.context else None for s in spans
    }
    paused, resumed = named(spans, "execute_tool deploy")
    assert (None, None) == (error_type(paused), error_type(resumed))


# -- an offload and a recall, with no tool hook -------------------------------------------------


@tool
def big_log(day: str) -> str:
    """The whole log of a day."""
    return f"{day}: " + "line of log text. " * 4000


def test_an_offload_is_written_by_the_next_model_call_and_a_recall_answered_in_its_own(
    span_exporter: InMemorySpanExporter, tracer_provider: Any, meter_provider: Any
) -> None:
    """The gate fires when the tool's run ends; the next model call receives the
    stub and writes it into the state under the tool's own ToolMessage id; the
    recall the model emits is answered in that model call (the tools node runs
    only the real tool), and the model then gets the whole output back."""
    layer = DecisionLayer(
        default_model=OPUS,
        agent_name=AGENT,
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        offload_id_factory=lambda: "off-1",
    )
    script = [
        ai(("big_log", {"day": "mon"}, "c1")),
        ai(("recall_tool_result", {"offload_id": "off-1"}, "c2")),
        ai(text="Monday was quiet."),
    ]
    models, log = scripted_models([OPUS], script)
    seamscope = SeamscopeMiddleware(layer)
    agent = create_agent(
        models[OPUS], [big_log], middleware=[seamscope], checkpointer=InMemorySaver()
    )
    thread: Any = {"configurable": {"thread_id": THREAD}}
    full = big_log.invoke({"day": "mon"})
    chunks = list(agent.stream(start("what happened on monday?"), thread, stream_mode="updates"))

    # the model calls: the stub, then the whole output after the recall
    assert 3 == len(log)
    (tool_answer,) = [m for m in log[1].messages if getattr(m, "tool_call_id", None) == "c1"]
    assert str(tool_answer.content).startswith("[offloaded ")
    assert "recall_tool_result" in (log[1].tools or [])
    (recalled,) = [m for m in log[2].messages if getattr(m, "tool_call_id", None) == "c2"]
    assert full == recalled.content
    # the nodes: the tools node ran once (the real tool), the recall was the model's
    assert ["model", "tools", "model", "model"] == [node for c_ in chunks for node in c_]

    def written(update: Any) -> list[Any]:  # a node's update, or its list of updates
        updates = update if isinstance(update, list) else [update]
        return [m for u in updates if u for m in u.get("messages", [])]

    # the model call after the tools node: its AIMessage with the recall's answer,
    # then the stub it sent, written over the tool's own message
    assert [("AIMessage", None), ("ToolMessage", "c2"), ("ToolMessage", "c1")] == [
        (type(m).__name__, getattr(m, "tool_call_id", None)) for m in written(chunks[2]["model"])
    ]
    # the state: the tool's own ToolMessage (same id) holds the stub
    state = agent.get_state(thread).values["messages"]
    (tools_wrote,) = written(chunks[1]["tools"])
    (in_state,) = [m for m in state if getattr(m, "tool_call_id", None) == "c1"]
    assert tools_wrote.id == in_state.id
    assert full == tools_wrote.content
    assert tool_answer.content == in_state.content
    # the trace: the recall's execute_tool span, and a priced recall in the ledger
    spans = span_exporter.get_finished_spans()
    (recall_span,) = named(spans, "execute_tool recall_tool_result")
    assert error_type(recall_span) is None
    settled = layer.end_conversation(THREAD)
    assert 1 == len(settled)
    assert 1 == settled[0].recalls


class Truncates(AgentMiddleware):
    """A middleware inside seamscope that cuts every tool answer to 100 characters."""

    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        result = handler(request)
        return result.model_copy(update={"content": str(result.content)[:100]})


def test_the_gate_sees_the_answer_the_state_holds_after_the_middlewares_around_the_tool(
    span_exporter: InMemorySpanExporter, tracer_provider: Any, meter_provider: Any
) -> None:
    """The tool returned 72,000 characters; a middleware cut them to 100: that is
    what the model gets, whole, and there is nothing for the gate to offload."""
    layer = make_layer(tracer_provider, meter_provider)
    script = [ai(("big_log", {"day": "mon"}, "c1")), ai(text="Short log.")]
    models, log = scripted_models([OPUS], script)
    agent = create_agent(
        models[OPUS], [big_log], middleware=[SeamscopeMiddleware(layer), Truncates()]
    )
    agent.invoke(start("what happened on monday?"))

    (answer,) = [m for m in log[1].messages if getattr(m, "tool_call_id", None) == "c1"]
    assert big_log.invoke({"day": "mon"})[:100] == answer.content
    spans = span_exporter.get_finished_spans()
    assert [] == named(spans, c.SPAN_OFFLOAD_GATE)
    assert [] == layer.end_conversation("any")


class FailsOnce(AgentMiddleware):
    """The model call after the tools fails once (the graph raises it)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def wrap_model_call(self, request: Any, handler: Any) -> Any:
        self.calls += 1
        if self.calls == 2:
            raise ConnectionError("provider down")
        return handler(request)


def test_a_model_call_made_again_sends_the_same_stub_and_asks_the_gate_once(
    span_exporter: InMemorySpanExporter, tracer_provider: Any, meter_provider: Any
) -> None:
    layer = DecisionLayer(
        default_model=OPUS,
        agent_name=AGENT,
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        offload_id_factory=iter(["off-1", "off-2"]).__next__,
    )
    script = [ai(("big_log", {"day": "mon"}, "c1")), ai(text="Monday was quiet.")]
    models, log = scripted_models([OPUS], script)
    agent = create_agent(
        models[OPUS],
        [big_log],
        middleware=[SeamscopeMiddleware(layer), FailsOnce()],
        checkpointer=InMemorySaver(),
    )
    thread: Any = {"configurable": {"thread_id": THREAD}}
    with pytest.raises(ConnectionError):
        agent.invoke(start("what happened on monday?"), thread)
    # the state still holds the whole output: the failed model call wrote nothing
    state = agent.get_state(thread).values["messages"]
    assert big_log.invoke({"day": "mon"}) == state[-1].content
    agent.invoke(None, thread)  # the graph goes on from its checkpoint

    (answer,) = [m for m in log[1].messages if getattr(m, "tool_call_id", None) == "c1"]
    assert str(answer.content).startswith("[offloaded off-1: ")
    state = agent.get_state(thread).values["messages"]
    (in_state,) = [m for m in state if getattr(m, "tool_call_id", None) == "c1"]
    assert answer.content == in_state.content
    gates = named(span_exporter.get_finished_spans(), c.SPAN_OFFLOAD_GATE)
    assert 1 == len(gates)


def test_a_recall_the_model_makes_up_is_answered_by_langchain_as_without_seamscope(
    tracer_provider: Any, meter_provider: Any
) -> None:
    """Nothing offloaded, so no recall tool offered: a call of it is an unknown
    tool's, LangChain's error answer and routing, with or without seamscope."""
    script = [ai(("recall_tool_result", {"offload_id": "off-9"}, "c1")), ai(text="ok")]
    layer = make_layer(tracer_provider, meter_provider)
    alone = agent_for(script, [lookup], None, {})
    mine = agent_for(script, [lookup], layer, {})
    expected = outcome(alone)
    assert "is not a valid tool" in str(expected[2][1])
    assert expected == outcome(mine)
