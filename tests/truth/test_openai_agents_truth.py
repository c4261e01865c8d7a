"""The truth matrix for the OpenAI Agents SDK with ``SeamscopeRunner``.

The model is an ``agents.Model`` that answers from the harness's scripts and
logs every call through :meth:`Ground.model_call` (which model instance, the
tools it was offered, the tool choice, the input it received); the tools are
the SDK's own function tools that run through :meth:`Ground.run_tool`. The
run loop, tool execution, sessions and streaming are the SDK's own; no
network, no key (the SDK's own tracing is off).

What a conversation's messages are, here: what the SDK sent the model (its
model input, after ``call_model_input_filter``). The SDK's history and
session keep an offloaded output's full text while the model is sent its
stub, so the history is not the model's view; the harness reads the
messages the model calls received instead (no transcript is recorded).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import json
import re
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import structlog
from agents import (
    Agent,
    FunctionTool,
    ModelResponse,
    SQLiteSession,
    Usage,
    function_tool,
    set_tracing_disabled,
)
from agents.exceptions import UserError
from agents.models.interface import Model
from agents.tool_context import ToolContext
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseTextDeltaEvent,
    ResponseUsage,
)
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails

from seamscope.adapters import RECALL_TOOL
from seamscope.adapters.openai_agents import SeamscopeRunner
from seamscope.decisions import OffloadLedger
from seamscope.telemetry import conventions as c

from ._harness import Call, Ground, Reply, Seen, conversation_of, disagreements, reply
from .test_reference_truth import BIG, HAIKU, OPUS, PRICES, PRICING, Telemetry, make_layer


@pytest.fixture(autouse=True)
def _sdk_tracing_off(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The SDK's own exporter posts to OpenAI when a key is set: no key, tracing off."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    set_tracing_disabled(True)
    yield
    set_tracing_disabled(False)


# -- glue: the SDK's model input as neutral records ------------------------------------------


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content)
    return "" if content is None else str(content)


def _field(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


def seen_input(instructions: str | None, items: Any) -> list[Seen]:
    """The model input as messages: consecutive assistant items (a text and the
    function calls of one reply) are one assistant message; a function call
    output is a tool message named after the call it answers."""
    out: list[Seen] = [] if not instructions else [Seen("system", instructions)]
    if isinstance(items, str):
        return [*out, Seen("user", items)]
    names: dict[str, str] = {}
    pending: tuple[str, list[Call]] | None = None

    def flush() -> None:
        nonlocal pending
        if pending is not None:
            out.append(Seen("assistant", pending[0], calls=tuple(pending[1])))
            pending = None

    for item in items:
        kind = _field(item, "type")
        role = _field(item, "role")
        if kind == "function_call":
            call_id = str(_field(item, "call_id"))
            name = str(_field(item, "name"))
            names[call_id] = name
            raw = _field(item, "arguments") or "{}"
            args = json.loads(raw) if isinstance(raw, str) else raw
            pending = pending or ("", [])
            pending[1].append(Call(call_id, name, args))
        elif role == "assistant":
            if pending is not None and pending[1]:
                flush()  # a text after function calls starts another reply
            pending = (_text(_field(item, "content")), pending[1] if pending else [])
        elif kind == "function_call_output":
            flush()
            call_id = str(_field(item, "call_id"))
            out.append(Seen("tool", _text(_field(item, "output")), call_id, names.get(call_id)))
        else:
            flush()
            out.append(Seen(str(role or kind), _text(_field(item, "content"))))
    flush()
    return out


def _output(got: Reply) -> list[Any]:
    items: list[Any] = []
    if got.text:
        items.append(
            ResponseOutputMessage(
                type="message",
                id="msg",
                role="assistant",
                status="completed",
                content=[ResponseOutputText(type="output_text", text=got.text, annotations=[])],
            )
        )
    for x in got.calls:
        items.append(
            ResponseFunctionToolCall(
                type="function_call",
                call_id=x.id,
                name=x.name,
                arguments=json.dumps(x.args),
                id=f"fc_{x.id}",
                status="completed",
            )
        )
    return items


def _failed(ground: Ground, got: Reply, exc: BaseException) -> None:
    """Shim: a model call that was under way when its run was cancelled never
    answered; the ground learns it raised (the harness's Ground has no hook)."""
    with ground._lock:
        for i in range(len(ground.model_calls) - 1, -1, -1):
            if ground.model_calls[i].reply is got:
                ground.model_calls[i] = dataclasses.replace(
                    ground.model_calls[i], raised=type(exc).__qualname__
                )
                return


class RecordingModel(Model):
    """A model instance that answers from the ground's script and logs the call.

    ``hold``: conversation -> how many of its calls complete; a later streamed
    call never does (a provider that stalls)."""

    def __init__(self, name: str, ground: Ground) -> None:
        self.model = name  # read like an OpenAI model's name
        self.ground = ground
        self.hold: dict[str, int] = {}

    def _ask(self, instructions: Any, input: Any, settings: Any, tools: Any) -> Reply:
        return self.ground.model_call(
            self.model,
            [t.name for t in tools],
            settings.tool_choice,
            seen_input(instructions, input),
        )

    @staticmethod
    def _usage(got: Reply) -> Usage:
        inp, out = got.usage
        return Usage(
            requests=1,
            input_tokens=inp,
            output_tokens=out,
            total_tokens=inp + out,
            input_tokens_details=InputTokensDetails(cached_tokens=0, cache_write_tokens=0),
        )

    async def get_response(
        self,
        system_instructions: Any,
        input: Any,
        model_settings: Any,
        tools: Any,
        output_schema: Any,
        handoffs: Any,
        tracing: Any,
        **_: Any,
    ) -> ModelResponse:
        got = self._ask(system_instructions, input, model_settings, tools)
        return ModelResponse(output=_output(got), usage=self._usage(got), response_id=None)

    async def stream_response(
        self,
        system_instructions: Any,
        input: Any,
        model_settings: Any,
        tools: Any,
        output_schema: Any,
        handoffs: Any,
        tracing: Any,
        **_: Any,
    ) -> AsyncIterator[Any]:
        got = self._ask(system_instructions, input, model_settings, tools)
        conv = conversation_of(seen_input(system_instructions, input))
        try:
            yield ResponseTextDeltaEvent(
                type="response.output_text.delta",
                item_id="msg",
                output_index=0,
                content_index=0,
                delta="…",
                logprobs=[],
                sequence_number=0,
            )
            if conv in self.hold and len(self.ground.calls_of(conv)) > self.hold[conv]:
                await asyncio.Event().wait()
        except BaseException as exc:
            _failed(self.ground, got, exc)
            raise
        inp, out = got.usage
        response = Response(
            id="resp",
            created_at=0,
            model=self.model,
            object="response",
            output=_output(got),
            tool_choice="auto",
            tools=[],
            top_p=None,
            parallel_tool_calls=True,
            status="completed",
            usage=ResponseUsage(
                input_tokens=inp,
                output_tokens=out,
                total_tokens=inp + out,
                input_tokens_details=InputTokensDetails(cached_tokens=0, cache_write_tokens=0),
                output_tokens_details=OutputTokensDetails(reasoning_tokens=0),
            ),
        )
        yield ResponseCompletedEvent(
            type="response.completed", response=response, sequence_number=1
        )


def models(ground: Ground, names: Sequence[str] = (OPUS, HAIKU)) -> dict[str, RecordingModel]:
    return {name: RecordingModel(name, ground) for name in names}


def sdk_tools(ground: Ground) -> list[FunctionTool]:
    """The SDK's function tools; each execution is recorded by the ground (the
    conversation comes from the run's ``context``)."""

    def rec(
        ctx: ToolContext[Any], name: str, args: dict[str, Any], body: Callable[..., str]
    ) -> str:
        context = ctx.context if isinstance(ctx.context, dict) else {}
        return ground.run_tool(
            name, args, ctx.tool_call_id, lambda a: body(**a), context.get("conversation")
        )

    def down(reason: str) -> str:
        raise ConnectionError("archive offline")

    @function_tool
    def run_block(ctx: ToolContext[Any], block: str) -> str:
        """Run a saved block."""
        return rec(ctx, "run_block", {"block": block}, lambda block: f"ran {block}")

    @function_tool
    def fetch_data(ctx: ToolContext[Any], source: str, rows: int = 10) -> str:
        """Read rows."""
        return rec(
            ctx,
            "fetch_data",
            {"source": source, "rows": rows},
            lambda source, rows: f"{rows} rows of {source}",
        )

    @function_tool
    def search(ctx: ToolContext[Any], query: str) -> str:
        """Search the archive."""
        return rec(ctx, "search", {"query": query}, lambda query: f"hits for {query}")

    @function_tool
    def archive_search(ctx: ToolContext[Any], query: str) -> str:
        """Search old archives."""
        return rec(ctx, "archive_search", {"query": query}, lambda query: f"old hits for {query}")

    @function_tool
    def big_report(ctx: ToolContext[Any], topic: str = "") -> str:
        """The full report."""
        return rec(ctx, "big_report", {"topic": topic}, lambda topic: BIG)

    @function_tool
    def lookup(ctx: ToolContext[Any], key: str) -> str:
        """Look a key up."""
        return rec(ctx, "lookup", {"key": key}, lambda key: f"found {key}")

    @function_tool
    def flaky(ctx: ToolContext[Any], reason: str = "") -> str:
        """An archive that is down."""
        return rec(ctx, "flaky", {"reason": reason}, down)

    @function_tool(failure_error_function=None)
    def fatal(ctx: ToolContext[Any], reason: str = "") -> str:
        """An archive whose errors the SDK does not answer for."""
        return rec(ctx, "fatal", {"reason": reason}, down)

    return [run_block, fetch_data, search, archive_search, big_report, lookup, flaky, fatal]


@dataclasses.dataclass
class Scenario:
    ground: Ground
    tel: Telemetry
    runner: SeamscopeRunner
    agent: Agent[Any]
    models: dict[str, RecordingModel]


def scenario(
    scripts: dict[str, list[Reply]], layer: Callable[[Telemetry], Any] = make_layer
) -> Scenario:
    ground = Ground(scripts)
    tel = Telemetry()
    instances = models(ground)
    runner = SeamscopeRunner(layer(tel), {HAIKU: instances[HAIKU]})
    agent = Agent(
        name="analyst",
        instructions="You analyse sales.",
        model=instances[OPUS],
        tools=[*sdk_tools(ground), runner.recall_tool],
    )
    return Scenario(ground, tel, runner, agent, instances)


async def _arun(s: Scenario, conv: str, text: str, mode: str, **kwargs: Any) -> Any:
    options: dict[str, Any] = {"context": {"conversation": conv}, **kwargs}
    if "session" not in options:
        options["conversation"] = conv
    if mode == "run":
        return await s.runner.run(s.agent, f"{conv}: {text}", **options)
    result = s.runner.run_streamed(s.agent, f"{conv}: {text}", **options)
    async for _ in result.stream_events():
        pass
    return result


def drive(s: Scenario, conv: str, text: str, mode: str = "run", **kwargs: Any) -> Any:
    """One run of ``conv`` in ``mode``: ``run``, ``run_sync`` or ``run_streamed``."""
    if mode == "run_sync":
        options: dict[str, Any] = {"context": {"conversation": conv}, **kwargs}
        if "session" not in options:
            options["conversation"] = conv
        result = s.runner.run_sync(s.agent, f"{conv}: {text}", **options)
    else:
        result = asyncio.run(_arun(s, conv, text, mode, **kwargs))
    s.ground.invoked(conv)
    return result


def check(s: Scenario, logs: Any, **kwargs: Any) -> list[str]:
    kwargs.setdefault("prices", PRICES)
    return disagreements(
        s.ground,
        s.tel.spans(),
        watch=s.tel.watch,
        metrics=s.tel.reader,
        logs=logs,
        recall_tool=RECALL_TOOL,
        **kwargs,
    )


MULTI = [
    reply(
        ("run_block", {"block": "sales_q3"}, "a1"),  # redirected to fetch_data (HAIKU)
        ("search", {"query": "q3"}, "a2"),  # redirect target archive_search is not routed
        ("lookup", {"key": "k"}, "a3"),  # untouched
    ),
    reply(text="Q3 sales grew."),
]

MODES = ["run", "run_sync", "run_streamed"]

# -- the matrix ------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_several_calls_in_one_message_in_every_mode(
    mode: str, captured_logs: list[dict[str, Any]]
) -> None:
    s = scenario({"c1": list(MULTI)})
    result = drive(s, "c1", "How did sales go?", mode)

    assert [] == check(s, captured_logs)
    assert "Q3 sales grew." == result.final_output
    assert sorted([("fetch_data", "a1"), ("search", "a2"), ("lookup", "a3")]) == sorted(
        (r.name, r.call_id) for r in s.ground.tool_runs
    )
    assert [HAIKU, HAIKU] == [m.model for m in s.ground.model_calls]
    drops = [e for e in captured_logs if e.get("event") == c.LOG_PALETTE_GATE_DROP]
    assert ["a2"] == [e.get("tool_call_id") for e in drops]


@pytest.mark.parametrize(
    "modes", [("run", "run_sync", "run_streamed", "run"), ("run_streamed",) * 4]
)
def test_a_session_of_several_runs_offloads_then_recalls(
    modes: tuple[str, ...], captured_logs: list[dict[str, Any]]
) -> None:
    s = scenario(
        {
            "c3": [
                reply(("big_report", {"topic": "q3"}, "b1"), usage=(2_000, 40)),
                reply(text="Stored.", usage=(2_100, 30)),
                reply(("lookup", {"key": "x"}, "l1"), usage=(2_200, 20)),
                reply(text="x found.", usage=(2_300, 20)),
                reply((RECALL_TOOL, {"offload_id": "off-a"}, "r1"), usage=(2_400, 60)),
                reply(text="Here it is.", usage=(22_000, 25)),
                reply(text="Anything else?", usage=(22_100, 25)),
            ]
        },
        layer=lambda tel: make_layer(tel, offload_id_factory=lambda: "off-a"),
    )
    session = SQLiteSession("c3")
    texts = ["the report", "look up x", "the full report again", "thanks"]
    for mode, text in zip(modes, texts, strict=True):
        drive(s, "c3", text, mode, session=session)
    s.runner.layer.end_conversation("c3")

    assert [] == check(s, captured_logs)
    calls = s.ground.model_calls
    stubs = [
        m.text for call in calls for m in call.messages if m.call_id == "b1" and m.role == "tool"
    ]
    assert len(stubs) == 6 and all(t.startswith("[offloaded off-a") for t in stubs)
    recalled = [m.text for m in calls[5].messages if m.call_id == "r1"]
    assert [BIG] == recalled
    settles = [sp for sp in s.tel.spans() if sp.name == c.SPAN_OFFLOAD_SETTLE]
    assert 1 == len(settles)


def test_a_stream_abandoned_during_a_model_call_ends_every_span(
    captured_logs: list[dict[str, Any]],
) -> None:
    s = scenario({"s1": [reply(("fetch_data", {"source": "crm"}, "f1")), reply(text="never read")]})
    s.models[OPUS].hold["s1"] = 1  # its second call stalls mid-stream

    async def go() -> None:
        result = s.runner.run_streamed(
            s.agent, "s1: crm data", conversation="s1", context={"conversation": "s1"}
        )
        async for _ in result.stream_events():
            if len(s.ground.calls_of("s1")) == 2:
                break
        result.cancel()
        assert result.run_loop_task is not None
        with contextlib.suppress(asyncio.CancelledError):
            await result.run_loop_task
        await asyncio.sleep(0)

    asyncio.run(go())
    s.ground.unfinished.add("s1")
    s.ground.invoked("s1")

    assert [] == s.tel.watch.open_spans()
    assert [] == check(s, captured_logs, prices=None)
    assert ["CancelledError"] == [m.raised for m in s.ground.model_calls if m.raised]
    agents = [sp for sp in s.tel.spans() if sp.name.startswith("invoke_agent")]
    assert ["CancelledError"] == [(sp.attributes or {}).get(c.ATTR_ERROR_TYPE) for sp in agents]


@pytest.mark.parametrize("after", [1, 2, 5, 8])
def test_a_stream_abandoned_after_some_events_ends_every_span(
    after: int, captured_logs: list[dict[str, Any]]
) -> None:
    s = scenario({"s2": list(MULTI)})

    async def go() -> None:
        result = s.runner.run_streamed(
            s.agent, "s2: How did sales go?", conversation="s2", context={"conversation": "s2"}
        )
        seen = 0
        async for _ in result.stream_events():
            seen += 1
            if seen >= after:
                break
        result.cancel()
        if result.run_loop_task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await result.run_loop_task
        await asyncio.sleep(0)

    asyncio.run(go())
    s.ground.unfinished.add("s2")
    s.ground.invoked("s2")

    assert [] == s.tel.watch.open_spans()
    assert [] == check(s, captured_logs, prices=None)


# -- failures ---------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_a_tool_that_raises_is_an_error_span(
    mode: str, captured_logs: list[dict[str, Any]]
) -> None:
    s = scenario(
        {
            "c5": [
                reply(("flaky", {"reason": "r"}, "e1"), ("lookup", {"key": "k"}, "e2")),
                reply(text="The archive is down."),
            ]
        }
    )
    result = drive(s, "c5", "go", mode)

    assert [] == check(s, captured_logs)
    assert "The archive is down." == result.final_output
    assert [("flaky", "ConnectionError"), ("lookup", None)] == sorted(
        (r.name, r.raised) for r in s.ground.tool_runs
    )
    spans = {
        (sp.attributes or {}).get(c.ATTR_GEN_AI_TOOL_CALL_ID): sp
        for sp in s.tel.spans()
        if sp.name.startswith("execute_tool ")
    }
    assert "ConnectionError" == (spans["e1"].attributes or {}).get(c.ATTR_ERROR_TYPE)
    assert c.ATTR_ERROR_TYPE not in (spans["e2"].attributes or {})


@pytest.mark.parametrize("mode", MODES)
def test_a_tool_error_the_sdk_raises_ends_the_run(
    mode: str, captured_logs: list[dict[str, Any]]
) -> None:
    s = scenario({"c6": [reply(("fatal", {}, "f1")), reply(text="never")]})
    with pytest.raises(UserError):
        drive(s, "c6", "go", mode)
    s.ground.unfinished.add("c6")
    s.ground.invoked("c6")

    assert [] == s.tel.watch.open_spans()
    assert [] == check(s, captured_logs, prices=None)
    assert [("fatal", "ConnectionError")] == [(r.name, r.raised) for r in s.ground.tool_runs]


# -- 64 concurrent runs ------------------------------------------------------------------------

CONVERSATIONS = [f"p{i}" for i in range(64)]
_OFFLOAD_OF: contextvars.ContextVar[str] = contextvars.ContextVar("truth_offload_of", default="?")


def _script(conv: str) -> list[Reply]:
    return [
        reply(
            ("run_block", {"block": conv}, f"{conv}-1"),
            ("search", {"query": conv}, f"{conv}-2"),
            ("big_report", {"topic": conv}, f"{conv}-3"),
        ),
        reply(text=f"{conv} done"),
        reply((RECALL_TOOL, {"offload_id": f"{conv}-off"}, f"{conv}-4")),
        reply(text="back"),
    ]


def _texts(conv: str) -> list[str]:
    return ["sales please" if int(conv[1:]) % 2 else "archive please", "the report again"]


def _concurrent_layer(tel: Telemetry) -> Any:
    layer = make_layer(tel, offload_id_factory=lambda: f"{_OFFLOAD_OF.get()}-off")
    # 64 interleaved conversations: more model calls than the default idle window
    layer.ledger = OffloadLedger(pricing=PRICING, observer=layer.observer, idle_turns=10_000)
    return layer


def _concurrent() -> Scenario:
    return scenario({conv: _script(conv) for conv in CONVERSATIONS}, layer=_concurrent_layer)


def _sync_conversation(s: Scenario, conv: str) -> None:
    _OFFLOAD_OF.set(conv)
    session = SQLiteSession(conv)
    for text in _texts(conv):
        drive(s, conv, text, "run_sync", session=session)


async def _conversation(s: Scenario, conv: str) -> None:
    _OFFLOAD_OF.set(conv)
    session = SQLiteSession(conv)
    for i, text in enumerate(_texts(conv)):
        await _arun(s, conv, text, ["run", "run_streamed"][i % 2], session=session)
        s.ground.invoked(conv)


def _normalized(ground: Ground) -> dict[str, Any]:
    return {k: re.sub(r"0x[0-9a-f]+", "", repr(v)) for k, v in ground.decisions().items()}


def test_64_concurrent_runs_decide_as_sequential_ones_and_keep_their_traces() -> None:
    sequential = _concurrent()

    async def one_by_one() -> None:
        for conv in CONVERSATIONS:
            await asyncio.create_task(_conversation(sequential, conv))

    asyncio.run(one_by_one())

    concurrent = _concurrent()

    async def together() -> None:
        await asyncio.gather(*(_conversation(concurrent, conv) for conv in CONVERSATIONS))

    with structlog.testing.capture_logs() as logs:
        asyncio.run(together())
        for conv in CONVERSATIONS:
            concurrent.runner.layer.end_conversation(conv)
    for conv in CONVERSATIONS:
        sequential.runner.layer.end_conversation(conv)

    assert _normalized(sequential.ground) == _normalized(concurrent.ground)
    assert 64 == len(concurrent.ground.conversations())
    assert [] == check(concurrent, logs)
    roots = [
        sp
        for sp in concurrent.tel.spans()
        if sp.parent is None and sp.name != c.SPAN_OFFLOAD_SETTLE
    ]
    # one trace per run (two runs per conversation), each rooted in its invoke_agent
    assert 128 == len({sp.context.trace_id for sp in roots}) == len(roots)
    assert {"invoke_agent analyst"} == {sp.name for sp in roots}


def test_16_threads_of_run_sync_decide_as_sequential_ones_and_keep_their_traces() -> None:
    convs = CONVERSATIONS[:16]
    sequential = scenario({conv: _script(conv) for conv in convs}, layer=_concurrent_layer)
    for conv in convs:
        contextvars.copy_context().run(_sync_conversation, sequential, conv)

    threaded = scenario({conv: _script(conv) for conv in convs}, layer=_concurrent_layer)
    barrier = threading.Barrier(len(convs))

    def worker(conv: str) -> None:
        barrier.wait()
        _sync_conversation(threaded, conv)

    with structlog.testing.capture_logs() as logs:
        with ThreadPoolExecutor(len(convs)) as pool:
            list(pool.map(worker, convs))
        for conv in convs:
            threaded.runner.layer.end_conversation(conv)

    assert _normalized(sequential.ground) == _normalized(threaded.ground)
    assert [] == check(threaded, logs)
