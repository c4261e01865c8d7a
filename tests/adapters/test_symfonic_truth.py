"""Every span tells the truth: symfonic-core runs checked against ground truth kept elsewhere.

The ground truth comes from the scenario's own objects, never from
seamscope: the chat models log which model instance the provider handed
out, with which tools bound, what messages it received and what it
answered; the tools log their name, arguments, call id and whether they
raised; a spy under the offload gate logs symfonic's own decisions; the
adopter's handlers log what they did; symfonic's ``AgentResponse`` holds its
own messages. Every claim the telemetry makes (the finished spans, the
metric points, the structlog events) is compared against it, and every span
started must have ended, once, in its own run's trace.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import itertools
import logging
from collections.abc import Callable, Iterator, Sequence
from decimal import Decimal
from typing import Annotated, Any

import pytest
import symfonic.core.tool_offload_gate as tog
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import BaseTool, InjectedToolCallId, tool
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from symfonic.agent import SymfonicAgent
from symfonic.core.callbacks import BaseCallbackHandler
from symfonic.core.config import AgentConfig, ModelConfig
from symfonic.core.contracts import ToolCallPolicy

from seamscope.adapters.symfonic import instrument_symfonic, symfonic_pricing
from seamscope.telemetry import TelemetryConfig
from seamscope.telemetry import conventions as c

from ._symfonic_support import (
    BIG_OUTPUT,
    call,
    config,
    counters,
    emits,
    histogram_counts,
    memory_id,
    offload_settings,
    tool_message,
    with_usage,
)

pytestmark = [
    pytest.mark.filterwarnings("ignore:ContextBudget is deprecated:DeprecationWarning"),
]

OPUS = "claude-opus-4-6"  # the default model
HAIKU = "claude-haiku-4-5"
# the opt-in duration histogram, for the tests that count decisions by it
DURATIONS_ON = TelemetryConfig(decision_duration_metric=True)
GPT4O = "gpt-4o"
STUB_HEADER = "[symfonic.tool_memory v1]"


# -- ground truth ------------------------------------------------------------------


@dataclasses.dataclass
class ModelCall:
    """One call of a chat model, as the model saw it."""

    model: str  # the ModelConfig the provider was asked for
    instance: int  # which chat-model object the provider handed out
    bound: tuple[str, ...]  # the tools bound to it
    query: str  # the turn's user message
    messages: list[BaseMessage]
    reply: AIMessage  # a copy taken before symfonic rewrites its tool calls in place


@dataclasses.dataclass
class ToolRun:
    """One tool execution, as the tool saw it."""

    name: str
    args: dict[str, Any]
    call_id: str
    raised: str | None  # the exception class name, when it raised


@dataclasses.dataclass
class Truth:
    model_calls: list[ModelCall] = dataclasses.field(default_factory=list)
    tool_runs: list[ToolRun] = dataclasses.field(default_factory=list)
    adopter: list[tuple[str, str]] = dataclasses.field(default_factory=list)  # (call id, what)

    def calls_for(self, query: str) -> list[ModelCall]:
        return [m for m in self.model_calls if m.query == query]

    def tools_for(self, query: str) -> list[ToolRun]:
        ids = {tc["id"] for m in self.calls_for(query) for tc in m.reply.tool_calls}
        return [t for t in self.tool_runs if t.call_id in ids]


Brain = Callable[[str, int], AIMessage]
"""The model's answer from (the turn's user message, hop: AI messages since it)."""


def _turn(messages: Sequence[BaseMessage]) -> tuple[str, int]:
    last = max(i for i, m in enumerate(messages) if isinstance(m, HumanMessage))
    hop = sum(1 for m in messages[last:] if isinstance(m, AIMessage))
    return str(messages[last].content), hop


class TruthChat(BaseChatModel):
    """A chat model that answers from its brain and logs every call in the truth."""

    model: str = ""
    instance: int = 0
    bound: tuple[str, ...] = ()
    truth: Any = None
    brain: Any = None

    @property
    def _llm_type(self) -> str:
        return "truth"

    def bind_tools(self, tools: Any, **kwargs: Any) -> TruthChat:
        names = tuple(
            str(getattr(t, "name", None) or (t.get("name") if isinstance(t, dict) else t))
            for t in tools
        )
        return self.model_copy(update={"bound": names})

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any) -> Any:
        query, hop = _turn(messages)
        reply = self.brain(query, hop)
        self.truth.model_calls.append(
            ModelCall(
                self.model,
                self.instance,
                self.bound,
                query,
                list(messages),
                reply.model_copy(deep=True),
            )
        )
        return ChatResult(generations=[ChatGeneration(message=reply.model_copy(deep=True))])


class TruthProvider:
    """A symfonic ModelProvider: a new chat-model object per request, named after it."""

    def __init__(self, truth: Truth, brain: Brain) -> None:
        self.truth, self.brain = truth, brain
        self.instances = itertools.count(1)

    def get_chat_model(self, cfg: ModelConfig) -> TruthChat:
        return TruthChat(
            model=cfg.model_name, instance=next(self.instances), truth=self.truth, brain=self.brain
        )

    def supports_thinking(self) -> bool:
        return False

    def supports_streaming(self) -> bool:
        return True

    def supports_forced_tool_choice(self, cfg: ModelConfig) -> bool:
        return True


def truth_tools(truth: Truth, raising: dict[str, BaseException] | None = None) -> list[BaseTool]:
    """The scenario's tools; each logs what really ran. ``raising``: tool name -> its exception."""
    raising = raising or {}

    def ran(name: str, args: dict[str, Any], call_id: str) -> None:
        error = raising.get(name)
        truth.tool_runs.append(
            ToolRun(name, args, call_id, None if error is None else type(error).__name__)
        )
        if error is not None:
            raise error

    @tool
    def run_block(code: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        """Run a code block against the warehouse."""
        ran("run_block", {"code": code}, tool_call_id)
        return "run_block ok"

    @tool
    def fetch_data(table: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        """Fetch a stored table."""
        ran("fetch_data", {"table": table}, tool_call_id)
        return f"rows of {table}"

    @tool
    def search(q: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        """Search the notes."""
        ran("search", {"q": q}, tool_call_id)
        return "3 notes"

    @tool
    def dump_table(table: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        """Dump a whole table."""
        ran("dump_table", {"table": table}, tool_call_id)
        return BIG_OUTPUT

    return [run_block, fetch_data, search, dump_table]


class GateSpy:
    """Sits directly on symfonic's gate: every decision symfonic really took."""

    def __init__(self, gate: Any) -> None:
        self.gate = gate
        self.calls: list[tuple[Any, Any]] = []

    def __call__(self, inputs: Any) -> Any:
        decision = self.gate(inputs)
        self.calls.append((inputs, decision))
        return decision


class Tracker(SpanProcessor):
    """Every span started and every end call, by span id."""

    def __init__(self) -> None:
        self.started: dict[int, str] = {}
        self.ended: list[int] = []

    def on_start(self, span: Span, parent_context: Any = None) -> None:
        self.started[span.context.span_id] = span.name

    def on_end(self, span: ReadableSpan) -> None:
        self.ended.append(span.context.span_id)


@pytest.fixture
def tracker(tracer_provider: TracerProvider) -> Tracker:
    tracked = Tracker()
    tracer_provider.add_span_processor(tracked)
    return tracked


@pytest.fixture
def gate_spy() -> Iterator[GateSpy]:
    """symfonic's gate wrapped by a spy, for the test only; put back afterwards."""
    original = tog.evaluate_offload_gate
    spy = GateSpy(original)
    tog.evaluate_offload_gate = spy
    yield spy
    tog.evaluate_offload_gate = original


def build(
    brain: Brain,
    truth: Truth,
    *,
    raising: dict[str, BaseException] | None = None,
    **update: Any,
) -> tuple[SymfonicAgent, TruthProvider]:
    provider = TruthProvider(truth, brain)
    agent = SymfonicAgent(
        model_provider=provider, config=config(**update), tools=truth_tools(truth, raising)
    )
    return agent, provider


def script(turns: dict[str, list[AIMessage]]) -> Brain:
    """A brain answering each turn (by its user message) with its replies, hop by hop."""

    def brain(query: str, hop: int) -> AIMessage:
        return turns[query][hop]

    return brain


# -- the comparisons -----------------------------------------------------------------


def attr(span: ReadableSpan, key: str) -> Any:
    return (span.attributes or {}).get(key)


def by_start(spans: Sequence[ReadableSpan]) -> list[ReadableSpan]:
    return sorted(spans, key=lambda s: s.start_time or 0)


def ids(span: ReadableSpan) -> tuple[int, int]:
    return span.context.trace_id, span.context.span_id


def assert_well_formed(spans: Sequence[ReadableSpan], tracker: Tracker) -> None:
    """Every span started ended exactly once; parents exist; each run its own subtree."""
    assert sorted(tracker.started) == sorted(tracker.ended), "a span never ended or ended twice"
    assert len({s.context.span_id for s in spans}) == len(spans)
    known = {s.context.span_id: s for s in spans}
    for span in spans:
        assert span.end_time is not None and span.start_time is not None
        parent = span.parent
        if parent is None or parent.span_id not in known:
            continue
        assert known[parent.span_id].context.trace_id == span.context.trace_id


def runs_of(spans: Sequence[ReadableSpan]) -> list[tuple[ReadableSpan, list[ReadableSpan]]]:
    """Each ``invoke_agent`` span with all its descendants, in start order."""
    children: dict[int, list[ReadableSpan]] = {}
    for span in spans:
        if span.parent is not None:
            children.setdefault(span.parent.span_id, []).append(span)

    def below(span: ReadableSpan) -> list[ReadableSpan]:
        out: list[ReadableSpan] = []
        for child in children.get(span.context.span_id, []):
            out += [child, *below(child)]
        return out

    roots = by_start([s for s in spans if s.name.startswith("invoke_agent")])
    return [(root, below(root)) for root in roots]


def assert_run_tells_the_truth(
    root: ReadableSpan,
    spans: Sequence[ReadableSpan],
    calls: Sequence[ModelCall],
    tools: Sequence[ToolRun],
) -> None:
    """One run's spans against the model calls and tool runs of its turn."""
    assert all(s.context.trace_id == root.context.trace_id for s in spans)
    known = {s.context.span_id: s for s in [root, *spans]}

    def parent(span: ReadableSpan) -> ReadableSpan:
        assert span.parent is not None
        return known[span.parent.span_id]

    iterations = by_start([s for s in spans if s.name == c.SPAN_ITERATION])
    chats = by_start([s for s in spans if s.name.startswith("chat ")])
    # one iteration and one chat span per model call, naming the model really called
    assert [m.model for m in calls] == [attr(s, c.ATTR_GEN_AI_REQUEST_MODEL) for s in chats]
    assert [f"chat {m.model}" for m in calls] == [s.name for s in chats]
    assert iterations == [parent(s) for s in chats]
    assert list(range(len(calls))) == [attr(s, c.ATTR_ITERATION_INDEX) for s in iterations]
    pre = by_start([s for s in spans if s.name == c.SPAN_SEAM_PRE_MODEL])
    assert [m.model for m in calls] == [attr(s, c.ATTR_GEN_AI_REQUEST_MODEL) for s in pre]
    assert iterations == [parent(s) for s in pre]

    # the POST seam: one dispatch per call the model emitted, in its iteration
    emitted = [(i, tc) for i, m in enumerate(calls) for tc in m.reply.tool_calls]
    dispatches = [s for s in spans if s.name == c.SPAN_DISPATCH]
    ran = {t.call_id: t for t in tools}
    assert sorted(tc["id"] for _, tc in emitted) == sorted(
        attr(s, c.ATTR_GEN_AI_TOOL_CALL_ID) for s in dispatches
    )
    posts = [s for s in spans if s.name == c.SPAN_SEAM_POST_MODEL]
    assert sorted(i for i, m in enumerate(calls) if m.reply.tool_calls) == sorted(
        iterations.index(parent(s)) for s in posts
    )
    for i, tc in emitted:
        [d] = [s for s in dispatches if attr(s, c.ATTR_GEN_AI_TOOL_CALL_ID) == tc["id"]]
        assert iterations[i] == parent(parent(d))
        assert tc["name"] == attr(d, c.ATTR_DISPATCH_EMITTED_TOOL)
        if tc["id"] in ran:
            assert ran[tc["id"]].name == attr(d, c.ATTR_DISPATCH_FINAL_TOOL)
        target = attr(d, c.ATTR_DISPATCH_REDIRECT_TO)
        if target is not None and attr(d, c.ATTR_DISPATCH_ADOPTER_OVERRIDE) is False:
            kept = target in calls[i].bound
            assert ("kept" if kept else "dropped") == attr(d, c.ATTR_DISPATCH_PALETTE_GATE)

    # execute_tool: one per tool that ran, with its call id, failed iff it raised
    executed = [s for s in spans if s.name.startswith("execute_tool ")]
    assert sorted((t.name, t.call_id, t.raised) for t in tools) == sorted(
        (
            attr(s, c.ATTR_GEN_AI_TOOL_NAME),
            attr(s, c.ATTR_GEN_AI_TOOL_CALL_ID),
            attr(s, c.ATTR_ERROR_TYPE),
        )
        for s in executed
    )
    for span in executed:
        failed = attr(span, c.ATTR_ERROR_TYPE) is not None
        assert failed == (span.status.status_code is trace.StatusCode.ERROR)
        [i] = [i for i, tc in emitted if tc["id"] == attr(span, c.ATTR_GEN_AI_TOOL_CALL_ID)]
        assert iterations[i] == parent(span)


def decisions(truth: Truth, query: str) -> tuple[Any, ...]:
    """What symfonic decided in one turn: the models called, the tools run."""
    return (
        tuple((m.model, m.bound) for m in truth.calls_for(query)),
        tuple(sorted((t.name, repr(t.args), t.call_id, t.raised) for t in truth.tools_for(query))),
    )


def telemetry_errors(logs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in logs if e["event"] == c.LOG_TELEMETRY_ERROR]


# -- an adopter on_tool_call_dispatch that raises ----------------------------------------


class RaisingRewriter(BaseCallbackHandler):
    """The adopter's dispatch hook: raises on run_block, returns junk for search."""

    def __init__(self, truth: Truth) -> None:
        self.truth = truth

    async def on_tool_call_dispatch(self, event: Any, state: Any) -> Any:
        if event.tool_name == "run_block":
            self.truth.adopter.append((event.call_id, "raised PermissionError"))
            raise PermissionError("acl service down")
        if event.tool_name == "search":
            self.truth.adopter.append((event.call_id, "returned str"))
            return "search_archive"
        return None


def test_an_adopter_dispatch_hook_that_raises_is_a_contained_error_on_its_dispatch(
    tracer_provider: Any,
    meter_provider: Any,
    span_exporter: InMemorySpanExporter,
    tracker: Tracker,
    captured_logs: list[dict[str, Any]],
) -> None:
    truth = Truth()
    turn = "run the block and search"
    brain = script(
        {
            turn: [
                emits(
                    call("run_block", {"code": "select 1"}, "c1"),
                    call("search", {"q": "notes"}, "c2"),
                    call("fetch_data", {"table": "t"}, "c3"),
                ),
                AIMessage(content="done"),
            ]
        }
    )
    agent, _ = build(brain, truth)
    inst = instrument_symfonic(
        agent, tracer_provider=tracer_provider, meter_provider=meter_provider
    )

    async def scenario() -> Any:
        async with agent:
            return await agent.run(turn, callbacks=[RaisingRewriter(truth)])

    response = asyncio.run(scenario())
    inst.uninstrument()
    spans = span_exporter.get_finished_spans()

    # What happened: symfonic skipped the broken hook and dispatched every call as emitted.
    assert "done" == response.final_response
    assert [("c1", "raised PermissionError"), ("c2", "returned str")] == truth.adopter
    assert [("c1", "run_block"), ("c2", "search"), ("c3", "fetch_data")] == sorted(
        (t.call_id, t.name) for t in truth.tool_runs
    )
    assert_well_formed(spans, tracker)
    [(root, run)] = runs_of(spans)
    assert_run_tells_the_truth(root, run, truth.calls_for(turn), truth.tools_for(turn))

    # What the telemetry says: each failed hook is a contained error on its own dispatch.
    dispatches = {attr(s, c.ATTR_GEN_AI_TOOL_CALL_ID): s for s in run if s.name == c.SPAN_DISPATCH}
    assert {
        "c1": [("callback", "PermissionError")],
        "c2": [("callback", "TypeError")],
        "c3": [],
    } == {
        call_id: [
            (e.attributes[c.ATTR_ADOPTER_SOURCE], e.attributes[c.ATTR_ERROR_TYPE])
            for e in span.events
            if e.name == c.EVENT_ADOPTER_ERROR
        ]
        for call_id, span in dispatches.items()
    }
    for span in dispatches.values():
        # the hook changed nothing: no adopter override, dispatched as emitted
        assert (False, "none", "kept") == (
            attr(span, c.ATTR_DISPATCH_ADOPTER_OVERRIDE),
            attr(span, c.ATTR_SEAM_WINNER_SOURCE),
            attr(span, c.ATTR_DISPATCH_PALETTE_GATE),
        )
        assert attr(span, c.ATTR_DISPATCH_EMITTED_TOOL) == attr(span, c.ATTR_DISPATCH_FINAL_TOOL)
    assert [("callback", "PermissionError"), ("callback", "TypeError")] == [
        (e["source"], e["error_type"]) for e in captured_logs if e["event"] == c.LOG_ADOPTER_ERROR
    ]
    assert [] == telemetry_errors(captured_logs)


# -- a tool that raises ------------------------------------------------------------------


def test_a_tool_that_raises_is_the_one_failed_execute_tool_span(
    tracer_provider: Any,
    meter_provider: Any,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
    tracker: Tracker,
    captured_logs: list[dict[str, Any]],
) -> None:
    truth = Truth()
    turn = "search and fetch"
    brain = script(
        {
            turn: [
                emits(call("search", {"q": "x"}, "c1"), call("fetch_data", {"table": "t"}, "c2")),
                emits(call("fetch_data", {"table": "u"}, "c3")),
                AIMessage(content="partial answer"),
            ]
        }
    )
    agent, _ = build(brain, truth, raising={"search": RuntimeError("index offline")})
    inst = instrument_symfonic(
        agent,
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        telemetry_config=DURATIONS_ON,
    )

    async def scenario() -> Any:
        async with agent:
            return await agent.run(turn)

    response = asyncio.run(scenario())
    inst.uninstrument()
    spans = span_exporter.get_finished_spans()

    # symfonic's own messages: the failed call came back as an error ToolMessage.
    statuses = {
        m.get("tool_call_id"): m.get("status") for m in response.messages if m["type"] == "tool"
    }
    assert {"c1": "error", "c2": "success", "c3": "success"} == statuses
    assert [("search", "RuntimeError"), ("fetch_data", None), ("fetch_data", None)] == [
        (t.name, t.raised) for t in sorted(truth.tool_runs, key=lambda t: t.call_id)
    ]
    assert_well_formed(spans, tracker)
    [(root, run)] = runs_of(spans)
    assert_run_tells_the_truth(root, run, truth.calls_for(turn), truth.tools_for(turn))
    # Nothing but the tool failed: the run, its iterations and chats are not errors.
    assert ["execute_tool search"] == [
        s.name for s in [root, *run] if s.status.status_code is trace.StatusCode.ERROR
    ]
    # One decision duration per seam that ran, from the model calls really made.
    assert {
        frozenset({c.ATTR_DECISION_KIND: "pre_model"}.items()): 3,
        frozenset({c.ATTR_DECISION_KIND: "post_model"}.items()): 2,
    } == histogram_counts(metric_reader, c.METRIC_DECISION_DURATION.name)
    assert [] == telemetry_errors(captured_logs)


# -- an exception that is not an Exception crossing agent.run ------------------------


@pytest.mark.parametrize("where", ["agent_start", "model", "tool"])
@pytest.mark.parametrize("error", [KeyboardInterrupt, SystemExit], ids=lambda e: e.__name__)
def test_keyboard_interrupt_or_system_exit_ends_every_span_with_its_type(
    where: str,
    error: type[BaseException],
    tracer_provider: Any,
    span_exporter: InMemorySpanExporter,
    tracker: Tracker,
) -> None:
    """The spans end, failed with the type of what crossed ``agent.run``; it propagates as is.

    Raised by an adopter's ``on_agent_start`` (in the run's own task), the
    exception itself crosses ``agent.run``. Raised by the model or a tool
    (symfonic's graph runs them in tasks and threads of its own), it leaves
    the event loop directly, and ``asyncio.run`` then cancels the run: what
    crosses ``agent.run`` is a ``CancelledError``, and the spans say so.
    """
    truth = Truth()
    turn = "search it"
    raised = error("stop")
    replies = [emits(call("search", {"q": "x"}, "c1")), AIMessage(content="never")]

    def brain(query: str, hop: int) -> AIMessage:
        if where == "model" and hop == 1:
            raise raised
        return replies[hop]

    class Stop(BaseCallbackHandler):
        async def on_agent_start(self, event: Any) -> None:
            raise raised

    agent, _ = build(brain, truth, raising={"search": raised} if where == "tool" else None)
    inst = instrument_symfonic(agent, tracer_provider=tracer_provider)
    crossed: list[BaseException] = []

    async def scenario() -> Any:
        async with agent:
            try:
                return await agent.run(turn, callbacks=[Stop()] if where == "agent_start" else None)
            except BaseException as exc:
                crossed.append(exc)
                raise

    with pytest.raises(error) as info:
        asyncio.run(scenario())
    assert info.value is raised  # propagated unchanged
    inst.uninstrument()
    spans = span_exporter.get_finished_spans()

    [exc] = crossed
    if where == "agent_start":
        assert exc is raised
        expected = error.__name__
    else:
        assert isinstance(exc, asyncio.CancelledError)
        expected = "asyncio.exceptions.CancelledError"
    assert_well_formed(spans, tracker)
    [(root, run)] = runs_of(spans)
    failed = [
        (s.name, attr(s, c.ATTR_ERROR_TYPE))
        for s in by_start([root, *run])
        if s.status.status_code is trace.StatusCode.ERROR
    ]
    # the run, and the iteration, model call or tool it was waiting on
    waiting = {
        "agent_start": [],
        "model": [(c.SPAN_ITERATION, expected), (f"chat {OPUS}", expected)],
        "tool": [(c.SPAN_ITERATION, expected), ("execute_tool search", expected)],
    }[where]
    assert [("invoke_agent", expected), *waiting] == failed
    if where == "model":
        # the model really was called twice: once answered, once interrupted
        assert [turn] == [m.query for m in truth.model_calls]
        assert [f"chat {OPUS}"] * 2 == [s.name for s in by_start(run) if s.name.startswith("chat")]


# -- two agents ----------------------------------------------------------------------------

BIG_HISTORY_QUERY = "summarise the dump"


def big_output(call_id: str) -> str:
    """A 100 000-character output, distinct per call (symfonic archives by content)."""
    return call_id + BIG_OUTPUT[len(call_id) :]


def dump_history(call_id: str) -> list[BaseMessage]:
    """An earlier turn whose big output symfonic offloads in the next turn."""
    return [
        HumanMessage(content="dump the sales table"),
        emits(call("dump_table", {"table": "sales"}, call_id)),
        tool_message(big_output(call_id), call_id, "dump_table"),
        AIMessage(content="Dumped."),
    ]


def test_two_agents_instrumented_at_once_keep_their_spans_and_ledgers_apart(
    gate_spy: GateSpy, captured_logs: list[dict[str, Any]]
) -> None:
    telemetry = {}
    for name in ("a", "b"):
        exporter, tracked, reader = InMemorySpanExporter(), Tracker(), InMemoryMetricReader()
        tp = TracerProvider()
        tp.add_span_processor(SimpleSpanProcessor(exporter))
        tp.add_span_processor(tracked)
        telemetry[name] = (tp, MeterProvider(metric_readers=[reader]), exporter, tracked, reader)

    truth_a, truth_b = Truth(), Truth()
    answer = {BIG_HISTORY_QUERY: [AIMessage(content="summary")], "again": [AIMessage(content="ok")]}
    agent_a, _ = build(script(answer), truth_a, **offload_settings())
    agent_b, _ = build(
        script(answer),
        truth_b,
        **offload_settings(),
        agent=AgentConfig(model=ModelConfig(model_name=HAIKU)),
    )
    inst_a = instrument_symfonic(
        agent_a, tracer_provider=telemetry["a"][0], meter_provider=telemetry["a"][1], agent_name="a"
    )
    inst_b = instrument_symfonic(
        agent_b, tracer_provider=telemetry["b"][0], meter_provider=telemetry["b"][1], agent_name="b"
    )

    async def one(agent: Any, inst: Any, conversation: str, call_id: str) -> None:
        with inst.conversation(conversation):
            await agent.run(BIG_HISTORY_QUERY, history=dump_history(call_id))

    async def scenario() -> None:
        async with agent_a, agent_b:
            await asyncio.gather(
                one(agent_a, inst_a, "conv-a", "dump-a"), one(agent_b, inst_b, "conv-b", "dump-b")
            )
            # b runs inside a's conversation block: it is not a's conversation
            with inst_a.conversation("conv-a2"):
                await agent_a.run("again", history=dump_history("dump-a2"))
                await agent_b.run("again", history=dump_history("dump-b2"))

    asyncio.run(scenario())
    inst_a.uninstrument()
    inst_b.uninstrument()

    # Ground truth: which agent's gate decisions were which (by the model priced).
    gated = {OPUS: 0, HAIKU: 0}
    for inputs, decision in gate_spy.calls:
        gated[inputs.model_name] += 1
        assert decision.fire
    assert {OPUS: 2, HAIKU: 2} == gated

    for name, truth, model, conversations in (
        ("a", truth_a, OPUS, ["conv-a", "conv-a2"]),
        ("b", truth_b, HAIKU, ["conv-b", None]),
    ):
        _, _, exporter, tracked, reader = telemetry[name]
        spans = exporter.get_finished_spans()
        assert_well_formed(spans, tracked)
        runs = runs_of(spans)
        assert [BIG_HISTORY_QUERY, "again"] == [m.query for m in truth.model_calls]
        for (root, run), query, conversation in zip(
            runs, [BIG_HISTORY_QUERY, "again"], conversations, strict=True
        ):
            assert_run_tells_the_truth(root, run, truth.calls_for(query), truth.tools_for(query))
            assert {conversation} == {attr(s, c.ATTR_GEN_AI_CONVERSATION_ID) for s in [root, *run]}
            assert {name} == {
                attr(s, c.ATTR_GEN_AI_AGENT_NAME)
                for s in [root, *run]
                if not s.name.startswith("execute_tool")
            }
        gates = [s for s in spans if s.name == c.SPAN_OFFLOAD_GATE]
        assert [model, model] == [attr(s, c.ATTR_GEN_AI_REQUEST_MODEL) for s in gates]
        # the ledger followed only this agent's conversations, each settled at its block's end
        settles = [s for s in spans if s.name == c.SPAN_OFFLOAD_SETTLE]
        assert [x for x in conversations if x] == [
            attr(s, c.ATTR_GEN_AI_CONVERSATION_ID) for s in settles
        ]
        assert 0 == len((inst_a if name == "a" else inst_b).ledger)
        points = counters(reader)
        settled = sum(
            v for (metric, _), v in points.items() if metric == c.METRIC_OFFLOAD_SETTLED.name
        )
        assert len(settles) == settled
    assert [] == telemetry_errors(captured_logs)


# -- instrument, uninstrument, instrument again, with a wrapper stacked on the gate ------------


class Stacker:
    """Someone else's wrapper of symfonic's gate, stacked after seamscope's."""

    def __init__(self, inner: Any, *, expose: bool) -> None:
        if expose:
            functools.update_wrapper(self, inner)
        self.inner = inner
        self.hits = 0

    def __call__(self, inputs: Any) -> Any:
        self.hits += 1
        return self.inner(inputs)


@pytest.mark.parametrize("expose", [True, False], ids=["wraps", "hides the chain"])
def test_a_wrapper_stacked_on_the_gate_never_doubles_a_gate_span(
    expose: bool,
    gate_spy: GateSpy,
    tracer_provider: Any,
    span_exporter: InMemorySpanExporter,
    tracker: Tracker,
    caplog: pytest.LogCaptureFixture,
    captured_logs: list[dict[str, Any]],
) -> None:
    truth = Truth()
    brain = script({BIG_HISTORY_QUERY: [AIMessage(content="summary")]})
    agent, _ = build(brain, truth, **offload_settings())

    async def turn(call_id: str) -> None:
        async with agent:
            await agent.run(BIG_HISTORY_QUERY, history=dump_history(call_id))

    def gate_spans() -> list[ReadableSpan]:
        return [s for s in span_exporter.get_finished_spans() if s.name == c.SPAN_OFFLOAD_GATE]

    inst = instrument_symfonic(agent, tracer_provider=tracer_provider)
    ours = tog.evaluate_offload_gate
    asyncio.run(turn("d1"))
    assert 1 == len(gate_spy.calls) == len(gate_spans())

    stacker = Stacker(tog.evaluate_offload_gate, expose=expose)
    tog.evaluate_offload_gate = stacker
    asyncio.run(turn("d2"))
    assert 2 == len(gate_spy.calls) == len(gate_spans())
    with caplog.at_level(logging.WARNING, logger="seamscope.adapters.symfonic"):
        inst.uninstrument()
    # The newer wrapper is someone else's: it stays, and still calls seamscope's,
    # which passes the call straight through while nothing is instrumented.
    assert stacker is tog.evaluate_offload_gate
    assert 1 == len([r for r in caplog.records if "evaluate_offload_gate" in r.getMessage()])
    asyncio.run(turn("d3"))
    assert 3 == len(gate_spy.calls) and 2 == len(gate_spans())

    inst = instrument_symfonic(agent, tracer_provider=tracer_provider)
    if expose:
        assert stacker is tog.evaluate_offload_gate  # seamscope's wrapper beneath it is reused
    asyncio.run(turn("d4"))
    asyncio.run(turn("d5"))
    # every gate call recorded once, whatever the stack
    assert 5 == len(gate_spy.calls) and 4 == len(gate_spans()) and 4 == stacker.hits
    inst.uninstrument()
    assert stacker is tog.evaluate_offload_gate  # exact: the stack as the adopter left it

    # The adopter takes its wrapper off again: seamscope's own is on top, and the next
    # instrumentation's uninstall puts symfonic's gate (here: the spy) back exactly.
    tog.evaluate_offload_gate = stacker.inner
    assert ours is tog.evaluate_offload_gate
    with instrument_symfonic(agent, tracer_provider=tracer_provider):
        asyncio.run(turn("d6"))
    assert 6 == len(gate_spy.calls) and 5 == len(gate_spans())
    assert gate_spy is tog.evaluate_offload_gate

    spans = span_exporter.get_finished_spans()
    assert_well_formed(spans, tracker)
    instrumented = runs_of(spans)
    assert 5 == len(instrumented)
    # which outputs were gated, and decided how, as the spy saw them (d3 ran uninstrumented)
    recorded = [
        d for (_, d), turn_id in zip(gate_spy.calls, "123456", strict=True) if turn_id != "3"
    ]
    gates = by_start(gate_spans())
    assert [(d.fire, d.net_saving_usd) for d in recorded] == [
        (attr(s, c.ATTR_OFFLOAD_FIRE), attr(s, c.ATTR_OFFLOAD_NET_SAVING_USD)) for s in gates
    ]
    assert ["d1", "d2", "d4", "d5", "d6"] == [attr(s, c.ATTR_GEN_AI_TOOL_CALL_ID) for s in gates]
    for (_root, run), gate in zip(instrumented, gates, strict=True):
        assert gate in run  # in its own run's trace, under its iteration
    assert [] == telemetry_errors(captured_logs)


# -- a multi-turn conversation: an offload, carried, then recalled ------------------------

DUMP_CALL, RECALL_CALL = "c_dump", "c_recall"
T1, T2, T3 = "dump the sales table", "how are sales?", "which brand leads?"


def recall_brain() -> Brain:
    """Three turns; each reply reports its usage (input tokens include cache reads/writes)."""
    recall = call(
        "recall_tool_result", {"mem_id": memory_id(DUMP_CALL), "format": "full"}, RECALL_CALL
    )
    return script(
        {
            T1: [
                with_usage(
                    emits(call("dump_table", {"table": "sales"}, DUMP_CALL)),
                    4_000,
                    40,
                    cache_write=4_000,
                ),
                with_usage(AIMessage(content="Dumped."), 26_000, 10, cache_read=3_000),
            ],
            T2: [with_usage(AIMessage(content="Sales are up."), 4_100, 20, cache_read=3_000)],
            T3: [
                with_usage(emits(recall), 4_200, 50, cache_read=4_000),
                with_usage(AIMessage(content="Brand A leads."), 16_800, 30),
            ],
        }
    )


def test_an_offload_carried_then_recalled_is_settled_as_it_really_went(
    gate_spy: GateSpy,
    tracer_provider: Any,
    meter_provider: Any,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
    tracker: Tracker,
    captured_logs: list[dict[str, Any]],
) -> None:
    """Realized economics, from what the model was really sent, at symfonic's opus prices.

    Prices (symfonic's MODEL_PRICING, USD per 1M tokens): input $5, output $25,
    cache read $0.50. The dump is 100 000 characters: 25 000 tokens; the
    stub symfonic really sent is priced on its own characters / 4 (seamscope's
    one token estimator, not the gate's assumed 80 tokens); the recall
    returned 50 000 characters: 12 500 tokens.

    * Carried: the calls whose prompt held the stub and not the recalled text
      are turn 2 and turn 3's first call: 2. Saving 2 x 25 000 x $5/M =
      $0.25; stub cost 2 x (stub characters / 4) x $5/M.
    * Recall: 12 500 x $5/M + the 50 output tokens of the call that asked
      for it x $25/M = $0.0625 + $0.00125 = $0.06375.
    * Cache disruption: before the offload the conversation read 3 000 of
      30 000 input tokens from the cache (10 %); the call after the recall read
      none of its 16 800, where 1 680 were expected: 1 680 x ($5 - $0.50)/M =
      $0.00756. (Turn 2 and turn 3's first call read above 10 %.)
    * Costs: stub cost + $0.06375 + $0.00756; predicted (symfonic's gate)
      $0.588625.
    """
    truth = Truth()
    agent, _ = build(recall_brain(), truth, **offload_settings())
    inst = instrument_symfonic(
        agent, tracer_provider=tracer_provider, meter_provider=meter_provider, agent_name="analyst"
    )

    async def scenario() -> list[Any]:
        async with agent:
            with inst.conversation("conv-r"):
                first = await agent.run(T1)
                turn_1 = [HumanMessage(content=T1), *_as_history(truth.calls_for(T1), truth)]
                second = await agent.run(T2, history=turn_1)
                turn_2 = [HumanMessage(content=T2), AIMessage(content=str(second.final_response))]
                third = await agent.run(T3, history=turn_1 + turn_2)
        return [first.final_response, second.final_response, third.final_response]

    finals = asyncio.run(scenario())
    inst.uninstrument()
    spans = span_exporter.get_finished_spans()
    observe_symfonic_tools(truth)

    # Ground truth, from what the model was sent and what ran.
    assert ["Dumped.", "Sales are up.", "Brand A leads."] == finals
    assert [("dump_table", DUMP_CALL, None), ("recall_tool_result", RECALL_CALL, None)] == [
        (t.name, t.call_id, t.raised) for t in truth.tool_runs
    ]

    def sent(m: ModelCall, call_id: str) -> str | None:
        found = [x for x in m.messages if isinstance(x, ToolMessage) and x.tool_call_id == call_id]
        return str(found[0].content) if found else None

    stubbed = [str(sent(m, DUMP_CALL) or "").startswith(STUB_HEADER) for m in truth.model_calls]
    recalled = [sent(m, RECALL_CALL) for m in truth.model_calls]
    assert [False, False, True, True, True] == stubbed
    carried = sum(1 for s, r in zip(stubbed, recalled, strict=True) if s and r is None)
    [recalled_text] = [r for r in recalled if r is not None]
    recalled_tokens = len(recalled_text) // 4
    assert (2, 12_500) == (carried, recalled_tokens)
    fired = [(i, d) for i, d in gate_spy.calls if d.fire]
    assert 3 == len(fired) == len(gate_spy.calls)  # turn 2 once, turn 3 twice
    inputs = fired[0][0]
    price = tog.MODEL_PRICING[OPUS]
    usd = Decimal("1e-6")
    savings = carried * Decimal(int(inputs.output_tokens)) * Decimal(str(price["input"])) * usd
    sent_stubs = zip(truth.model_calls, stubbed, strict=True)
    [stub_text] = {str(sent(m, DUMP_CALL)) for m, s in sent_stubs if s}
    stub_tokens = Decimal(len(stub_text)) / 4  # the stub really sent
    assert stub_tokens != Decimal(inputs.stub_tokens)  # not the gate's assumption
    stub_cost = carried * stub_tokens * Decimal(str(price["input"])) * usd
    recall_cost = (
        recalled_tokens * Decimal(str(price["input"])) + 50 * Decimal(str(price["output"]))
    ) * usd
    disruption = 1_680 * (Decimal(str(price["input"])) - Decimal(str(price["cache_read"]))) * usd
    assert (Decimal("0.25"), Decimal("0.06375"), Decimal("0.00756")) == (
        savings,
        recall_cost,
        disruption,
    )

    # The telemetry: every span well formed, each turn's spans as it happened.
    assert_well_formed(spans, tracker)
    runs = runs_of(spans)
    for (root, run), turn in zip(runs, (T1, T2, T3), strict=True):
        assert_run_tells_the_truth(root, run, truth.calls_for(turn), truth.tools_for(turn))
    gates = by_start([s for s in spans if s.name == c.SPAN_OFFLOAD_GATE])
    assert [(d.fire, d.net_saving_usd, DUMP_CALL) for _, d in gate_spy.calls] == [
        (
            attr(s, c.ATTR_OFFLOAD_FIRE),
            attr(s, c.ATTR_OFFLOAD_NET_SAVING_USD),
            attr(s, c.ATTR_GEN_AI_TOOL_CALL_ID),
        )
        for s in gates
    ]
    [offload_id] = {attr(s, c.ATTR_OFFLOAD_ID) for s in gates}
    [settle] = [s for s in spans if s.name == c.SPAN_OFFLOAD_SETTLE]
    assert {
        c.ATTR_OFFLOAD_ID: offload_id,
        c.ATTR_GEN_AI_CONVERSATION_ID: "conv-r",
        c.ATTR_OFFLOAD_TURNS_CARRIED: carried,
        c.ATTR_OFFLOAD_RECALLS: 1,
        c.ATTR_OFFLOAD_OUTCOME: "gain",
        c.ATTR_OFFLOAD_SETTLE_TRIGGER: "conversation_end",
    } == {
        k: attr(settle, k)
        for k in (
            c.ATTR_OFFLOAD_ID,
            c.ATTR_GEN_AI_CONVERSATION_ID,
            c.ATTR_OFFLOAD_TURNS_CARRIED,
            c.ATTR_OFFLOAD_RECALLS,
            c.ATTR_OFFLOAD_OUTCOME,
            c.ATTR_OFFLOAD_SETTLE_TRIGGER,
        )
    }
    assert [gates[0].context] == [link.context for link in settle.links]
    assert pytest.approx(float(savings)) == attr(settle, c.ATTR_OFFLOAD_REALIZED_SAVINGS_USD)
    costs = stub_cost + recall_cost + disruption
    assert pytest.approx(float(costs)) == attr(settle, c.ATTR_OFFLOAD_REALIZED_COSTS_USD)
    assert pytest.approx(float(savings - costs)) == attr(
        settle, c.ATTR_OFFLOAD_REALIZED_NET_SAVING_USD
    )

    model = frozenset({c.ATTR_GEN_AI_REQUEST_MODEL: OPUS}.items())
    gated = frozenset(
        {c.ATTR_GEN_AI_REQUEST_MODEL: OPUS, c.ATTR_OFFLOAD_MECHANISM: "seamscope_gate"}.items()
    )

    def cost(kind: str) -> frozenset[Any]:
        return frozenset(
            {
                c.ATTR_GEN_AI_REQUEST_MODEL: OPUS,
                c.ATTR_OFFLOAD_COST_KIND: kind,
                c.ATTR_OFFLOAD_MECHANISM: "seamscope_gate",
            }.items()
        )

    points = counters(metric_reader)
    expected = {
        (c.METRIC_OFFLOAD_PREDICTED_NET_SAVING.name, model): pytest.approx(
            fired[0][1].net_saving_usd
        ),
        (c.METRIC_OFFLOAD_REALIZED_SAVINGS.name, gated): pytest.approx(float(savings)),
        (c.METRIC_OFFLOAD_REALIZED_COSTS.name, cost("stub_carry")): pytest.approx(float(stub_cost)),
        (c.METRIC_OFFLOAD_REALIZED_COSTS.name, cost("recall")): pytest.approx(float(recall_cost)),
        (c.METRIC_OFFLOAD_REALIZED_COSTS.name, cost("cache_disruption")): pytest.approx(
            float(disruption)
        ),
        (c.METRIC_OFFLOAD_RECALLS.name, gated): 1,
    }
    assert expected == {key: points.get(key) for key in expected}
    # the chat spans carry the usage each model call really reported
    reported = [m.reply.usage_metadata for m in truth.model_calls]
    chats = by_start([s for s in spans if s.name.startswith("chat ")])
    assert [(u["input_tokens"], u["output_tokens"]) for u in reported if u] == [
        (attr(s, c.ATTR_GEN_AI_USAGE_INPUT_TOKENS), attr(s, c.ATTR_GEN_AI_USAGE_OUTPUT_TOKENS))
        for s in chats
    ]
    assert [] == telemetry_errors(captured_logs)


def observe_symfonic_tools(truth: Truth) -> None:
    """Add symfonic's own tools (the recall) to the truth, from the results the model was sent."""
    mine = {t.call_id for t in truth.tool_runs}
    for m in truth.model_calls:
        for tc in m.reply.tool_calls:
            if tc["id"] in mine:
                continue
            sent = [
                x
                for later in truth.model_calls
                for x in later.messages
                if isinstance(x, ToolMessage) and x.tool_call_id == tc["id"]
            ]
            if sent:
                failed = getattr(sent[0], "status", None) == "error"
                truth.tool_runs.append(
                    ToolRun(tc["name"], dict(tc["args"]), tc["id"], "_OTHER" if failed else None)
                )
                mine.add(tc["id"])


def _as_history(calls: Sequence[ModelCall], truth: Truth) -> list[BaseMessage]:
    """A turn as the application carries it: each reply and the tool results that followed."""
    out: list[BaseMessage] = []
    for m in calls:
        out.append(AIMessage(content=m.reply.content, tool_calls=m.reply.tool_calls))
        for tc in m.reply.tool_calls:
            [ran] = [t for t in truth.tool_runs if t.call_id == tc["id"]]
            out.append(tool_message(BIG_OUTPUT, ran.call_id, ran.name))
    return out


# -- 16 concurrent runs on separate conversations ---------------------------------------------

CONCURRENT = 16


def sales_policy() -> ToolCallPolicy:
    return ToolCallPolicy(
        name="sales_data_read",
        match=lambda ctx: any("sales" in str(m.content) for m in ctx.messages[-1:]),
        model=ModelConfig(model_name=HAIKU),
        when_tool="run_block",
        redirect_to="fetch_data",
        args_transform=lambda args, ctx: {"table": "brand_sales"},
    )


def concurrent_brain(query: str, hop: int) -> AIMessage:
    """Run ``i`` emits a run_block (and, for odd ``i``, a search) then answers."""
    i = int(query.split()[-1])
    if hop == 0:
        calls = [call("run_block", {"code": f"q{i}"}, f"r{i}")]
        if i % 2:
            calls.append(call("search", {"q": f"n{i}"}, f"s{i}"))
        return emits(*calls)
    return AIMessage(content=f"answer {i}")


def query(i: int) -> str:
    return f"{'sales' if i % 3 == 0 else 'notes'} for run {i}"


def test_sixteen_concurrent_runs_decide_as_sequential_ones_each_in_its_own_trace(
    gate_spy: GateSpy,
    tracer_provider: Any,
    meter_provider: Any,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
    tracker: Tracker,
    captured_logs: list[dict[str, Any]],
) -> None:
    def agent_for(truth: Truth) -> SymfonicAgent:
        agent, _ = build(
            concurrent_brain,
            truth,
            tool_call_policies=(sales_policy(),),
            role_model_resolver=lambda ctx: (
                ModelConfig(model_name=GPT4O) if ctx.turn_hop_index >= 1 else None
            ),
            **offload_settings(),
        )
        return agent

    async def one(agent: Any, inst: Any, i: int, results: dict[int, Any]) -> None:
        tracer = tracer_provider.get_tracer("caller")
        with tracer.start_as_current_span(f"conversation {i}"):
            with inst.conversation(f"conv-{i}") if inst is not None else contextlib.nullcontext():
                response = await agent.run(query(i), history=dump_history(f"d{i}"))
        results[i] = response.final_response

    sequential_truth = Truth()
    sequential_agent = agent_for(sequential_truth)
    sequential: dict[int, Any] = {}

    async def run_sequential() -> None:
        async with sequential_agent:
            for i in range(CONCURRENT):
                await one(sequential_agent, None, i, sequential)

    asyncio.run(run_sequential())
    sequential_gates = len(gate_spy.calls)
    span_exporter.clear()
    tracker.started.clear()
    tracker.ended.clear()

    truth = Truth()
    agent = agent_for(truth)
    inst = instrument_symfonic(
        agent,
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        agent_name="analyst",
        telemetry_config=DURATIONS_ON,
    )
    concurrent: dict[int, Any] = {}

    async def run_concurrent() -> None:
        async with agent:
            await asyncio.gather(*(one(agent, inst, i, concurrent) for i in range(CONCURRENT)))

    asyncio.run(run_concurrent())
    inst.uninstrument()
    spans = span_exporter.get_finished_spans()

    # The same decisions as one at a time: answers, models, tools (and the gate).
    assert sequential == concurrent
    for i in range(CONCURRENT):
        assert decisions(sequential_truth, query(i)) == decisions(truth, query(i))
    assert 2 * sequential_gates == len(gate_spy.calls)

    # Every span in its own run's trace, under its caller's span.
    assert_well_formed(spans, tracker)
    callers = {s.name: s for s in spans if s.name.startswith("conversation ")}
    runs = runs_of(spans)
    assert CONCURRENT == len(runs)
    for root, run in runs:
        conversation = attr(root, c.ATTR_GEN_AI_CONVERSATION_ID)
        i = int(str(conversation).removeprefix("conv-"))
        caller = callers[f"conversation {i}"]
        assert root.parent is not None and caller.context.span_id == root.parent.span_id
        assert {caller.context.trace_id} == {s.context.trace_id for s in [root, *run]}
        assert {conversation} == {attr(s, c.ATTR_GEN_AI_CONVERSATION_ID) for s in run}
        assert_run_tells_the_truth(root, run, truth.calls_for(query(i)), truth.tools_for(query(i)))
        gates = [s for s in run if s.name == c.SPAN_OFFLOAD_GATE]
        assert [f"d{i}"] * len(gates) == [attr(s, c.ATTR_GEN_AI_TOOL_CALL_ID) for s in gates]
    # each conversation's offload settled once, linked to a gate span of its own trace
    settles = [s for s in spans if s.name == c.SPAN_OFFLOAD_SETTLE]
    assert sorted(f"conv-{i}" for i in range(CONCURRENT)) == sorted(
        attr(s, c.ATTR_GEN_AI_CONVERSATION_ID) for s in settles
    )
    gate_by_id = {s.context.span_id: s for s in spans if s.name == c.SPAN_OFFLOAD_GATE}
    for settle in settles:
        [link] = settle.links
        gate = gate_by_id[link.context.span_id]
        assert attr(gate, c.ATTR_GEN_AI_CONVERSATION_ID) == attr(
            settle, c.ATTR_GEN_AI_CONVERSATION_ID
        )
        assert attr(gate, c.ATTR_OFFLOAD_ID) == attr(settle, c.ATTR_OFFLOAD_ID)

    # Metrics count what happened: one PRE seam per model call, the policy's wins.
    calls = len(truth.model_calls)
    assert 2 * CONCURRENT == calls
    durations = histogram_counts(metric_reader, c.METRIC_DECISION_DURATION.name)
    assert calls == durations[frozenset({c.ATTR_DECISION_KIND: "pre_model"}.items())]
    assert CONCURRENT == durations[frozenset({c.ATTR_DECISION_KIND: "post_model"}.items())]
    points = counters(metric_reader)
    sales_runs = [i for i in range(CONCURRENT) if i % 3 == 0]
    win = frozenset(
        {
            c.ATTR_SEAM: "post_model",
            c.ATTR_SEAM_WINNER_SOURCE: "policy",
            c.ATTR_POLICY_NAME: "sales_data_read",
        }.items()
    )
    assert len(sales_runs) == points.get((c.METRIC_POLICY_WINS.name, win))
    assert sum(1 for t in truth.tool_runs if t.name == "fetch_data") == len(sales_runs)
    assert [] == telemetry_errors(captured_logs)


# -- review points ------------------------------------------------------------------------------


class _Guarded(dict):  # type: ignore[type-arg]
    """A map that fails the test when touched without its owner's lock held."""

    def __init__(self, inner: Any, lock: Any) -> None:
        super().__init__()
        self.inner, self.lock = inner, lock

    def _check(self) -> None:
        assert self.lock.locked(), "shared map touched without the recorder's lock"

    def __getattribute__(self, name: str) -> Any:
        if name in ("inner", "lock", "_check", "__class__", "__dict__"):
            return object.__getattribute__(self, name)
        object.__getattribute__(self, "_check")()
        return getattr(object.__getattribute__(self, "inner"), name)

    def __contains__(self, key: object) -> bool:
        self._check()
        return key in self.inner

    def __getitem__(self, key: Any) -> Any:
        self._check()
        return self.inner[key]

    def __setitem__(self, key: Any, value: Any) -> None:
        self._check()
        self.inner[key] = value

    def __delitem__(self, key: Any) -> None:
        self._check()
        del self.inner[key]

    def __iter__(self) -> Iterator[Any]:
        self._check()
        return iter(list(self.inner))

    def __len__(self) -> int:
        self._check()
        return len(self.inner)


def test_the_recorders_shared_maps_are_only_touched_under_its_lock(
    tracer_provider: Any, captured_logs: list[dict[str, Any]]
) -> None:
    truth = Truth()
    agent, _ = build(recall_brain(), truth, **offload_settings())
    inst = instrument_symfonic(agent, tracer_provider=tracer_provider)
    for name in ("_runs", "_offloads", "_gated", "_mem_ids", "_expanded"):
        setattr(inst, name, _Guarded(getattr(inst, name), inst._lock))

    async def scenario() -> None:
        async with agent:
            with inst.conversation("conv-l"):
                await agent.run(T1)
                turn_1 = [HumanMessage(content=T1), *_as_history(truth.calls_for(T1), truth)]
                await agent.run(T2, history=turn_1)
                await agent.run(
                    T3, history=[*turn_1, HumanMessage(content=T2), AIMessage(content="up")]
                )

    asyncio.run(scenario())
    inst.uninstrument()
    assert [] == telemetry_errors(captured_logs)
    assert 1 == len(inst.ledger.settlements)  # the scenario did reach the recall bookkeeping
    assert 1 == inst.ledger.settlements[0].recalls
    # the settlement names the tool whose output was offloaded (the per-(tool,
    # model) evidence series and calibrate read it)
    assert "dump_table" == inst.ledger.settlements[0].tool_name


def test_symfonic_pricing_skips_a_row_whose_rates_are_not_numbers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Incomparable(Decimal):
        """A rate the price table cannot compare: reading it raises TypeError."""

        def _no(self, other: Any) -> bool:
            raise TypeError("not a comparable rate")

        __lt__ = __le__ = __gt__ = __ge__ = _no

    table = {
        "good": {"input": 1.0, "output": 2.0, "cache_read": 0.1},
        "type-error": {"input": Incomparable("1"), "output": 2.0},
        "none-rate": {"input": None, "output": 2.0},
        "nan-rate": {"input": float("nan"), "output": 2.0},
        "list-rate": {"input": [1], "output": 2.0},
        "bad-cache": {"input": 1.0, "output": 2.0, "cache_read": "cheap"},
        "missing": {"output": 2.0},
    }
    monkeypatch.setattr(tog, "MODEL_PRICING", table)
    pricing = symfonic_pricing(use_genai_prices=False)
    assert [True, False, False, False, False, False, False] == [
        pricing.lookup(model) is not None for model in table
    ]
    quote = pricing.lookup("good")
    assert quote is not None
    assert (Decimal("1.0"), Decimal("2.0"), Decimal("0.1")) == (
        quote.price.input_per_mtok,
        quote.price.output_per_mtok,
        quote.price.cache_read_per_mtok,
    )
