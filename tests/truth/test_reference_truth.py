"""The truth matrix for the framework-free loop: DecisionLayer + ReActAgent.

The chat callable and the tools are the harness's recorders; everything else
is the reference loop as users run it.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import structlog
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NoOpTracerProvider

from seamscope.adapters import RECALL_TOOL, ChatRequest, ChatResponse, DecisionLayer, ReActAgent
from seamscope.decisions import (
    Message,
    ModelConfig,
    ModelUsage,
    PricingTable,
    RolePaletteStage,
    SelectionContext,
    StageOutcome,
    ToolCall,
    ToolCallPolicy,
)
from seamscope.telemetry import TelemetryConfig
from seamscope.telemetry import conventions as c

from ._harness import Call, Ground, Prices, Reply, Seen, SpanWatch, disagreements, reply

OPUS = "claude-opus-4-6"
HAIKU = "claude-haiku-4-5"
PRICES = Prices({OPUS: (5e-6, 25e-6), HAIKU: (1e-6, 5e-6)})
PRICING = PricingTable(
    {m: {"input": i * 1e6, "output": o * 1e6} for m, (i, o) in PRICES.rates.items()},
    use_genai_prices=False,
)
BIG = ("y" * 79 + "\n") * 1_000  # 80 000 chars: 20 000 tokens
PALETTE = ("run_block", "fetch_data", "search", "big_report", "lookup", "flaky", RECALL_TOOL)


# -- glue: the reference loop's objects as neutral records ------------------------------


def seen(message: Any) -> Seen:
    calls = tuple(Call(tc.id, tc.name, dict(tc.args)) for tc in message.tool_calls or ())
    status = "error" if message.role == "tool" and message.content.startswith("error") else None
    return Seen(message.role, message.content, message.tool_call_id, message.name, status, calls)


class RawCall:
    """A tool call as a provider SDK hands it over (arguments maybe a JSON string)."""

    def __init__(self, call_id: Any, name: str, args: Any) -> None:
        self.id, self.name, self.args = call_id, name, args


def chat(ground: Ground, *, raw: bool = False) -> Callable[[ChatRequest], ChatResponse]:
    def answer(request: ChatRequest) -> ChatResponse:
        names = [getattr(t, "name", t) for t in request.tools]
        got = ground.model_call(
            request.model.model_name,
            names,
            request.tool_choice,
            [seen(m) for m in request.messages],
        )
        calls: tuple[Any, ...] = tuple(
            RawCall(x.id, x.name, x.args) if raw else ToolCall(x.id, x.name, x.args)
            for x in got.calls
        )
        message = Message("assistant", got.text, calls)  # type: ignore[arg-type]
        return ChatResponse(message, ModelUsage(*got.usage))

    return answer


def tools(ground: Ground, bodies: Mapping[str, Callable[[Any], str]]) -> dict[str, Any]:
    def recorded(name: str, body: Callable[[Any], str]) -> Callable[[Mapping[str, Any]], str]:
        return lambda args: ground.run_tool(name, dict(args), None, body)

    return {name: recorded(name, body) for name, body in bodies.items()}


def standard_bodies() -> dict[str, Callable[[Any], str]]:
    def flaky(args: Any) -> str:
        raise ConnectionError("archive offline")

    return {
        "run_block": lambda a: f"ran {a['block']}",
        "fetch_data": lambda a: f"{a['rows']} rows of {a['source']}",
        "search": lambda a: f"hits for {a['query']}",
        "archive_search": lambda a: f"old hits for {a['query']}",
        "big_report": lambda a: BIG,
        "lookup": lambda a: f"found {a.get('key')}",
        "flaky": flaky,
    }


def is_sales(ctx: Any) -> bool:
    return "sales" in ctx.user_text.lower()


POLICIES = (
    ToolCallPolicy(
        "sales_read",
        match=is_sales,
        model=ModelConfig(HAIKU),
        when_tool="run_block",
        redirect_to="fetch_data",
        args_transform=lambda args, ctx: {"source": args["block"], "rows": 5},
    ),
    # archive_search is a registered tool the palette never routes
    ToolCallPolicy(
        "to_archive", match=lambda ctx: True, when_tool="search", redirect_to="archive_search"
    ),
    # a redirect whose arguments do not fit its target (no transform)
    ToolCallPolicy(
        "lookup_to_fetch",
        match=lambda ctx: "misfit" in ctx.user_text,
        when_tool="lookup",
        redirect_to="fetch_data",
    ),
)


class Telemetry:
    """Fresh SDK providers with a span watch, an exporter and a metric reader."""

    def __init__(self, *, slow: float = 0.0) -> None:
        self.exporter = InMemorySpanExporter()
        self.watch = SpanWatch()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(self.watch)
        if slow:
            self.tracer_provider.add_span_processor(_Slow(slow))
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    def spans(self) -> Any:
        return self.exporter.get_finished_spans()


class _Slow(SpanProcessor):
    """A span processor that takes its time (a slow exporter in the same thread)."""

    def __init__(self, seconds: float) -> None:
        self._seconds = seconds

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        time.sleep(self._seconds)

    def on_end(self, span: Any) -> None:
        time.sleep(self._seconds)


def make_layer(
    tel: Telemetry | None,
    *,
    policies: Sequence[ToolCallPolicy] = POLICIES,
    stages: Sequence[Any] | None = None,
    tracer_provider: Any = None,
    capture: bool = False,
    **kwargs: Any,
) -> DecisionLayer:
    return DecisionLayer(
        default_model=OPUS,
        policies=policies,
        stages=[RolePaletteStage(resolver=lambda role: PALETTE)] if stages is None else stages,
        agent_name="analyst",
        pricing=PRICING,
        tracer_provider=tracer_provider if tel is None else tel.tracer_provider,
        meter_provider=None if tel is None else tel.meter_provider,
        telemetry_config=TelemetryConfig.create(capture_content=capture),
        **kwargs,
    )


def run(
    agent: ReActAgent,
    ground: Ground,
    conversation: str,
    texts: Sequence[str],
    history: list[Any] | None = None,
) -> list[Any]:
    history = [] if history is None else history
    for text in texts:
        with ground.conversation(conversation):
            agent.run_turn(conversation, f"{conversation}: {text}", messages=history)
        ground.invoked(conversation, [seen(m) for m in history])
    ground.assign_call_ids(conversation)
    agent.layer.end_conversation(conversation)
    return history


def check(ground: Ground, tel: Telemetry, logs: Any, **kwargs: Any) -> list[str]:
    return disagreements(
        ground,
        tel.spans(),
        watch=tel.watch,
        metrics=tel.reader,
        logs=logs,
        prices=PRICES,
        recall_tool=RECALL_TOOL,
        **kwargs,
    )


# -- the matrix ---------------------------------------------------------------------------


def test_several_calls_in_one_message_redirected_unrouted_and_untouched(
    captured_logs: list[dict[str, Any]],
) -> None:
    tel = Telemetry()
    ground = Ground(
        {
            "c1": [
                reply(
                    ("run_block", {"block": "sales_q3"}, "a1"),
                    ("search", {"query": "q3"}, "a2"),
                    ("lookup", {"key": "k"}, "a3"),
                ),
                reply(text="Q3 sales grew."),
            ]
        }
    )
    agent = ReActAgent(
        make_layer(tel, capture=True), chat(ground), tools(ground, standard_bodies())
    )
    run(agent, ground, "c1", ["How did sales go?"])

    assert [] == check(ground, tel, captured_logs)
    # the harness saw what the spans must say: one redirect kept, one dropped
    assert [
        ("fetch_data", {"source": "sales_q3", "rows": 5}),
        ("search", {"query": "q3"}),
        ("lookup", {"key": "k"}),
    ] == [(r.name, r.args) for r in ground.runs_of("c1")]


def test_a_conversation_of_several_turns_offloads_then_recalls(
    captured_logs: list[dict[str, Any]],
) -> None:
    tel = Telemetry()
    ground = Ground(
        {
            "c2": [
                reply(("big_report", {}, "b1"), usage=(2_000, 40)),
                reply(text="The report is stored.", usage=(2_100, 30)),
                reply(("lookup", {"key": "x"}, "l1"), usage=(2_200, 20)),
                reply(text="x found.", usage=(2_300, 20)),
                reply((RECALL_TOOL, {"offload_id": "off-a"}, "r1"), usage=(2_400, 60)),
                reply(text="Here it is.", usage=(22_000, 25)),
                reply(text="Anything else?", usage=(22_100, 25)),
            ]
        }
    )
    layer = make_layer(tel, offload_id_factory=lambda: "off-a")
    agent = ReActAgent(layer, chat(ground), tools(ground, standard_bodies()))
    run(agent, ground, "c2", ["get the report", "look up x", "show me the full report", "thanks"])

    assert [] == check(ground, tel, captured_logs)
    assert 1 == sum(1 for m in ground.transcripts["c2"] if m.name == RECALL_TOOL)


def test_parallel_recalls_in_one_model_call_charge_its_output_once(
    captured_logs: list[dict[str, Any]],
) -> None:
    tel = Telemetry()
    ground = Ground(
        {
            "c3": [
                reply(("big_report", {}, "b1"), ("big_report", {}, "b2"), usage=(2_000, 40)),
                reply(
                    (RECALL_TOOL, {"offload_id": "off-1"}, "r1"),
                    (RECALL_TOOL, {"offload_id": "off-2"}, "r2"),
                    usage=(2_100, 300),
                ),
                reply(text="Both are back.", usage=(42_000, 25)),
            ]
        }
    )
    ids = iter(["off-1", "off-2"])
    agent = ReActAgent(
        make_layer(tel, offload_id_factory=lambda: next(ids)),
        chat(ground),
        tools(ground, standard_bodies()),
    )
    run(agent, ground, "c3", ["both reports please"])

    assert [] == check(ground, tel, captured_logs)


def test_failing_tools_and_a_redirect_whose_arguments_do_not_fit(
    captured_logs: list[dict[str, Any]],
) -> None:
    tel = Telemetry()
    ground = Ground(
        {
            "c4": [
                reply(("flaky", {}, "f1"), ("lookup", {"key": "k"}, "m1"), ("nowhere", {}, "n1")),
                reply(text="Some failed."),
            ]
        }
    )
    agent = ReActAgent(make_layer(tel), chat(ground), tools(ground, standard_bodies()))
    run(agent, ground, "c4", ["misfit lookups"])

    assert [] == check(ground, tel, captured_logs)
    assert [("flaky", "ConnectionError"), ("fetch_data", "KeyError")] == [
        (r.name, r.raised) for r in ground.runs_of("c4")
    ]


@pytest.mark.parametrize("shape", ["json", "none", "object", "bad_json"])
def test_arguments_as_a_json_string_none_or_an_object(
    shape: str, captured_logs: list[dict[str, Any]]
) -> None:
    args: Any = {
        "json": '{"key": "k"}',
        "none": None,
        "object": {"key": "k"},
        "bad_json": "{not json",
    }[shape]
    tel = Telemetry()
    ground = Ground({"c5": [Reply((Call("j1", "lookup", args),)), reply(text="ok")]})
    agent = ReActAgent(
        make_layer(tel, capture=True), chat(ground, raw=True), tools(ground, standard_bodies())
    )
    run(agent, ground, "c5", ["look it up"])

    assert [] == check(ground, tel, captured_logs)
    expected = {
        "json": {"key": "k"},
        "none": {},
        "object": {"key": "k"},
        "bad_json": {"__raw__": "{not json"},
    }[shape]
    assert [expected] == [r.args for r in ground.runs_of("c5")]


def test_empty_and_duplicate_call_ids(captured_logs: list[dict[str, Any]]) -> None:
    tel = Telemetry()
    ground = Ground(
        {
            "c6": [
                Reply(
                    (
                        Call("", "lookup", {"key": "a"}),
                        Call("d", "lookup", {"key": "b"}),
                        Call("d", "search", {"query": "c"}),
                    )
                ),
                reply(text="ok"),
            ]
        }
    )
    agent = ReActAgent(make_layer(tel), chat(ground, raw=True), tools(ground, standard_bodies()))
    run(agent, ground, "c6", ["ids"])

    assert [] == check(ground, tel, captured_logs)


class _Inventor:
    """A stage that returns a tool that was never offered."""

    name = "inventor"
    protects_forced = False

    def apply(self, tools: Sequence[Any], ctx: SelectionContext) -> StageOutcome:
        return StageOutcome.select([*tools, "made_up_tool"], "adds a tool nobody offered")


def test_a_stage_returning_a_tool_never_offered_is_recorded(
    captured_logs: list[dict[str, Any]],
) -> None:
    tel = Telemetry()
    ground = Ground({"c7": [reply(("lookup", {"key": "k"}, "x1")), reply(text="ok")]})
    layer = make_layer(tel, stages=[_Inventor()])
    agent = ReActAgent(layer, chat(ground), tools(ground, standard_bodies()))
    run(agent, ground, "c7", ["hello"])

    assert [] == check(ground, tel, captured_logs)
    assert ["made_up_tool"] not in [list(m.tools) for m in ground.model_calls]
    stages = [s for s in tel.spans() if s.name == c.SPAN_STAGE]
    assert [["made_up_tool"]] * 2 == [list(s.attributes[c.ATTR_STAGE_REJECTED]) for s in stages]
    assert 2 == sum(1 for e in captured_logs if e["event"] == c.LOG_STAGE_REJECTED)


def test_the_callers_active_span_is_the_parent(captured_logs: list[dict[str, Any]]) -> None:
    tel = Telemetry()
    ground = Ground({"c8": [reply(("lookup", {"key": "k"}, "x1")), reply(text="ok")]})
    agent = ReActAgent(make_layer(tel), chat(ground), tools(ground, standard_bodies()))
    request_tracer = tel.tracer_provider.get_tracer("the-callers-web-framework")
    with request_tracer.start_as_current_span("POST /chat") as request:
        run(agent, ground, "c8", ["hello"])

    spans = tel.spans()
    foreign = [s for s in spans if s.name == "POST /chat"]
    own = [s for s in spans if s.name != "POST /chat"]
    assert [] == disagreements(ground, own, foreign=foreign, logs=captured_logs)
    assert {request.get_span_context().trace_id} == {s.context.trace_id for s in own}


# -- exceptions that are not errors of the loop ------------------------------------------


@pytest.mark.parametrize("where", ["predicate", "stage", "chat", "tool"])
@pytest.mark.parametrize("kind", [KeyboardInterrupt, SystemExit])
def test_keyboard_interrupt_and_system_exit_end_every_span_they_cross(
    where: str, kind: type[BaseException]
) -> None:
    tel = Telemetry()
    stop = kind()

    def raise_(*args: Any) -> Any:
        raise stop

    policies = (
        [ToolCallPolicy("stopper", match=raise_, model=ModelConfig(HAIKU))]
        if where == "predicate"
        else []
    )

    class Stopper:
        name = "stopper"
        protects_forced = False
        apply = staticmethod(raise_)

    stages = [Stopper()] if where == "stage" else []
    ground = Ground({"k": [reply(("lookup", {"key": "k"}, "x1")), reply(text="ok")]})
    answer = chat(ground)
    bodies = standard_bodies()
    if where == "tool":
        bodies["lookup"] = raise_
    agent = ReActAgent(
        make_layer(tel, policies=policies, stages=stages),
        raise_ if where == "chat" else answer,
        tools(ground, bodies),
    )
    with pytest.raises(kind) as raised:
        agent.run_turn("k", "k: hello")

    assert raised.value is stop
    assert [] == tel.watch.open_spans()
    failed = sorted(
        s.name for s in tel.spans() if (s.attributes or {}).get(c.ATTR_ERROR_TYPE) == kind.__name__
    )
    crossed = {
        "predicate": [c.SPAN_SEAM_PRE_MODEL],
        "stage": [c.SPAN_SELECT_TOOLS, c.SPAN_STAGE],
        "chat": [f"chat {OPUS}"],
        "tool": ["execute_tool lookup"],
    }[where]
    assert sorted([*crossed, c.SPAN_ITERATION, "invoke_agent analyst"]) == failed
    # the context is restored: a span started now is a root again
    assert not trace.get_current_span().get_span_context().is_valid


# -- decisions never depend on telemetry ---------------------------------------------------

CONVERSATIONS = [f"p{i}" for i in range(64)]


def _script(conv: str) -> list[Reply]:
    n = int(conv[1:])
    return [
        reply(
            ("run_block", {"block": f"b{n}"}, f"{conv}-1"),
            ("search", {"query": conv}, f"{conv}-2"),
            ("big_report", {}, f"{conv}-3"),
        ),
        reply(text=f"{conv} done"),
        reply((RECALL_TOOL, {"offload_id": f"{conv}-off"}, f"{conv}-4")),
        reply(text="back"),
    ]


def _texts(conv: str) -> list[str]:
    return ["sales please" if int(conv[1:]) % 2 else "archive please", "the report again"]


def _agent(ground: Ground, tel: Telemetry | None, **kwargs: Any) -> ReActAgent:
    counters: dict[str, int] = {}

    def offload_id() -> str:
        # unique per conversation, whatever the interleaving: read from the ground's
        # current conversation (the tools run in it)
        from ._harness import _CONVERSATION

        conv = _CONVERSATION.get() or "?"
        counters[conv] = counters.get(conv, 0) + 1
        return f"{conv}-off"

    layer = make_layer(tel, offload_id_factory=offload_id, **kwargs)
    return ReActAgent(layer, chat(ground), tools(ground, standard_bodies()))


def _one(agent: ReActAgent, ground: Ground, conv: str) -> None:
    run(agent, ground, conv, _texts(conv))


def _normalized(ground: Ground) -> dict[str, Any]:
    return {k: re.sub(r"0x[0-9a-f]+", "", repr(v)) for k, v in ground.decisions().items()}


def test_concurrent_conversations_decide_as_sequential_ones_and_keep_their_traces() -> None:
    sequential = Ground({conv: _script(conv) for conv in CONVERSATIONS})
    agent = _agent(sequential, Telemetry())
    for conv in CONVERSATIONS:
        _one(agent, sequential, conv)

    threaded = Ground({conv: _script(conv) for conv in CONVERSATIONS})
    tel = Telemetry()
    agent = _agent(threaded, tel)
    barrier = threading.Barrier(16)

    def worker(convs: Sequence[str]) -> None:
        barrier.wait()
        for conv in convs:
            _one(agent, threaded, conv)

    with structlog.testing.capture_logs() as logs, ThreadPoolExecutor(16) as pool:
        list(pool.map(worker, [CONVERSATIONS[i::16] for i in range(16)]))

    assert _normalized(sequential) == _normalized(threaded)
    assert [] == check(threaded, tel, logs)

    in_tasks = Ground({conv: _script(conv) for conv in CONVERSATIONS})
    tel = Telemetry()
    agent = _agent(in_tasks, tel)

    async def main() -> None:
        await asyncio.gather(
            *(asyncio.to_thread(_one, agent, in_tasks, conv) for conv in CONVERSATIONS)
        )

    with structlog.testing.capture_logs() as logs:
        asyncio.run(main())
    assert _normalized(sequential) == _normalized(in_tasks)
    assert [] == check(in_tasks, tel, logs)


class _BrokenTracer(trace.NoOpTracer):
    def start_span(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("exporter misconfigured")


class _BrokenProvider(trace.TracerProvider):
    def get_tracer(self, *args: Any, **kwargs: Any) -> Any:
        return _BrokenTracer()


@pytest.mark.parametrize("mode", ["off", "broken", "slow"])
def test_decisions_are_the_same_with_telemetry_on_off_broken_or_slow(mode: str) -> None:
    convs = CONVERSATIONS[:4]
    on = Ground({conv: _script(conv) for conv in convs})
    agent = _agent(on, Telemetry())
    for conv in convs:
        _one(agent, on, conv)

    other = Ground({conv: _script(conv) for conv in convs})
    if mode == "off":
        agent = _agent(other, None, tracer_provider=NoOpTracerProvider())
    elif mode == "slow":
        agent = _agent(other, Telemetry(slow=0.001))
    else:
        agent = _agent(other, None, tracer_provider=_BrokenProvider())
    for conv in convs:
        _one(agent, other, conv)
    assert _normalized(on) == _normalized(other)
