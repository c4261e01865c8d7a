"""LangChain adapter defects found from outside, each driven through the real
``create_agent`` with scripted models and recording tools (the ground truth).

What the caller sees is compared with and without seamscope; what seamscope
records is compared with what the scripted models and tools recorded.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.structured_output import ToolStrategy
from langchain_core.messages import BaseMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from pydantic import BaseModel

from seamscope.adapters import DecisionLayer
from seamscope.adapters.langchain import SeamscopeMiddleware
from seamscope.cli import main
from seamscope.decisions import ToolCallPolicy
from seamscope.telemetry import conventions as c

from ._langchain_support import ScriptedChatModel, Toolbox, ai, scripted_models

OPUS = "claude-opus-4-6"
AGENT = "analyst"
THREAD = "conv-1"


def make_layer(tracer_provider: Any, meter_provider: Any, **kwargs: Any) -> DecisionLayer:
    return DecisionLayer(
        default_model=OPUS,
        agent_name=AGENT,
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        **kwargs,
    )


def named(spans: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    return sorted((s for s in spans if s.name == name), key=lambda s: s.start_time or 0)


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in (span.attributes or {}).items()}


def message_view(message: BaseMessage) -> tuple[Any, ...]:
    """A message as the caller sees it (message ids are random per run)."""
    return (
        type(message).__name__,
        message.content,
        [(t["name"], t["args"], t["id"]) for t in getattr(message, "tool_calls", None) or []],
        getattr(message, "tool_call_id", None),
    )


def chunk_view(chunk: Any) -> dict[str, Any]:
    return {
        key: [message_view(m) for m in value] if key == "messages" else value
        for key, value in chunk.items()
    }


# -- what the caller sees ------------------------------------------------------------


@pytest.mark.parametrize("mode", ["stream", "astream"])
def test_stream_values_chunks_are_the_same_with_and_without_seamscope(
    mode: str, span_exporter: InMemorySpanExporter, tracer_provider: Any, meter_provider: Any
) -> None:
    def chunks(middleware: list[Any]) -> list[dict[str, Any]]:
        models, _ = scripted_models([OPUS], [ai(("search", {"query": "q3"}, "c1")), ai(text="ok")])
        agent = create_agent(
            models[OPUS], Toolbox().tools(), middleware=middleware, checkpointer=InMemorySaver()
        )
        payload = {"messages": [HumanMessage("sales q3")]}
        config = {"configurable": {"thread_id": THREAD}}
        if mode == "astream":

            async def collect() -> list[Any]:
                return [c async for c in agent.astream(payload, config, stream_mode="values")]

            return [chunk_view(c) for c in asyncio.run(collect())]
        return [chunk_view(c) for c in agent.stream(payload, config, stream_mode="values")]

    without = chunks([])
    layer = make_layer(tracer_provider, meter_provider)
    with_seamscope = chunks([SeamscopeMiddleware(layer)])

    assert without == with_seamscope
    # and the run was recorded: one invoke_agent, two iterations
    spans = span_exporter.get_finished_spans()
    assert 1 == len(named(spans, f"invoke_agent {AGENT}"))
    assert [0, 1] == [attrs(s)[c.ATTR_ITERATION_INDEX] for s in named(spans, c.SPAN_ITERATION)]


def test_the_checkpoint_namespace_separator_is_langgraphs() -> None:
    """Tripwire: a run is found by its agent graph's checkpoint namespace."""
    from langgraph._internal._constants import NS_SEP

    from seamscope.adapters.langchain import _translate

    assert NS_SEP == _translate.NS_SEP


# -- the watcher fails closed ----------------------------------------------------------


def test_the_watchers_hooks_are_the_installed_langchains() -> None:
    """Tripwire: the hooks of the installed ``AgentMiddleware`` are exactly the
    ones the watcher knows."""
    from seamscope.adapters.langchain._watched import KNOWN_HOOKS, framework_hooks

    assert KNOWN_HOOKS == set(framework_hooks())


def test_create_agent_reads_a_watched_middleware_as_the_middleware_itself(
    tracer_provider: Any,
) -> None:
    """A middleware overriding every hook: watched, it is the same object, an
    instance of its class with its name, and ``create_agent`` reads the same
    attributes of it, getting the same values (hooks aside, its own)."""
    from langchain.agents.middleware import AgentMiddleware

    from seamscope.adapters.langchain._watched import KNOWN_HOOKS

    reads: list[tuple[str, Any]] = []

    class Recording(AgentMiddleware[Any, Any, Any]):
        def __getattribute__(self, name: str) -> Any:
            value = object.__getattribute__(self, name)
            if not name.startswith("_") and name not in KNOWN_HOOKS:
                reads.append((name, value))
            return value

    def node(self: Any, state: Any, runtime: Any) -> None:
        return None

    async def anode(self: Any, state: Any, runtime: Any) -> None:
        return None

    def wrap(self: Any, request: Any, handler: Any) -> Any:
        return handler(request)

    async def awrap(self: Any, request: Any, handler: Any) -> Any:
        return await handler(request)

    for hook in KNOWN_HOOKS:
        asynchronous = hook.startswith(("abefore", "aafter", "awrap"))
        if "wrap" in hook:
            setattr(Recording, hook, awrap if asynchronous else wrap)
        else:
            setattr(Recording, hook, anode if asynchronous else node)

    def read(middleware: Any) -> tuple[list[tuple[str, Any]], list[str]]:
        reads.clear()
        models, _ = scripted_models([OPUS], [ai(text="ok")])
        agent = create_agent(models[OPUS], Toolbox().tools(), middleware=[middleware])
        return list(reads), sorted(agent.get_graph().nodes)

    alone = Recording()
    expected = read(alone)
    mine = Recording()
    seamscope = SeamscopeMiddleware(make_layer(tracer_provider, None))
    listed = seamscope.watching(mine)
    assert mine is listed[1]
    assert isinstance(mine, Recording)
    assert ("Recording", "Recording") == (alone.name, mine.name)
    assert expected == read(mine)


def test_a_middleware_overriding_a_hook_the_watcher_does_not_know_is_not_watched(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tracer_provider: Any
) -> None:
    """A hook a later LangChain adds: the middleware is returned as itself
    (never a copy without that hook), with one warning naming it."""
    import logging

    from langchain.agents.middleware import AgentMiddleware

    def wrap_stream_call(self: Any, request: Any, handler: Any) -> Any:
        return handler(request)

    monkeypatch.setattr(AgentMiddleware, "wrap_stream_call", wrap_stream_call, raising=False)

    class StreamShaper(AgentMiddleware[Any, Any, Any]):
        def wrap_stream_call(self, request: Any, handler: Any) -> Any:
            return handler(request)

        def wrap_model_call(self, request: Any, handler: Any) -> Any:
            return handler(request)

    first, second = StreamShaper(), StreamShaper()
    seamscope = SeamscopeMiddleware(make_layer(tracer_provider, None))
    with caplog.at_level(logging.WARNING, logger="seamscope"):
        middleware = seamscope.watching(first, second)

    assert first is middleware[1]
    assert second is middleware[2]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert 1 == len(warnings)
    assert "seamscope.adapters.langchain" == warnings[0].name
    assert f"{StreamShaper.__qualname__} is not watched" in warnings[0].getMessage()
    assert "wrap_stream_call" in warnings[0].getMessage()


# -- ToolCallLimitMiddleware -------------------------------------------------------------


def _blocked_reasons(spans: Sequence[ReadableSpan]) -> list[str]:
    return [
        attrs(s)[c.ATTR_MIDDLEWARE_REASON]
        for s in named(spans, c.SPAN_DISPATCH)
        if attrs(s).get(c.ATTR_DISPATCH_BLOCKED) is True
    ]


def _limited_agent(layer: DecisionLayer, limit: Any, script: list[Any]) -> tuple[Any, Toolbox]:
    models, _ = scripted_models([OPUS], script)
    box = Toolbox()
    middleware = SeamscopeMiddleware(layer, offload=False).watching(limit)
    agent = create_agent(
        models[OPUS], box.tools(), middleware=middleware, checkpointer=InMemorySaver()
    )
    return agent, box


def test_a_limit_block_names_the_run_limit_when_the_run_limit_was_hit(
    span_exporter: InMemorySpanExporter, tracer_provider: Any, meter_provider: Any
) -> None:
    from langchain.agents.middleware import ToolCallLimitMiddleware

    limit = ToolCallLimitMiddleware(thread_limit=3, run_limit=1)
    agent, box = _limited_agent(
        make_layer(tracer_provider, meter_provider),
        limit,
        [ai(("search", {"query": "a"}, "c1"), ("search", {"query": "b"}, "c2")), ai(text="ok")],
    )
    final = agent.invoke(
        {"messages": [HumanMessage("search")]}, {"configurable": {"thread_id": THREAD}}
    )

    assert [("search", {"query": "a"})] == box.executed  # ground truth: c2 never ran
    told = next(m for m in final["messages"] if getattr(m, "tool_call_id", None) == "c2")
    assert [
        "run_limit=1 reached (2/1 calls) for all tools (exit_behavior=continue), "
        f"1 call(s) not run: {told.content}"
    ] == _blocked_reasons(span_exporter.get_finished_spans())


def test_a_limit_block_names_the_thread_limit_when_the_thread_limit_was_hit(
    span_exporter: InMemorySpanExporter, tracer_provider: Any, meter_provider: Any
) -> None:
    from langchain.agents.middleware import ToolCallLimitMiddleware

    limit = ToolCallLimitMiddleware(thread_limit=2, run_limit=2)
    agent, box = _limited_agent(
        make_layer(tracer_provider, meter_provider),
        limit,
        [
            ai(("search", {"query": "a"}, "c1"), ("search", {"query": "b"}, "c2")),
            ai(text="first"),
            ai(("search", {"query": "c"}, "c3")),
            ai(text="second"),
        ],
    )
    config = {"configurable": {"thread_id": THREAD}}
    agent.invoke({"messages": [HumanMessage("search twice")]}, config)
    final = agent.invoke({"messages": [HumanMessage("once more")]}, config)

    assert ["a", "b"] == sorted(args["query"] for _, args in box.executed)  # c3 never ran
    told = next(m for m in final["messages"] if getattr(m, "tool_call_id", None) == "c3")
    assert [
        "thread_limit=2 reached (3/2 calls) for all tools (exit_behavior=continue), "
        f"1 call(s) not run: {told.content}"
    ] == _blocked_reasons(span_exporter.get_finished_spans())


def _decisions(reader: Any) -> dict[tuple[tuple[str, Any], ...], Any]:
    data = reader.get_metrics_data()
    found: dict[tuple[tuple[str, Any], ...], Any] = {}
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == c.METRIC_MIDDLEWARE_DECISIONS.name:
                    for point in metric.data.data_points:
                        found[tuple(sorted((point.attributes or {}).items()))] = point.value
    return found


@pytest.mark.parametrize("exit_behavior", ["continue", "end"])
def test_the_decisions_counter_counts_one_unit_per_blocked_call(
    exit_behavior: str,
    span_exporter: InMemorySpanExporter,
    tracer_provider: Any,
    meter_provider: Any,
    metric_reader: Any,
) -> None:
    from langchain.agents.middleware import ToolCallLimitMiddleware

    calls = [("search", {"query": q}, f"c{i}") for i, q in enumerate("abc", start=1)]
    agent, box = _limited_agent(
        make_layer(tracer_provider, meter_provider),
        ToolCallLimitMiddleware(run_limit=1, exit_behavior=exit_behavior),  # type: ignore[arg-type]
        [ai(*calls), ai(text="ok")],
    )
    agent.invoke({"messages": [HumanMessage("search")]}, {"configurable": {"thread_id": THREAD}})

    never_ran = len(calls) - len(box.executed)  # ground truth: end runs none, continue one
    assert {"continue": 2, "end": 3}[exit_behavior] == never_ran
    assert never_ran == len(_blocked_reasons(span_exporter.get_finished_spans()))
    assert {
        (
            (c.ATTR_MIDDLEWARE_DECISION, "tool_call_blocked"),
            (c.ATTR_MIDDLEWARE_NAME, "ToolCallLimitMiddleware"),
        ): never_ran
    } == _decisions(metric_reader)


# -- middlewares placed outside seamscope ----------------------------------------------


class FlakyChatModel(ScriptedChatModel):
    """Fails its first ``fails[0]`` calls (each logged as ``"failed"``)."""

    fails: Any = None

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any) -> Any:
        if self.fails and self.fails[0] > 0:
            self.fails[0] -= 1
            self.log.append("failed")
            raise ConnectionError("provider down")
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kw)


def _outside_world(name: str) -> tuple[Any, list[Any], Toolbox, Any]:
    from langchain.agents.middleware import ModelRetryMiddleware, ToolErrorMiddleware

    box = Toolbox()
    if name == "ModelRetryMiddleware":
        log: list[Any] = []
        model = FlakyChatModel(messages=iter([ai(text="ok")]), model_name=OPUS, log=log, fails=[1])
        return model, log, box, ModelRetryMiddleware(max_retries=2, initial_delay=0)
    box.error = ValueError("archive offline")
    models, log = scripted_models([OPUS], [ai(("search", {"query": "q"}, "c1")), ai(text="ok")])
    return models[OPUS], log, box, ToolErrorMiddleware(lambda exc, request: "search failed")


@pytest.mark.parametrize("outside", ["ModelRetryMiddleware", "ToolErrorMiddleware"])
def test_a_middleware_outside_seamscope_that_handles_an_exception_keeps_one_trace(
    outside: str,
    caplog: pytest.LogCaptureFixture,
    span_exporter: InMemorySpanExporter,
    tracer_provider: Any,
    meter_provider: Any,
) -> None:
    """The exception crossed seamscope's hook, so seamscope ended the run; the
    middleware outside handled it and the agent went on: the run goes on in
    the same trace (its iterations keep counting), with one warning naming
    the order to use."""
    import logging

    model, log, box, middleware = _outside_world(outside)
    seamscope = SeamscopeMiddleware(make_layer(tracer_provider, meter_provider))
    agent = create_agent(
        model, box.tools(), middleware=[middleware, seamscope], checkpointer=InMemorySaver()
    )
    with caplog.at_level(logging.WARNING, logger="seamscope"):
        for thread in ("t-1", "t-2"):
            if outside == "ModelRetryMiddleware":
                model.fails[0] = 1
                model.messages = iter([ai(text="ok")])
            else:
                model.messages = iter([ai(("search", {"query": "q"}, "c1")), ai(text="ok")])
            agent.invoke(
                {"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": thread}}
            )

    # ground truth, per invoke: two model calls (one failed) / the tool really raised
    if outside == "ModelRetryMiddleware":
        assert ["failed", "failed"] == [entry for entry in log if entry == "failed"]
    else:
        assert [("search", {"query": "q"})] * 2 == box.executed
    spans = span_exporter.get_finished_spans()
    traces = {s.context.trace_id for s in spans if s.context is not None}
    assert 2 == len(traces)  # one per invoke
    for trace_id in traces:
        in_trace = [s for s in spans if s.context is not None and s.context.trace_id == trace_id]
        assert [f"invoke_agent {AGENT}"] == [s.name for s in in_trace if s.parent is None]
        assert [0, 1] == [
            attrs(s)[c.ATTR_ITERATION_INDEX] for s in named(in_trace, c.SPAN_ITERATION)
        ]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    runs = named(spans, f"invoke_agent {AGENT}")
    if outside == "ToolErrorMiddleware":
        # seamscope has no tool hook: it heard the tool raise (a callback) and
        # the next model call continue the run, whatever the order: one run per
        # invoke, not failed, and nothing to warn about
        assert [None, None] == [attrs(s).get(c.ATTR_ERROR_TYPE) for s in runs]
        assert [StatusCode.UNSET] * 2 == [s.status.status_code for s in runs]
        assert [] == warnings
        return
    assert 1 == len(warnings)
    assert "put SeamscopeMiddleware first in create_agent(middleware=[...])" in (
        warnings[0].getMessage()
    )


def test_a_retry_inside_seamscope_is_one_run_without_a_warning(
    caplog: pytest.LogCaptureFixture,
    span_exporter: InMemorySpanExporter,
    tracer_provider: Any,
    meter_provider: Any,
) -> None:
    import logging

    from langchain.agents.middleware import ModelRetryMiddleware

    log: list[Any] = []
    model = FlakyChatModel(messages=iter([ai(text="ok")]), model_name=OPUS, log=log, fails=[1])
    seamscope = SeamscopeMiddleware(make_layer(tracer_provider, meter_provider))
    agent = create_agent(
        model, [], middleware=[seamscope, ModelRetryMiddleware(max_retries=2, initial_delay=0)]
    )
    with caplog.at_level(logging.WARNING, logger="seamscope"):
        agent.invoke({"messages": [HumanMessage("go")]})

    assert ["failed"] == [entry for entry in log if entry == "failed"]
    spans = span_exporter.get_finished_spans()
    assert [f"invoke_agent {AGENT}"] == [s.name for s in spans if s.parent is None]
    assert [] == [r for r in caplog.records if r.levelno == logging.WARNING]


# -- a watched middleware inside seamscope narrows the tools ----------------------------


def test_a_redirect_to_a_tool_a_watched_selector_dropped_is_dropped_by_the_palette(
    span_exporter: InMemorySpanExporter, tracer_provider: Any, meter_provider: Any
) -> None:
    """seamscope selected every tool; the watched selector inside it bound only
    ``search``: a redirect to ``web_search`` targets a tool not routed to the
    model this turn, so the palette gate drops it and ``search`` runs."""
    from langchain.agents.middleware import LLMToolSelectorMiddleware

    from seamscope.decisions import ToolCallPolicy

    from ._langchain_support import selection

    models, log = scripted_models([OPUS], [ai(("search", {"query": "q3"}, "c1")), ai(text="ok")])
    selectors, _ = scripted_models(["selector"], [selection("search"), selection("search")])
    selector = LLMToolSelectorMiddleware(model=selectors["selector"], max_tools=1)
    policy = ToolCallPolicy(
        "archive_to_web", match=lambda ctx: True, when_tool="search", redirect_to="web_search"
    )
    layer = make_layer(tracer_provider, meter_provider, policies=(policy,))
    box = Toolbox()
    agent = create_agent(
        models[OPUS],
        box.tools(),
        middleware=SeamscopeMiddleware(layer, offload=False).watching(selector),
    )
    agent.invoke({"messages": [HumanMessage("search q3")]})

    assert ["search"] == log[0].tools  # ground truth: the model was bound with search only
    assert [("search", {"query": "q3"})] == box.executed
    dispatches = [
        s
        for s in named(span_exporter.get_finished_spans(), c.SPAN_DISPATCH)
        if not attrs(s).get(c.ATTR_DISPATCH_BLOCKED)
    ]
    assert [("dropped", "search")] == [
        (attrs(s)[c.ATTR_DISPATCH_PALETTE_GATE], attrs(s)[c.ATTR_DISPATCH_FINAL_TOOL])
        for s in dispatches
    ]


# -- a summary's predicted net -------------------------------------------------------------


def test_a_summarys_span_and_settlement_have_one_predicted_net_with_named_terms(
    span_exporter: InMemorySpanExporter, tracer_provider: Any, meter_provider: Any
) -> None:
    """The summary call (2 000 in, 60 out at haiku's $1/$5 per M: $0.0023) is a
    term of the predicted net on the compaction span, as in the settlement."""
    from decimal import Decimal

    from langchain.agents.middleware import SummarizationMiddleware
    from langchain_core.tools import tool

    @tool
    def lookup(topic: str) -> str:
        """Look a topic up in the archive."""
        return "r" * 4_000

    haiku = "claude-haiku-4-5"
    models, _ = scripted_models(
        [OPUS],
        [
            ai(("lookup", {"topic": "q3"}, "c1")),
            ai(text="Q3 grew.".ljust(200, ".")),
            ai(("lookup", {"topic": "q4"}, "c2")),
            ai(text="Q4 grew too."),
        ],
    )
    summarizers, summary_log = scripted_models(
        [haiku], [ai(text="Q3 grew; Q4 asked.".ljust(350, "."), usage=(2_000, 60, 0, 0))]
    )
    summary = SummarizationMiddleware(
        model=summarizers[haiku], trigger=("messages", 6), keep=("messages", 2)
    )
    layer = make_layer(tracer_provider, meter_provider)
    agent = create_agent(
        models[OPUS],
        [lookup],
        middleware=SeamscopeMiddleware(layer, offload=False).watching(summary),
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "sum-1"}}
    agent.invoke({"messages": [HumanMessage("How did Q3 go?".ljust(400, "."))]}, config)
    agent.invoke({"messages": [HumanMessage("And Q4?".ljust(400, "."))]}, config)
    (settlement,) = layer.end_conversation("sum-1")

    assert 1 == len(summary_log)  # ground truth: one summary call
    assert Decimal("0.0023") == settlement.compaction_cost
    (span,) = named(span_exporter.get_finished_spans(), c.SPAN_COMPACTION)
    values = attrs(span)
    assert float(settlement.predicted_net_saving) == values[c.ATTR_OFFLOAD_NET_SAVING_USD]
    assert values[c.ATTR_OFFLOAD_NET_SAVING_USD] == pytest.approx(
        values[c.ATTR_OFFLOAD_REPREFILL_SAVING_USD]
        - values[c.ATTR_OFFLOAD_STUB_CARRY_COST_USD]
        - values[c.ATTR_OFFLOAD_EXPECTED_RECALL_HOP_COST_USD]
        - values[c.ATTR_COMPACTION_COST_USD],
        abs=1e-12,
    )
    assert 0.0023 == values[c.ATTR_COMPACTION_COST_USD]


def test_concurrent_runs_without_a_thread_are_told_apart_without_a_state_key(
    span_exporter: InMemorySpanExporter, tracer_provider: Any, meter_provider: Any
) -> None:
    """Nothing in the state names the run: two ``ainvoke`` of one agent at once,
    no thread id, are still two runs (LangGraph's per-invocation RunControl)."""
    models, log = scripted_models(
        [OPUS],
        [
            ai(("search", {"query": "a"}, "c1")),
            ai(("search", {"query": "b"}, "c2")),
            ai(text="one"),
            ai(text="two"),
        ],
    )
    box = Toolbox()
    layer = make_layer(tracer_provider, meter_provider)
    agent = create_agent(models[OPUS], box.tools(), middleware=[SeamscopeMiddleware(layer)])

    async def both() -> list[Any]:
        return list(
            await asyncio.gather(
                agent.ainvoke({"messages": [HumanMessage("first")]}),
                agent.ainvoke({"messages": [HumanMessage("second")]}),
            )
        )

    asyncio.run(both())

    assert 4 == len(log)  # ground truth: two model calls per run
    assert 2 == len(box.executed)
    spans = span_exporter.get_finished_spans()
    roots = [s for s in spans if s.parent is None]
    assert [f"invoke_agent {AGENT}"] * 2 == [s.name for s in roots]
    for root in roots:
        assert root.context is not None
        iterations = [
            s
            for s in named(spans, c.SPAN_ITERATION)
            if s.parent is not None and s.parent.span_id == root.context.span_id
        ]
        assert [0, 1] == [attrs(s)[c.ATTR_ITERATION_INDEX] for s in iterations]


# -- the ToolStrategy answer call: recorded, never handed to the tool runner ---------------


class Weather(BaseModel):
    """The weather in a city."""

    city: str
    celsius: int


def test_the_structured_answer_is_recorded_never_run_and_never_redirected(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A catch-all redirect policy never takes the ``ToolStrategy`` answer (the
    caller's structured response is the same as without seamscope); its call
    has one dispatch span saying it is the structured answer, no execute_tool
    span, and explain tells it apart from a dispatched tool."""
    path = tmp_path / "trace.jsonl"
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(str(path))))
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    catch_all = ToolCallPolicy("any_to_search", match=lambda ctx: True, redirect_to="search")
    layer = DecisionLayer(
        default_model=OPUS, agent_name=AGENT, tracer_provider=provider, policies=[catch_all]
    )

    def answer(with_seamscope: bool) -> tuple[Any, Toolbox]:
        models, _ = scripted_models(
            [OPUS], [ai(("Weather", {"city": "Oslo", "celsius": 4}, "w1"), usage=(100, 5, 0, 0))]
        )
        box = Toolbox()
        middleware = [SeamscopeMiddleware(layer, offload=False)] if with_seamscope else []
        agent = create_agent(
            models[OPUS],
            box.tools(),
            middleware=middleware,
            response_format=ToolStrategy(Weather),
            checkpointer=InMemorySaver(),
        )
        config = {"configurable": {"thread_id": THREAD}}
        final = agent.invoke({"messages": [HumanMessage("weather in Oslo?")]}, config=config)
        return final, box

    final, box = answer(True)
    plain, _ = answer(False)
    provider.shutdown()

    assert Weather(city="Oslo", celsius=4) == final["structured_response"]
    assert [message_view(m) for m in plain["messages"]] == [
        message_view(m) for m in final["messages"]
    ]
    assert [] == box.executed
    spans = exporter.get_finished_spans()
    assert [] == [s.name for s in spans if s.name.startswith("execute_tool")]
    assert [] == named(spans, c.SPAN_SEAM_POST_MODEL)
    [dispatch] = named(spans, c.SPAN_DISPATCH)
    values = attrs(dispatch)
    assert (True, "w1", "Weather", "Weather") == (
        values[c.ATTR_DISPATCH_STRUCTURED_OUTPUT],
        values[c.ATTR_GEN_AI_TOOL_CALL_ID],
        values[c.ATTR_DISPATCH_EMITTED_TOOL],
        values[c.ATTR_DISPATCH_FINAL_TOOL],
    )
    assert c.ATTR_POLICY_WINNER not in values
    [iteration] = named(spans, c.SPAN_ITERATION)
    assert dispatch.parent is not None and iteration.context is not None
    assert iteration.context.span_id == dispatch.parent.span_id
    assert THREAD == values[c.ATTR_GEN_AI_CONVERSATION_ID]

    assert 0 == main(["explain", str(path), "--tool", "Weather"])
    out = capsys.readouterr().out
    [story] = [line for line in out.splitlines() if "Weather:" in line]
    assert "emitted as the structured answer; consumed by the framework, never run" in story
    assert "dispatched" not in story
    assert 0 == main(["explain", str(path)])
    out = capsys.readouterr().out
    assert any(
        "Weather structured output: consumed, no tool run" in line for line in out.splitlines()
    )


def test_a_middleware_shared_by_two_agents_is_watched_by_both(
    span_exporter: InMemorySpanExporter, tracer_provider: Any
) -> None:
    """One middleware instance, two agents, a SeamscopeMiddleware each: both
    build and run, and each agent's trace has its own decision."""
    from langchain.agents.middleware import AgentMiddleware

    class OnlyLookup(AgentMiddleware[Any, Any, Any]):
        def wrap_model_call(self, request: Any, handler: Any) -> Any:
            return handler(request.override(tools=request.tools[:1]))

    shared = OnlyLookup()
    traces = []
    for _ in range(2):
        seamscope = SeamscopeMiddleware(make_layer(tracer_provider, None))
        models, log = scripted_models([OPUS], [ai(text="ok")])
        agent = create_agent(models[OPUS], Toolbox().tools(), middleware=seamscope.watching(shared))
        agent.invoke({"messages": [HumanMessage("hi")]})
        assert 1 == len(log[0].tools or [])
        decisions = [
            s
            for s in span_exporter.get_finished_spans()
            if (s.attributes or {}).get(c.ATTR_MIDDLEWARE_NAME) == "OnlyLookup"
        ]
        traces.append([s.context.trace_id for s in decisions if s.context is not None])
        span_exporter.clear()
    assert [1, 1] == [len(t) for t in traces]
    assert traces[0] != traces[1]
