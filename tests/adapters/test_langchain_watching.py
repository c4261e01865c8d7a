"""LangChain's own decision middlewares, watched by seamscope, in the real ``create_agent``.

Each of the eight decision middlewares of the pinned LangChain runs as the
user configured it, with scripted main and decision models and recording
tools (no network). What seamscope records is checked against what the
scripted models and tools recorded (the tools a model was really bound
with, the model really called, the calls that never ran, the messages the
model really received), and the agent's behaviour, the models' inputs and
the graph are the same with seamscope watching and without seamscope.
"""

from __future__ import annotations

import asyncio
import warnings
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import (
    AgentMiddleware,
    AutoModeMiddleware,
    ClearToolUsesEdit,
    ContextEditingMiddleware,
    LLMToolSelectorMiddleware,
    ModelChoice,
    ModelFallbackMiddleware,
    ModelRouterMiddleware,
    ProviderToolSearchMiddleware,
    SummarizationMiddleware,
    ToolCallLimitMiddleware,
)
from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from seamscope.adapters import DecisionLayer
from seamscope.adapters.langchain import SeamscopeMiddleware
from seamscope.telemetry import conventions as c

from ._langchain_support import (
    Classified,
    ModelCall,
    ProviderChatModel,
    ScriptedChatModel,
    ScriptedDecisionModel,
    Toolbox,
    UnnamedChatModel,
    ai,
    choice,
    risk,
    scripted_models,
    selection,
)

OPUS = "claude-opus-4-6"
HAIKU = "claude-haiku-4-5"
AGENT = "analyst"
THREAD = "conv-1"
ALL_TOOLS = ["run_block", "fetch_data", "search", "web_search", "big_report"]


# -- one world: the user's models, tools and middlewares, fresh for every run -----------


@dataclass
class World:
    """The user's agent: its main model, its tools, its middlewares, and every
    scripted model's log (the ground truth)."""

    main: Any
    log: list[ModelCall]
    middlewares: list[AgentMiddleware[Any, Any, Any]]
    box: Toolbox = field(default_factory=Toolbox)
    decisions: list[ModelCall] = field(default_factory=list)
    classified: list[Classified] = field(default_factory=list)


@dataclass
class Ran:
    world: World
    agent: Any
    final: dict[str, Any]


def run(
    world: World,
    layer: DecisionLayer | None,
    *,
    texts: Sequence[str] = ("sales q3",),
    mode: str = "invoke",
    offload: bool = False,
) -> Ran:
    """Drive the agent; ``layer`` None: without seamscope at all."""
    middleware: list[Any] = list(world.middlewares)
    if layer is not None:
        middleware = SeamscopeMiddleware(layer, offload=offload).watching(*world.middlewares)
    agent = create_agent(
        world.main, world.box.tools(), middleware=middleware, checkpointer=InMemorySaver()
    )
    config = {"configurable": {"thread_id": THREAD}}
    final: dict[str, Any] = {}
    for text in texts:
        payload = {"messages": [HumanMessage(text)]}
        if mode == "ainvoke":
            final = asyncio.run(agent.ainvoke(payload, config=config))
        else:
            final = agent.invoke(payload, config=config)
    return Ran(world, agent, final)


def message_view(message: BaseMessage) -> tuple[Any, ...]:
    """A message as the agent's behaviour (ids are random per run)."""
    calls = tuple(
        (call["name"], repr(call["args"]), call.get("id"))
        for call in getattr(message, "tool_calls", ())
    )
    return (
        message.type,
        repr(message.content),
        calls,
        getattr(message, "tool_call_id", None),
        getattr(message, "status", None),
        getattr(message, "name", None),
    )


def plain(value: Any) -> Any:
    """A decision model's input without the random message ids."""
    if isinstance(value, BaseMessage):
        return message_view(value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return repr(value)


def behaviour(ran: Ran) -> dict[str, Any]:
    """What the agent did: its final messages, every model input, what ran."""
    world = ran.world
    return {
        "final": [message_view(m) for m in ran.final["messages"]],
        "models": [
            (call.model, call.tools, call.tool_choice, [message_view(m) for m in call.messages])
            for call in [*world.log, *world.decisions]
        ],
        "classified": [(x.model, x.questions, plain(x.state)) for x in world.classified],
        "executed": world.box.executed,
    }


def graph(agent: Any) -> tuple[set[str], set[tuple[str, str, bool]]]:
    drawn = agent.get_graph()
    return set(drawn.nodes), {(e.source, e.target, e.conditional) for e in drawn.edges}


def make_layer(tracer_provider: Any, meter_provider: Any) -> DecisionLayer:
    return DecisionLayer(
        default_model=OPUS,
        agent_name=AGENT,
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
    )


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in (span.attributes or {}).items()}


def decided(spans: Sequence[ReadableSpan], kind: str) -> list[ReadableSpan]:
    found = [s for s in spans if attrs(s).get(c.ATTR_MIDDLEWARE_DECISION) == kind]
    return sorted(found, key=lambda s: s.start_time or 0)


def named(spans: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    return sorted((s for s in spans if s.name == name), key=lambda s: s.start_time or 0)


def parent_of(span: ReadableSpan, spans: Sequence[ReadableSpan]) -> ReadableSpan:
    assert span.parent is not None
    return next(
        s for s in spans if s.context is not None and s.context.span_id == span.parent.span_id
    )


def points(reader: InMemoryMetricReader, name: str) -> dict[tuple[tuple[str, Any], ...], Any]:
    data = reader.get_metrics_data()
    found: dict[tuple[tuple[str, Any], ...], Any] = {}
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == name:
                    for point in metric.data.data_points:
                        found[tuple(sorted((point.attributes or {}).items()))] = point.value
    return found


def middleware_attrs(span: ReadableSpan, name: str, kind: str) -> dict[str, Any]:
    """The common middleware attributes a decision span must carry."""
    values = attrs(span)
    assert {
        c.ATTR_MIDDLEWARE_NAME: name,
        c.ATTR_MIDDLEWARE_DECISION: kind,
        c.ATTR_MIDDLEWARE_FRAMEWORK: "langchain",
    } == {
        k: values[k]
        for k in (c.ATTR_MIDDLEWARE_NAME, c.ATTR_MIDDLEWARE_DECISION, c.ATTR_MIDDLEWARE_FRAMEWORK)
    }
    return values


def assert_same_with_and_without(make: Callable[[], World], layer: DecisionLayer, **kw: Any) -> Ran:
    """The agent behaves the same, the models receive the same inputs, and the
    graph is the same, with seamscope watching and without it."""
    on = run(make(), layer, **kw)
    off = run(make(), None, **kw)
    plain = create_agent(
        make().main,
        Toolbox().tools(),
        middleware=[SeamscopeMiddleware(layer, offload=False), *make().middlewares],
    )
    assert behaviour(off) == behaviour(on)
    nodes_on, edges_on = graph(on.agent)
    nodes_off, _ = graph(off.agent)
    assert nodes_off == nodes_on  # seamscope adds no node
    assert (nodes_on, edges_on) == graph(plain)  # watched or not: the same graph
    return on


# -- the eight middlewares ------------------------------------------------------------------


def selector_world() -> World:
    models, log = scripted_models(
        [OPUS],
        [
            ai(("search", {"query": "q3"}, "c1"), usage=(1_000, 40, 0, 0)),
            ai(text="Q3 grew.", usage=(1_100, 20, 0, 0)),
        ],
    )
    selectors, decisions = scripted_models(
        ["selector"],
        [
            selection("search", "fetch_data", "big_report", usage=(300, 8, 0, 0)),
            selection("search", usage=(310, 5, 0, 0)),
        ],
    )
    middleware = LLMToolSelectorMiddleware(model=selectors["selector"], max_tools=2)
    return World(models[OPUS], log, [middleware], decisions=decisions)


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_a_tool_selector_records_the_tools_the_model_was_really_bound_with(
    mode: str,
    span_exporter: InMemorySpanExporter,
    tracer_provider: Any,
    meter_provider: Any,
    metric_reader: InMemoryMetricReader,
) -> None:
    layer = make_layer(tracer_provider, meter_provider)
    ran = assert_same_with_and_without(selector_world, layer, mode=mode)
    spans = span_exporter.get_finished_spans()
    world = ran.world

    bound = [call.tools for call in world.log]
    assert [["fetch_data", "search"], ["search"]] == bound  # ground truth
    stages = decided(spans, "tool_selection")
    assert [s.name for s in stages] == [c.SPAN_STAGE] * 2
    for stage, tools in zip(stages, bound, strict=True):
        values = middleware_attrs(stage, "LLMToolSelectorMiddleware", "tool_selection")
        assert ALL_TOOLS == values[c.ATTR_SELECTION_OFFERED]
        assert tools == values[c.ATTR_SELECTION_SELECTED]
        assert [t for t in ALL_TOOLS if t not in tools] == values[c.ATTR_STAGE_DROPPED]
        assert "LLMToolSelectorMiddleware" == values[c.ATTR_STAGE_NAME]
        assert "select" == values[c.ATTR_STAGE_OUTCOME]
        assert "selector" == values[c.ATTR_MIDDLEWARE_DECISION_MODEL]
        assert c.SPAN_ITERATION == parent_of(stage, spans).name
    assert [f"selected {len(t)} of 5 tools (max_tools=2)" for t in bound] == [
        attrs(s)[c.ATTR_MIDDLEWARE_REASON] for s in stages
    ]

    # the selector's own calls: chat spans with their usage, in the iteration
    decision_chats = named(spans, "chat selector")
    assert [(300, 8), (310, 5)] == [
        (attrs(s)[c.ATTR_GEN_AI_USAGE_INPUT_TOKENS], attrs(s)[c.ATTR_GEN_AI_USAGE_OUTPUT_TOKENS])
        for s in decision_chats
    ]
    assert [c.SPAN_ITERATION] * 2 == [parent_of(s, spans).name for s in decision_chats]
    assert 2 == len(world.decisions)
    # the main model's calls: one chat span each, and only they reach the ledger
    assert [(1_000, 40), (1_100, 20)] == [
        (attrs(s)[c.ATTR_GEN_AI_USAGE_INPUT_TOKENS], attrs(s)[c.ATTR_GEN_AI_USAGE_OUTPUT_TOKENS])
        for s in named(spans, f"chat {OPUS}")
    ]
    ledgered = points(metric_reader, c.METRIC_MODEL_INPUT_TOKENS.name)
    assert {OPUS} == {dict(k)[c.ATTR_GEN_AI_REQUEST_MODEL] for k in ledgered}
    assert 2_100 == sum(ledgered.values())
    assert {
        (
            (c.ATTR_MIDDLEWARE_DECISION, "tool_selection"),
            (c.ATTR_MIDDLEWARE_NAME, "LLMToolSelectorMiddleware"),
        ): 2
    } == points(metric_reader, c.METRIC_MIDDLEWARE_DECISIONS.name)


def test_what_a_priced_selector_costs_is_on_its_decision_and_counted(
    span_exporter: InMemorySpanExporter,
    tracer_provider: Any,
    meter_provider: Any,
    metric_reader: InMemoryMetricReader,
) -> None:
    """A selector running on claude-haiku-4-5 ($1/M input, $5/M output):
    300 + 8 tokens = $0.00034, then 310 + 5 tokens = $0.000335; $0.000675
    in all, counted under the middleware and its decision model."""

    def world() -> World:
        built = selector_world()
        selector = built.middlewares[0]
        selector.model.model_name = HAIKU
        return built

    layer = make_layer(tracer_provider, meter_provider)
    assert_same_with_and_without(world, layer)
    stages = decided(span_exporter.get_finished_spans(), "tool_selection")
    assert [0.00034, 0.000335] == [attrs(s)[c.ATTR_MIDDLEWARE_COST_USD] for s in stages]
    assert [HAIKU, HAIKU] == [attrs(s)[c.ATTR_MIDDLEWARE_DECISION_MODEL] for s in stages]
    spent = points(metric_reader, c.METRIC_MIDDLEWARE_COST.name)
    assert {
        (
            (c.ATTR_GEN_AI_REQUEST_MODEL, HAIKU),
            (c.ATTR_MIDDLEWARE_NAME, "LLMToolSelectorMiddleware"),
        ): pytest.approx(0.000675)
    } == spent


def provider_search_world() -> World:
    log: list[ModelCall] = []
    main = ProviderChatModel(
        messages=iter([ai(text="done", usage=(500, 5, 0, 0))]), model_name=OPUS, log=log
    )
    middleware = ProviderToolSearchMiddleware(searchable_tools=["web_search", "big_report"])
    return World(main, log, [middleware])


def test_a_provider_tool_search_records_the_tools_it_deferred(
    span_exporter: InMemorySpanExporter, tracer_provider: Any, meter_provider: Any
) -> None:
    layer = make_layer(tracer_provider, meter_provider)
    ran = assert_same_with_and_without(provider_search_world, layer)
    spans = span_exporter.get_finished_spans()
    call = ran.world.log[0]

    assert [*ALL_TOOLS, "tool_search_tool_bm25"] == call.tools  # ground truth
    deferred = call.settings["deferred"]
    assert ["web_search", "big_report"] == deferred
    (stage,) = decided(spans, "tool_search")
    values = middleware_attrs(stage, "ProviderToolSearchMiddleware", "tool_search")
    assert ALL_TOOLS == values[c.ATTR_SELECTION_OFFERED]
    assert [t for t in call.tools if t not in deferred] == values[c.ATTR_SELECTION_SELECTED]
    assert deferred == values[c.ATTR_STAGE_DROPPED]
    assert values[c.ATTR_MIDDLEWARE_REASON].startswith("deferred 2 of 5 tools behind")
    assert c.ATTR_MIDDLEWARE_DECISION_MODEL not in values  # the search runs at the provider


def router_world(classifier_model: str = "router-clf") -> World:
    models, log = scripted_models([OPUS, HAIKU], [ai(text="It is noon.", usage=(200, 6, 0, 0))])
    classified: list[Classified] = []
    classifier = ScriptedDecisionModel(
        model=classifier_model,
        answers=deque([choice("fast", 0.92, model=classifier_model, usage=(60, 2))]),
        log=classified,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a beta middleware
        router = ModelRouterMiddleware(
            choices={
                "fast": ModelChoice(model=models[HAIKU], criteria="simple tasks"),
                "deep": ModelChoice(model=models[OPUS], criteria="hard tasks"),
            },
            instructions="Choose the cheapest model suited to the task.",
            classifier=classifier,
        )
    return World(models[OPUS], log, [router], classified=classified)


def test_a_router_records_the_model_really_called_and_its_classifier(
    span_exporter: InMemorySpanExporter, tracer_provider: Any, meter_provider: Any
) -> None:
    layer = make_layer(tracer_provider, meter_provider)
    ran = assert_same_with_and_without(router_world, layer)
    spans = span_exporter.get_finished_spans()

    assert [HAIKU] == [call.model for call in ran.world.log]  # ground truth
    assert [["model_route"]] == [x.questions for x in ran.world.classified]
    (route,) = decided(spans, "model_route")
    values = middleware_attrs(route, "ModelRouterMiddleware", "model_route")
    assert c.SPAN_SEAM_PRE_MODEL == route.name
    assert {
        c.ATTR_SEAM_WINNER_SOURCE: "router",
        c.ATTR_SEAM_CHOSEN_MODEL: HAIKU,
        c.ATTR_GEN_AI_REQUEST_MODEL: HAIKU,
        c.ATTR_MIDDLEWARE_DECISION_MODEL: "router-clf",
        c.ATTR_MIDDLEWARE_REASON: "route 'fast' (confidence 0.92) -> claude-haiku-4-5",
    } == {
        k: values[k]
        for k in (
            c.ATTR_SEAM_WINNER_SOURCE,
            c.ATTR_SEAM_CHOSEN_MODEL,
            c.ATTR_GEN_AI_REQUEST_MODEL,
            c.ATTR_MIDDLEWARE_DECISION_MODEL,
            c.ATTR_MIDDLEWARE_REASON,
        )
    }
    (classifier_chat,) = named(spans, "chat router-clf")
    assert f"invoke_agent {AGENT}" == parent_of(classifier_chat, spans).name  # before_agent
    assert (60, 2) == (
        attrs(classifier_chat)[c.ATTR_GEN_AI_USAGE_INPUT_TOKENS],
        attrs(classifier_chat)[c.ATTR_GEN_AI_USAGE_OUTPUT_TOKENS],
    )
    (main_chat,) = named(spans, f"chat {HAIKU}")
    assert c.SPAN_ITERATION == parent_of(main_chat, spans).name
    assert parent_of(route, spans) is parent_of(main_chat, spans)


def test_a_priced_router_classifier_is_charged_to_its_route(
    span_exporter: InMemorySpanExporter,
    tracer_provider: Any,
    meter_provider: Any,
    metric_reader: InMemoryMetricReader,
) -> None:
    """The classifier runs once per run, before the first iteration: its
    60 + 2 tokens on claude-haiku-4-5 ($1/M, $5/M) = $0.00007, on the route."""
    layer = make_layer(tracer_provider, meter_provider)
    assert_same_with_and_without(lambda: router_world(HAIKU), layer)
    (route,) = decided(span_exporter.get_finished_spans(), "model_route")
    assert 0.00007 == attrs(route)[c.ATTR_MIDDLEWARE_COST_USD]
    assert {
        ((c.ATTR_GEN_AI_REQUEST_MODEL, HAIKU), (c.ATTR_MIDDLEWARE_NAME, "ModelRouterMiddleware")): (
            pytest.approx(0.00007)
        )
    } == points(metric_reader, c.METRIC_MIDDLEWARE_COST.name)


class ProviderDown(ConnectionError):
    """The primary model's provider is unavailable."""


def fallback_world() -> World:
    backups, log = scripted_models(
        [HAIKU],
        [
            ai(("search", {"query": "q3"}, "c1"), usage=(900, 30, 0, 0)),
            ai(text="Q3 grew.", usage=(950, 12, 0, 0)),
        ],
    )
    primary = ScriptedChatModel(messages=iter([]), model_name=OPUS, log=log, error=ProviderDown())
    return World(primary, log, [ModelFallbackMiddleware(backups[HAIKU])])


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_a_fallback_records_the_failed_model_and_the_one_that_answered(
    mode: str,
    span_exporter: InMemorySpanExporter,
    tracer_provider: Any,
    meter_provider: Any,
    metric_reader: InMemoryMetricReader,
) -> None:
    layer = make_layer(tracer_provider, meter_provider)
    ran = assert_same_with_and_without(fallback_world, layer, mode=mode)
    spans = span_exporter.get_finished_spans()

    assert [OPUS, HAIKU, OPUS, HAIKU] == [call.model for call in ran.world.log]  # ground truth
    fallbacks = decided(spans, "model_fallback")
    assert 2 == len(fallbacks)  # one per model call: the next call tries the primary again
    for span in fallbacks:
        values = middleware_attrs(span, "ModelFallbackMiddleware", "model_fallback")
        assert c.SPAN_SEAM_PRE_MODEL == span.name
        assert {
            c.ATTR_SEAM_WINNER_SOURCE: "fallback",
            c.ATTR_SEAM_CHOSEN_MODEL: HAIKU,
            c.ATTR_MIDDLEWARE_FAILED_MODELS: [OPUS],
            c.ATTR_MIDDLEWARE_ERROR_TYPES: ["ProviderDown"],
            c.ATTR_MIDDLEWARE_REASON: f"{OPUS} failed (ProviderDown); {HAIKU} answered",
        } == {
            k: values[k]
            for k in (
                c.ATTR_SEAM_WINNER_SOURCE,
                c.ATTR_SEAM_CHOSEN_MODEL,
                c.ATTR_MIDDLEWARE_FAILED_MODELS,
                c.ATTR_MIDDLEWARE_ERROR_TYPES,
                c.ATTR_MIDDLEWARE_REASON,
            )
        }
    failed = named(spans, f"chat {OPUS}")
    answered = named(spans, f"chat {HAIKU}")
    assert [("ProviderDown", StatusCode.ERROR)] * 2 == [
        (attrs(s)[c.ATTR_ERROR_TYPE], s.status.status_code) for s in failed
    ]
    assert [(900, 30), (950, 12)] == [
        (attrs(s)[c.ATTR_GEN_AI_USAGE_INPUT_TOKENS], attrs(s)[c.ATTR_GEN_AI_USAGE_OUTPUT_TOKENS])
        for s in answered
    ]
    assert all(c.ATTR_GEN_AI_USAGE_INPUT_TOKENS not in attrs(s) for s in failed)
    for fail, answer in zip(failed, answered, strict=True):
        assert parent_of(fail, spans) is parent_of(answer, spans)
    ledgered = points(metric_reader, c.METRIC_MODEL_INPUT_TOKENS.name)
    assert {HAIKU} == {dict(k)[c.ATTR_GEN_AI_REQUEST_MODEL] for k in ledgered}


BACKUP = "backup-model-2"  # the name only the backup's answers give


def unnamed_fallback_world() -> World:
    """A fallback between two models that give themselves no name; the
    backup's answers name the model that answered (as a provider's do)."""
    script = deque(
        [
            ai(("search", {"query": "q3"}, "c1"), usage=(900, 30, 0, 0), model=BACKUP),
            ai(text="Q3 grew.", usage=(950, 12, 0, 0), model=BACKUP),
        ]
    )
    log: list[ModelCall] = []
    primary = UnnamedChatModel(messages=iter([]), label="primary", log=log, error=ProviderDown())
    backup = UnnamedChatModel(messages=iter(script), label="backup", log=log)
    return World(primary, log, [ModelFallbackMiddleware(backup)])


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_a_fallback_between_two_unnamed_models_is_recorded_and_each_chat_span_names_its_model(
    mode: str, span_exporter: InMemorySpanExporter, tracer_provider: Any, meter_provider: Any
) -> None:
    """The two model objects are told apart by identity; the one that answered
    is named by its response, the failed one by the layer's default (nothing
    says more of it)."""
    layer = make_layer(tracer_provider, meter_provider)
    ran = assert_same_with_and_without(unnamed_fallback_world, layer, mode=mode)
    spans = span_exporter.get_finished_spans()

    assert ["primary", "backup"] * 2 == [call.model for call in ran.world.log]  # ground truth
    fallbacks = decided(spans, "model_fallback")
    assert 2 == len(fallbacks)
    for span in fallbacks:
        values = middleware_attrs(span, "ModelFallbackMiddleware", "model_fallback")
        assert {
            c.ATTR_SEAM_CHOSEN_MODEL: BACKUP,
            c.ATTR_MIDDLEWARE_FAILED_MODELS: [OPUS],
            c.ATTR_MIDDLEWARE_ERROR_TYPES: ["ProviderDown"],
        } == {
            k: values[k]
            for k in (
                c.ATTR_SEAM_CHOSEN_MODEL,
                c.ATTR_MIDDLEWARE_FAILED_MODELS,
                c.ATTR_MIDDLEWARE_ERROR_TYPES,
            )
        }
    chats = [s for s in named(spans, f"chat {OPUS}") + named(spans, f"chat {BACKUP}")]
    assert [(f"chat {OPUS}", "ProviderDown"), (f"chat {BACKUP}", None)] * 2 == [
        (s.name, attrs(s).get(c.ATTR_ERROR_TYPE))
        for s in sorted(chats, key=lambda s: s.start_time or 0)
    ]
    assert [BACKUP, BACKUP] == [
        attrs(s)[c.ATTR_GEN_AI_RESPONSE_MODEL] for s in named(spans, f"chat {BACKUP}")
    ]


def limit_world() -> World:
    models, log = scripted_models(
        [OPUS],
        [
            ai(("search", {"query": "q3"}, "c1"), ("search", {"query": "q4"}, "c2")),
            ai(text="Only q3 came back."),
        ],
    )
    return World(models[OPUS], log, [ToolCallLimitMiddleware(run_limit=1)])


def test_a_tool_call_limit_records_the_calls_that_never_ran(
    span_exporter: InMemorySpanExporter, tracer_provider: Any, meter_provider: Any
) -> None:
    layer = make_layer(tracer_provider, meter_provider)
    ran = assert_same_with_and_without(limit_world, layer)
    spans = span_exporter.get_finished_spans()

    assert [("search", {"query": "q3"})] == ran.world.box.executed  # ground truth
    answer = ran.world.log[1].tool_message("c2")
    assert "error" == answer.status
    blocks = decided(spans, "tool_call_blocked")
    assert [c.SPAN_DISPATCH] == [s.name for s in blocks]
    values = middleware_attrs(blocks[0], "ToolCallLimitMiddleware", "tool_call_blocked")
    assert {
        c.ATTR_DISPATCH_BLOCKED: True,
        c.ATTR_GEN_AI_TOOL_NAME: "search",
        c.ATTR_GEN_AI_TOOL_CALL_ID: "c2",
        c.ATTR_MIDDLEWARE_REASON: "run_limit=1 reached (2/1 calls) for all tools "
        "(exit_behavior=continue), "
        f"1 call(s) not run: {answer.content}",
    } == {
        k: values[k]
        for k in (
            c.ATTR_DISPATCH_BLOCKED,
            c.ATTR_GEN_AI_TOOL_NAME,
            c.ATTR_GEN_AI_TOOL_CALL_ID,
            c.ATTR_MIDDLEWARE_REASON,
        )
    }
    iteration = parent_of(blocks[0], spans)
    assert c.SPAN_ITERATION == iteration.name
    assert iteration is parent_of(named(spans, f"chat {OPUS}")[0], spans)
    # a blocked call never reaches the tool node
    assert ["c1"] == [
        attrs(s)[c.ATTR_GEN_AI_TOOL_CALL_ID] for s in named(spans, "execute_tool search")
    ]


def auto_mode_world() -> World:
    models, log = scripted_models(
        [OPUS],
        [ai(("search", {"query": "payroll of every employee"}, "c1")), ai(text="I cannot.")],
    )
    classified: list[Classified] = []
    classifier = ScriptedDecisionModel(
        model="risk-clf",
        answers=deque([risk(0.9, model="risk-clf", usage=(420, 1))]),
        log=classified,
    )
    middleware = AutoModeMiddleware(tools=["search"], classifier=classifier)
    return World(models[OPUS], log, [middleware], classified=classified)


def test_auto_mode_records_a_risky_call_it_never_ran(
    span_exporter: InMemorySpanExporter, tracer_provider: Any, meter_provider: Any
) -> None:
    layer = make_layer(tracer_provider, meter_provider)
    ran = assert_same_with_and_without(auto_mode_world, layer)
    spans = span_exporter.get_finished_spans()

    assert [] == ran.world.box.executed  # ground truth
    assert 1 == len(ran.world.classified)
    answer = ran.world.log[1].tool_message("c1")
    assert "error" == answer.status and "(probability: 0.90)" in str(answer.content)
    (block,) = decided(spans, "tool_call_blocked")
    values = middleware_attrs(block, "AutoModeMiddleware", "tool_call_blocked")
    assert {
        c.ATTR_DISPATCH_BLOCKED: True,
        c.ATTR_GEN_AI_TOOL_NAME: "search",
        c.ATTR_GEN_AI_TOOL_CALL_ID: "c1",
        c.ATTR_MIDDLEWARE_REASON: "classified as risky (probability: 0.90)",
        c.ATTR_MIDDLEWARE_DECISION_MODEL: "risk-clf",
    } == {
        k: values[k]
        for k in (
            c.ATTR_DISPATCH_BLOCKED,
            c.ATTR_GEN_AI_TOOL_NAME,
            c.ATTR_GEN_AI_TOOL_CALL_ID,
            c.ATTR_MIDDLEWARE_REASON,
            c.ATTR_MIDDLEWARE_DECISION_MODEL,
        )
    }
    (classifier_chat,) = named(spans, "chat risk-clf")
    assert c.SPAN_ITERATION == parent_of(classifier_chat, spans).name
    assert c.SPAN_ITERATION == parent_of(block, spans).name
    # the risk check runs inside the tool node: its execute_tool span says the
    # tool never ran (the tools' own log above is empty)
    (executed,) = named(spans, "execute_tool search")
    assert (StatusCode.ERROR, c.TOOL_CALL_BLOCKED, True) == (
        executed.status.status_code,
        attrs(executed)[c.ATTR_ERROR_TYPE],
        attrs(executed)[c.ATTR_DISPATCH_BLOCKED],
    )
    # no content: the arguments the model emitted are on no span
    assert not any("payroll" in str(v) for s in spans for v in (s.attributes or {}).values())


def context_editing_world() -> World:
    models, log = scripted_models(
        [OPUS],
        [
            ai(("big_report", {"topic": "q3"}, "c1"), usage=(1_000, 30, 0, 0)),
            ai(("search", {"query": "q3"}, "c2"), usage=(21_000, 20, 0, 0)),
            ai(("fetch_data", {"source": "sales"}, "c3"), usage=(1_100, 20, 0, 0)),
            ai(text="Q3 grew.", usage=(1_200, 10, 0, 0)),
        ],
    )
    edit = ClearToolUsesEdit(trigger=1_000, keep=1)
    return World(models[OPUS], log, [ContextEditingMiddleware(edits=[edit])])


def test_context_editing_records_each_cleared_result_once(
    span_exporter: InMemorySpanExporter, tracer_provider: Any, meter_provider: Any
) -> None:
    layer = make_layer(tracer_provider, meter_provider)
    ran = assert_same_with_and_without(context_editing_world, layer)
    spans = span_exporter.get_finished_spans()
    log = ran.world.log

    # ground truth: what each call really received for c1 and c2
    assert [None, "x", "[cleared]", "[cleared]"] == [_seen(call, "c1") for call in log]
    assert [None, None, "3", "[cleared]"] == [_seen(call, "c2") for call in log]
    compactions = decided(spans, "compaction")
    assert [c.SPAN_COMPACTION] * 2 == [s.name for s in compactions]
    first, second = (
        middleware_attrs(s, "ContextEditingMiddleware", "compaction") for s in compactions
    )
    assert {
        c.ATTR_OFFLOAD_ID: "context_editing:c1",
        c.ATTR_OFFLOAD_MECHANISM: "context_editing",
        c.ATTR_COMPACTION_REMOVED_TOKENS: 20_000.0,
        c.ATTR_COMPACTION_KEPT_TOKENS: 2.25,  # "[cleared]": 9 chars / 4, never rounded
        c.ATTR_COMPACTION_TOOL_CALL_IDS: ["c1"],
        c.ATTR_COMPACTION_MESSAGES_REMOVED: 0,
        c.ATTR_COMPACTION_COST_USD: 0.0,
        c.ATTR_MIDDLEWARE_REASON: "ClearToolUsesEdit(trigger=1000, keep=1) cleared the result "
        "of big_report (20000 tokens) from the prompt",
    } == {
        k: first[k]
        for k in (
            c.ATTR_OFFLOAD_ID,
            c.ATTR_OFFLOAD_MECHANISM,
            c.ATTR_COMPACTION_REMOVED_TOKENS,
            c.ATTR_COMPACTION_KEPT_TOKENS,
            c.ATTR_COMPACTION_TOOL_CALL_IDS,
            c.ATTR_COMPACTION_MESSAGES_REMOVED,
            c.ATTR_COMPACTION_COST_USD,
            c.ATTR_MIDDLEWARE_REASON,
        )
    }
    assert ("context_editing:c2", ["c2"], len("3 archive hits for q3") / 4) == (
        second[c.ATTR_OFFLOAD_ID],
        second[c.ATTR_COMPACTION_TOOL_CALL_IDS],
        second[c.ATTR_COMPACTION_REMOVED_TOKENS],
    )
    # each in the iteration of the first call that received its placeholder
    iterations = [parent_of(s, spans) for s in named(spans, f"chat {OPUS}")]
    assert [iterations[2], iterations[3]] == [parent_of(s, spans) for s in compactions]
    assert 0.0 < first[c.ATTR_OFFLOAD_NET_SAVING_USD]  # the gate's formula on its size


def _seen(call: ModelCall, call_id: str) -> str | None:
    """What a model call received as the result of ``call_id`` (its first character,
    or the placeholder), None when it had not run yet."""
    for message in call.messages:
        if isinstance(message, ToolMessage) and message.tool_call_id == call_id:
            text = str(message.content)
            return text if text.startswith("[") else text[:1]
    return None


def summarization_world() -> World:
    models, log = scripted_models(
        [OPUS],
        [
            ai(("search", {"query": "q3"}, "c1"), usage=(800, 20, 0, 0)),
            ai(("search", {"query": "q4"}, "c2"), usage=(900, 20, 0, 0)),
            ai(text="Both quarters grew.", usage=(700, 10, 0, 0)),
        ],
    )
    summarizers, decisions = scripted_models(
        [HAIKU], [ai(text="The user asked about q3; it had 3 hits.", usage=(2_000, 60, 0, 0))]
    )
    middleware = SummarizationMiddleware(
        model=summarizers[HAIKU], trigger=("messages", 4), keep=("messages", 2)
    )
    return World(models[OPUS], log, [middleware], decisions=decisions)


def test_a_summary_is_a_compaction_of_the_next_model_call_with_its_own_cost(
    span_exporter: InMemorySpanExporter, tracer_provider: Any, meter_provider: Any
) -> None:
    layer = make_layer(tracer_provider, meter_provider)
    ran = assert_same_with_and_without(summarization_world, layer)
    spans = span_exporter.get_finished_spans()
    log = ran.world.log

    # ground truth: the third call received the summary and the two messages kept
    before, after = log[1].messages, log[2].messages
    summary = after[0]
    assert "summarization" == summary.additional_kwargs.get("lc_source")
    assert 3 == len(after)
    removed = [m for m in before if message_view(m) not in {message_view(k) for k in after}]
    assert 3 == len(removed)  # the question, the first call and its answer
    (compaction,) = decided(spans, "compaction")
    values = middleware_attrs(compaction, "SummarizationMiddleware", "compaction")
    cost = Decimal("0.0023")  # 2 000 in x $1/M + 60 out x $5/M (claude-haiku-4-5)
    assert {
        c.ATTR_OFFLOAD_MECHANISM: "summarization",
        c.ATTR_COMPACTION_MESSAGES_REMOVED: 3,
        c.ATTR_COMPACTION_REMOVED_TOKENS: sum(len(str(m.content)) for m in removed) / 4,
        c.ATTR_COMPACTION_KEPT_TOKENS: len(str(summary.content)) / 4,
        c.ATTR_COMPACTION_COST_USD: float(cost),
        c.ATTR_MIDDLEWARE_DECISION_MODEL: HAIKU,
        c.ATTR_GEN_AI_REQUEST_MODEL: OPUS,
        c.ATTR_OFFLOAD_RECALL_PROBABILITY: 0.0,
    } == {
        k: values[k]
        for k in (
            c.ATTR_OFFLOAD_MECHANISM,
            c.ATTR_COMPACTION_MESSAGES_REMOVED,
            c.ATTR_COMPACTION_REMOVED_TOKENS,
            c.ATTR_COMPACTION_KEPT_TOKENS,
            c.ATTR_COMPACTION_COST_USD,
            c.ATTR_MIDDLEWARE_DECISION_MODEL,
            c.ATTR_GEN_AI_REQUEST_MODEL,
            c.ATTR_OFFLOAD_RECALL_PROBABILITY,
        )
    }
    assert values[c.ATTR_OFFLOAD_ID].startswith("summarization:")
    assert (
        "trigger ('messages', 4) reached: 3 messages summarized into one "
        "(keep ('messages', 2): 2 kept)"
    ) == values[c.ATTR_MIDDLEWARE_REASON]
    # the decision is the next call's; the summary call ran in the previous iteration
    chats = named(spans, f"chat {OPUS}")
    assert parent_of(compaction, spans) is parent_of(chats[2], spans)
    (summary_chat,) = named(spans, f"chat {HAIKU}")
    assert parent_of(summary_chat, spans) is parent_of(chats[1], spans)
    assert (2_000, 60) == (
        attrs(summary_chat)[c.ATTR_GEN_AI_USAGE_INPUT_TOKENS],
        attrs(summary_chat)[c.ATTR_GEN_AI_USAGE_OUTPUT_TOKENS],
    )
    assert Decimal(0) < cost


# -- all eight: the same graph and behaviour; a watcher failure changes nothing ----------


DECIDES = {
    "selector": "tool_selection",
    "provider_search": "tool_search",
    "router": "model_route",
    "fallback": "model_fallback",
    "limit": "tool_call_blocked",
    "auto_mode": "tool_call_blocked",
    "context_editing": "compaction",
    "summarization": "compaction",
}
WORLDS: dict[str, Callable[[], World]] = {
    "selector": selector_world,
    "provider_search": provider_search_world,
    "router": router_world,
    "fallback": fallback_world,
    "limit": limit_world,
    "auto_mode": auto_mode_world,
    "context_editing": context_editing_world,
    "summarization": summarization_world,
}


class Audit(AgentMiddleware[Any, Any, Any]):
    """A user's own middleware with an ``after_model`` hook and no jumps."""

    def after_model(self, state: Any, runtime: Any) -> None:
        return None


def test_several_watched_together_build_the_same_graph_and_behave_the_same(
    span_exporter: InMemorySpanExporter, tracer_provider: Any, meter_provider: Any
) -> None:
    def together() -> World:
        worlds = [WORLDS[name]() for name in ("selector", "limit", "context_editing")]
        main = worlds[0]
        middlewares = [Audit(), *(m for w in worlds for m in w.middlewares)]
        return World(main.main, main.log, middlewares, decisions=main.decisions)

    layer = make_layer(tracer_provider, meter_provider)
    ran = assert_same_with_and_without(together, layer)
    _, edges = graph(ran.agent)
    # the limit's after_model runs before Audit's, and may jump to the end
    assert ("ToolCallLimitMiddleware.after_model", "Audit.after_model", True) in edges
    assert ("ToolCallLimitMiddleware.after_model", "__end__", True) in edges
    kinds = {attrs(s).get(c.ATTR_MIDDLEWARE_DECISION) for s in span_exporter.get_finished_spans()}
    assert {"tool_selection", None} == kinds


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
@pytest.mark.parametrize("name", sorted(WORLDS))
def test_each_watched_middleware_keeps_its_graph_and_behaviour(
    name: str,
    mode: str,
    span_exporter: InMemorySpanExporter,
    tracer_provider: Any,
    meter_provider: Any,
    captured_logs: list[dict[str, Any]],
) -> None:
    assert_same_with_and_without(
        WORLDS[name], make_layer(tracer_provider, meter_provider), mode=mode
    )
    kinds = {attrs(s).get(c.ATTR_MIDDLEWARE_DECISION) for s in span_exporter.get_finished_spans()}
    assert DECIDES[name] in kinds  # sync or async, the decision is recorded
    assert [] == [e for e in captured_logs if e["event"] == c.LOG_TELEMETRY_ERROR]


class _Unhashable(str):
    """A tool name that cannot be hashed: seamscope's own diff code raises on it."""

    def __hash__(self) -> int:
        raise TypeError("unhashable tool name")


class ProviderToolAdder(AgentMiddleware[Any, Any, Any]):
    """A user's middleware that binds a provider-side tool with an odd name."""

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        tool = {"type": "web_search_preview", "name": _Unhashable("web_preview")}
        return handler(request.override(tools=[*request.tools, tool]))


def adder_world() -> World:
    models, log = scripted_models([OPUS], [ai(text="done", usage=(100, 5, 0, 0))])
    return World(models[OPUS], log, [ProviderToolAdder()])


def test_a_failure_of_the_watcher_is_contained_and_changes_nothing(
    span_exporter: InMemorySpanExporter,
    tracer_provider: Any,
    meter_provider: Any,
    captured_logs: list[dict[str, Any]],
) -> None:
    layer = make_layer(tracer_provider, meter_provider)
    ran = assert_same_with_and_without(adder_world, layer)

    assert [[*ALL_TOOLS, "web_preview"]] == [call.tools for call in ran.world.log]
    contained = [
        (e["hook"], e["error_type"]) for e in captured_logs if e["event"] == c.LOG_TELEMETRY_ERROR
    ]
    assert [("langchain.watch.wrap_model_call", "TypeError")] == contained
    names = {s.name for s in span_exporter.get_finished_spans()}
    assert f"chat {OPUS}" in names  # the rest of the run is still recorded


def test_the_wrapped_middlewares_own_exception_passes_through_unchanged(
    span_exporter: InMemorySpanExporter, tracer_provider: Any, meter_provider: Any
) -> None:
    def all_down() -> World:
        log: list[ModelCall] = []
        primary = ScriptedChatModel(
            messages=iter([]), model_name=OPUS, log=log, error=ProviderDown()
        )
        backup = ScriptedChatModel(
            messages=iter([]), model_name=HAIKU, log=log, error=TimeoutError("slow")
        )
        return World(primary, log, [ModelFallbackMiddleware(backup)])

    layer = make_layer(tracer_provider, meter_provider)
    with pytest.raises(TimeoutError, match="slow"):
        run(all_down(), layer)
    spans = span_exporter.get_finished_spans()
    (fallback,) = decided(spans, "model_fallback")
    values = attrs(fallback)
    assert [OPUS, HAIKU] == values[c.ATTR_MIDDLEWARE_FAILED_MODELS]
    assert ["ProviderDown", "TimeoutError"] == values[c.ATTR_MIDDLEWARE_ERROR_TYPES]
    assert c.ATTR_SEAM_CHOSEN_MODEL not in values


@pytest.mark.parametrize("bad", ["ToolCallLimitMiddleware", None, 3])
def test_watching_takes_only_langchain_middlewares(bad: Any, tracer_provider: Any) -> None:
    layer = make_layer(tracer_provider, None)
    seamscope = SeamscopeMiddleware(layer)
    with pytest.raises(ValueError, match=r"SeamscopeMiddleware\.watching: argument 2"):
        seamscope.watching(ToolCallLimitMiddleware(run_limit=1), bad)
    with pytest.raises(ValueError, match=r"SeamscopeMiddleware\.watching: argument 1"):
        seamscope.watching(seamscope)
