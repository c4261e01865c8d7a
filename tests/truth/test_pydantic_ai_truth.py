"""The truth matrix for pydantic-ai's ``Agent`` with ``SeamscopeCapability``.

The models are ``FunctionModel`` s answering from the harness's scripts and
logging each request through :meth:`Ground.model_call`; the tools record
through :meth:`Ground.run_tool`. The agent loop, tool execution (parallel
calls run concurrently: compared by call id), streaming, message history
and structured output are pydantic-ai's own; no network.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import json
import re
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import pytest
import structlog
from pydantic import BaseModel
from pydantic_ai import Agent, ModelRetry, RunContext, Tool
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel
from pydantic_ai.usage import RequestUsage

from seamscope.adapters import RECALL_TOOL
from seamscope.adapters.pydantic_ai import SeamscopeCapability
from seamscope.decisions import OffloadLedger, RolePaletteStage, ToolCallPolicy
from seamscope.telemetry import conventions as c

from ._harness import Call, Ground, Reply, Seen, disagreements, reply
from .test_reference_truth import (
    BIG,
    HAIKU,
    OPUS,
    PALETTE,
    POLICIES,
    PRICES,
    PRICING,
    Telemetry,
    make_layer,
)

# -- glue: pydantic-ai's messages as neutral records -------------------------------------------


def _prompt(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(p for p in content if isinstance(p, str))


def seen(messages: Sequence[ModelMessage]) -> list[Seen]:
    out: list[Seen] = []
    for message in messages:
        if isinstance(message, ModelRequest):
            if message.instructions:
                out.append(Seen("system", message.instructions))
            for part in message.parts:
                if isinstance(part, SystemPromptPart):
                    out.append(Seen("system", part.content))
                elif isinstance(part, UserPromptPart):
                    out.append(Seen("user", _prompt(part.content)))
                elif isinstance(part, ToolReturnPart):
                    failed = getattr(part, "outcome", None) in ("failed", "retried")
                    out.append(
                        Seen(
                            "tool",
                            part.model_response_str(),
                            part.tool_call_id,
                            part.tool_name,
                            "error" if failed else None,
                        )
                    )
                elif isinstance(part, RetryPromptPart) and part.tool_name:
                    out.append(
                        Seen(
                            "tool",
                            part.model_response(),
                            part.tool_call_id,
                            part.tool_name,
                            "error",
                        )
                    )
                elif isinstance(part, RetryPromptPart):
                    out.append(Seen("user", part.model_response()))
        elif isinstance(message, ModelResponse):
            out.append(
                Seen(
                    "assistant",
                    "".join(p.content for p in message.parts if isinstance(p, TextPart)),
                    calls=tuple(
                        Call(p.tool_call_id, p.tool_name, p.args_as_dict())
                        for p in message.parts
                        if isinstance(p, ToolCallPart)
                    ),
                )
            )
    return out


class ScriptedModel(FunctionModel):
    """A ``FunctionModel`` whose streamed responses report the scripted usage too
    (a streamed ``FunctionModel`` otherwise estimates its own): the stream's last
    item is the usage, taken off the stream here."""

    @asynccontextmanager
    async def request_stream(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        async with super().request_stream(*args, **kwargs) as response:
            inner = response._iter

            async def exact() -> AsyncIterator[Any]:
                async for item in inner:
                    if isinstance(item, RequestUsage):
                        response._usage = item
                    else:
                        yield item

            response._iter = exact()
            yield response


def _usage(got: Reply) -> RequestUsage:
    return RequestUsage(input_tokens=got.usage[0], output_tokens=got.usage[1])


def models(
    ground: Ground, hold: set[str] | None = None, names: Sequence[str] = (OPUS, HAIKU)
) -> dict[str, ScriptedModel]:
    """Both models of the scenarios; a streamed text reply of a conversation in
    ``hold`` stops after its first character and never completes."""
    hold = set() if hold is None else hold

    def make(name: str) -> ScriptedModel:
        def ask(messages: list[ModelMessage], info: AgentInfo) -> Reply:
            return ground.model_call(
                name, [t.name for t in info.function_tools], None, seen(messages)
            )

        def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            got = ask(messages, info)
            parts: list[Any] = [TextPart(got.text)] if got.text else []
            parts += [ToolCallPart(x.name, x.args, tool_call_id=x.id) for x in got.calls]
            return ModelResponse(parts=parts, usage=_usage(got))

        async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
            got = ask(messages, info)
            if got.text:
                yield got.text[:1]
                if any(m.text.startswith(f"{h}: ") for h in hold for m in seen(messages)):
                    await asyncio.Event().wait()
                if got.text[1:]:
                    yield got.text[1:]
            for i, x in enumerate(got.calls):
                yield {
                    i: DeltaToolCall(name=x.name, json_args=json.dumps(x.args), tool_call_id=x.id)
                }
            yield _usage(got)

        return ScriptedModel(answer, stream_function=stream, model_name=name)

    return {name: make(name) for name in names}


def tools(ground: Ground) -> list[Tool[Any]]:
    def recorded(
        ctx: RunContext[Any], name: str, args: dict[str, Any], body: Callable[[], str]
    ) -> str:
        return ground.run_tool(name, args, ctx.tool_call_id, lambda a: body(), ctx.conversation_id)

    def run_block(ctx: RunContext[Any], block: str) -> str:
        """Run a saved block."""
        return recorded(ctx, "run_block", {"block": block}, lambda: f"ran {block}")

    def fetch_data(ctx: RunContext[Any], source: str, rows: int = 10) -> str:
        """Read rows."""
        args = {"source": source, "rows": rows}
        return recorded(ctx, "fetch_data", args, lambda: f"{rows} rows of {source}")

    async def search(ctx: RunContext[Any], query: str) -> str:
        """Search the archive."""
        await asyncio.sleep(0)
        return recorded(ctx, "search", {"query": query}, lambda: f"hits for {query}")

    def archive_search(ctx: RunContext[Any], query: str) -> str:
        """Search old archives."""
        return recorded(ctx, "archive_search", {"query": query}, lambda: f"old hits for {query}")

    def big_report(ctx: RunContext[Any], topic: str = "") -> str:
        """The full report."""
        return recorded(ctx, "big_report", {"topic": topic}, lambda: BIG)

    async def lookup(ctx: RunContext[Any], key: str) -> str:
        """Look a key up."""
        return recorded(ctx, "lookup", {"key": key}, lambda: f"found {key}")

    def flaky(ctx: RunContext[Any], reason: str = "") -> str:
        """An archive that is down."""

        def down() -> str:
            raise ConnectionError("archive offline")

        return recorded(ctx, "flaky", {"reason": reason}, down)

    def refused(ctx: RunContext[Any], reason: str = "") -> str:
        """A query the warehouse refuses (the model is asked to retry)."""

        def refuse() -> str:
            raise ModelRetry("the warehouse refused the query")

        return recorded(ctx, "refused", {"reason": reason}, refuse)

    fns = (run_block, fetch_data, search, archive_search, big_report, lookup, flaky, refused)
    return [Tool(fn, takes_ctx=True) for fn in fns]


def agent_for(
    ground: Ground,
    tel: Telemetry,
    *,
    layer: Any = None,
    hold: set[str] | None = None,
    **kwargs: Any,
) -> tuple[Agent[Any, Any], SeamscopeCapability]:
    instances = models(ground, hold)
    layer = layer or make_layer(tel)
    seamscope = SeamscopeCapability(layer, {HAIKU: instances[HAIKU]})
    agent = Agent(
        instances[OPUS],
        name="analyst",
        instructions="You analyse sales.",
        tools=tools(ground),
        capabilities=[seamscope],
        **kwargs,
    )
    return agent, seamscope


class Conversation:
    """One conversation's runs, each given the messages of the one before."""

    def __init__(self, agent: Agent[Any, Any], ground: Ground, conv: str) -> None:
        self.agent, self.ground, self.conv = agent, ground, conv
        self.history: list[ModelMessage] | None = None
        self.output: Any = None

    def _ended(self, messages: list[ModelMessage]) -> None:
        self.history = messages
        self.ground.invoked(self.conv, seen(messages))

    async def arun(self, text: str, mode: str = "run") -> Any:
        prompt = f"{self.conv}: {text}"
        options: dict[str, Any] = {"message_history": self.history}
        if self.history is None:
            options["conversation_id"] = self.conv
        if mode == "run":
            result = await self.agent.run(prompt, **options)
            self._ended(result.all_messages())
            self.output = result.output
        else:
            async with self.agent.run_stream(prompt, **options) as streamed:
                self.output = await streamed.get_output()
            self._ended(streamed.all_messages())
        return self.output

    def run(self, text: str, mode: str = "run") -> Any:
        if mode == "run_sync":
            options: dict[str, Any] = {"message_history": self.history}
            if self.history is None:
                options["conversation_id"] = self.conv
            result = self.agent.run_sync(f"{self.conv}: {text}", **options)
            self._ended(result.all_messages())
            self.output = result.output
            return self.output
        return asyncio.run(self.arun(text, mode))


def check(ground: Ground, tel: Telemetry, logs: Any, **kwargs: Any) -> list[str]:
    kwargs.setdefault("prices", PRICES)
    return disagreements(
        ground,
        tel.spans(),
        watch=tel.watch,
        metrics=tel.reader,
        logs=logs,
        recall_tool=RECALL_TOOL,
        **kwargs,
    )


def cut_off(ground: Ground, conv: str, error: str) -> None:
    """Shim: the conversation's last model call never delivered its reply (its
    stream was abandoned); :meth:`Ground.model_call` logged it as answered."""
    for i in range(len(ground.model_calls) - 1, -1, -1):
        if ground.model_calls[i].conversation == conv:
            ground.model_calls[i] = dataclasses.replace(ground.model_calls[i], raised=error)
            return


MULTI = [
    reply(
        ("run_block", {"block": "sales_q3"}, "a1"),
        ("search", {"query": "q3"}, "a2"),
        ("lookup", {"key": "k"}, "a3"),
    ),
    reply(text="Q3 sales grew."),
]

# -- several tool calls in one message, in every mode ------------------------------------------


@pytest.mark.parametrize("mode", ["run", "run_sync", "run_stream"])
def test_several_calls_in_one_message_in_every_mode(
    mode: str, captured_logs: list[dict[str, Any]]
) -> None:
    """a1 is redirected (run_block -> fetch_data, on haiku), a2's redirect target
    (archive_search) is not routed (the palette drops it), a3 is untouched."""
    tel = Telemetry()
    ground = Ground({"c1": list(MULTI)})
    agent, _ = agent_for(ground, tel)
    assert "Q3 sales grew." == Conversation(agent, ground, "c1").run("How did sales go?", mode)

    assert [] == check(ground, tel, captured_logs)
    assert sorted([("fetch_data", "a1"), ("search", "a2"), ("lookup", "a3")]) == sorted(
        (r.name, r.call_id) for r in ground.tool_runs
    )
    assert [HAIKU, HAIKU] == [m.model for m in ground.model_calls]
    assert 1 == sum(1 for e in captured_logs if e.get("event") == c.LOG_PALETTE_GATE_DROP)


# -- a conversation of several runs: an offload, a later recall --------------------------------


@pytest.mark.parametrize("modes", [("run", "run_sync", "run_stream", "run")])
def test_a_conversation_of_several_runs_offloads_then_recalls(
    modes: tuple[str, ...], captured_logs: list[dict[str, Any]]
) -> None:
    tel = Telemetry()
    ground = Ground(
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
        }
    )
    agent, seamscope = agent_for(
        ground, tel, layer=make_layer(tel, offload_id_factory=lambda: "off-a")
    )
    conversation = Conversation(agent, ground, "c3")
    texts = ["the report", "look up x", "the full report again", "thanks"]
    for text, mode in zip(texts, modes, strict=True):
        conversation.run(text, mode)
    settled = seamscope.layer.end_conversation("c3")

    assert [] == check(ground, tel, captured_logs)
    assert 1 == sum(1 for m in ground.transcripts["c3"] if m.name == RECALL_TOOL)
    assert [("off-a", 4, 1)] == [(s.offload_id, s.turns_carried, s.recalls) for s in settled]


# -- a stream abandoned part way ---------------------------------------------------------------


def _abandon(tel: Telemetry) -> Ground:
    """c2's first request emits three calls; the second streams one character
    of its text and never completes: the caller stops reading there."""
    ground = Ground({"c2": list(MULTI)})
    agent, _ = agent_for(ground, tel, hold={"c2"})

    async def go() -> None:
        async with agent.run_stream("c2: How did sales go?", conversation_id="c2") as streamed:
            async for _ in streamed.stream_text(delta=True):
                break  # the second request is under way: stop reading
        ground.invoked("c2", seen(streamed.all_messages()))

    asyncio.run(asyncio.wait_for(go(), 10))
    ground.unfinished.add("c2")
    cut_off(ground, "c2", "CancelledError")
    return ground


def test_a_stream_abandoned_part_way_ends_every_span() -> None:
    tel = Telemetry()
    ground = _abandon(tel)

    assert [] == tel.watch.open_spans()
    assert sorted(("fetch_data", "search", "lookup")) == sorted(r.name for r in ground.tool_runs)
    agents = [s for s in tel.spans() if s.name.startswith("invoke_agent")]
    assert ["CancelledError"] == [(s.attributes or {}).get(c.ATTR_ERROR_TYPE) for s in agents]


def test_a_stream_abandoned_part_way_tells_the_truth(
    captured_logs: list[dict[str, Any]],
) -> None:
    tel = Telemetry()
    ground = _abandon(tel)

    assert [] == check(ground, tel, captured_logs, prices=None)


# -- tools that fail ---------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["run", "run_stream"])
def test_a_tool_asking_for_a_retry_is_an_error_span(
    mode: str, captured_logs: list[dict[str, Any]]
) -> None:
    tel = Telemetry()
    ground = Ground(
        {
            "c5": [
                reply(("refused", {"reason": "r"}, "e1"), ("lookup", {"key": "k"}, "e2")),
                reply(text="It was refused."),
            ]
        }
    )
    palette = RolePaletteStage(resolver=lambda role: (*PALETTE, "refused"))
    agent, _ = agent_for(ground, tel, layer=make_layer(tel, stages=[palette]))
    Conversation(agent, ground, "c5").run("go", mode)

    assert [] == check(ground, tel, captured_logs)
    assert [("refused", "ModelRetry")] == [(r.name, r.raised) for r in ground.tool_runs if r.raised]
    span = next(s for s in tel.spans() if s.name == "execute_tool refused")
    assert (span.attributes or {}).get(c.ATTR_ERROR_TYPE)


@pytest.mark.parametrize("mode", ["run", "run_sync", "run_stream"])
def test_an_unhandled_tool_error_ends_the_run_with_it(
    mode: str, captured_logs: list[dict[str, Any]]
) -> None:
    tel = Telemetry()
    ground = Ground({"c6": [reply(("flaky", {}, "f1")), reply(text="never")]})
    agent, _ = agent_for(ground, tel)
    conversation = Conversation(agent, ground, "c6")
    with pytest.raises(ConnectionError):
        conversation.run("go", mode)
    ground.unfinished.add("c6")
    ground.invoked("c6")

    assert [] == tel.watch.open_spans()
    assert [] == check(ground, tel, captured_logs, prices=None)
    failed = sorted(
        s.name
        for s in tel.spans()
        if (s.attributes or {}).get(c.ATTR_ERROR_TYPE) == "ConnectionError"
    )
    assert ["execute_tool flaky", "invoke_agent analyst", c.SPAN_ITERATION] == failed


# -- structured output beside a policy for the output tool -------------------------------------


class Weather(BaseModel):
    """The weather in a city."""

    city: str
    celsius: int


GRAB_OUTPUT = ToolCallPolicy(
    "grab_output", match=lambda ctx: True, when_tool="final_result", redirect_to="lookup"
)


@pytest.mark.parametrize("mode", ["run", "run_sync", "run_stream"])
def test_structured_output_is_never_redirected_nor_a_tool_run(
    mode: str, captured_logs: list[dict[str, Any]]
) -> None:
    tel = Telemetry()
    ground = Ground(
        {
            "c7": [
                reply(("run_block", {"block": "weather"}, "w0")),
                reply(("final_result", {"city": "Oslo", "celsius": 4}, "w1")),
            ]
        }
    )
    ground.structured.add("final_result")
    layer = make_layer(tel, policies=[*POLICIES, GRAB_OUTPUT])
    agent, _ = agent_for(ground, tel, layer=layer, output_type=Weather)
    output = Conversation(agent, ground, "c7").run("weather in Oslo?", mode)

    assert [] == check(ground, tel, captured_logs)
    assert Weather(city="Oslo", celsius=4) == output
    assert [("run_block", "w0")] == [(r.name, r.call_id) for r in ground.tool_runs]
    dispatched = [
        (
            (s.attributes or {}).get(c.ATTR_GEN_AI_TOOL_CALL_ID),
            (s.attributes or {}).get(c.ATTR_DISPATCH_STRUCTURED_OUTPUT),
        )
        for s in tel.spans()
        if s.name == c.SPAN_DISPATCH
    ]
    assert [("w0", None), ("w1", True)] == dispatched


# -- 64 concurrent conversations ---------------------------------------------------------------

CONVERSATIONS = [f"p{i}" for i in range(64)]
_CONV: contextvars.ContextVar[str] = contextvars.ContextVar("truth_pydantic_conv", default="?")


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


def _concurrent_agent(ground: Ground, tel: Telemetry) -> tuple[Agent[Any, Any], Any]:
    layer = make_layer(tel, offload_id_factory=lambda: f"{_CONV.get()}-off")
    # 64 conversations interleave more model calls than the default idle window:
    # the ledger would settle an offload as idle before its recall
    layer.ledger = OffloadLedger(pricing=PRICING, observer=layer.observer, idle_turns=10_000)
    agent, _ = agent_for(ground, tel, layer=layer)
    return agent, layer


def _normalized(ground: Ground) -> dict[str, Any]:
    return {k: re.sub(r"0x[0-9a-f]+", "", repr(v)) for k, v in ground.decisions().items()}


async def _one(agent: Agent[Any, Any], ground: Ground, conv: str) -> None:
    _CONV.set(conv)  # this task's context: the offload id factory reads it
    conversation = Conversation(agent, ground, conv)
    for text in _texts(conv):
        await conversation.arun(text)


def test_64_concurrent_runs_decide_as_sequential_ones_and_keep_their_traces() -> None:
    sequential = Ground({conv: _script(conv) for conv in CONVERSATIONS})
    agent, _ = _concurrent_agent(sequential, Telemetry())

    async def in_order() -> None:
        for conv in CONVERSATIONS:
            await asyncio.create_task(_one(agent, sequential, conv))

    asyncio.run(in_order())

    concurrent = Ground({conv: _script(conv) for conv in CONVERSATIONS})
    tel = Telemetry()
    agent, layer = _concurrent_agent(concurrent, tel)

    async def together() -> None:
        await asyncio.gather(*(_one(agent, concurrent, conv) for conv in CONVERSATIONS))

    with structlog.testing.capture_logs() as logs:
        asyncio.run(together())
    for conv in CONVERSATIONS:
        layer.end_conversation(conv)

    assert _normalized(sequential) == _normalized(concurrent)
    assert [] == check(concurrent, tel, logs)
    # every span sits in its own conversation's traces: one invoke_agent root per trace
    spans = tel.spans()
    roots = {
        s.context.trace_id: s for s in spans if s.parent is None and s.name != c.SPAN_OFFLOAD_SETTLE
    }
    assert 128 == len(roots)
    by_id = {s.context.span_id: s for s in spans}

    def root_of(span: Any) -> Any:
        while span.parent is not None:
            span = by_id[span.parent.span_id]
        return span

    for s in spans:
        if s.name == c.SPAN_OFFLOAD_SETTLE:
            continue
        top = root_of(s)
        assert top.name == "invoke_agent analyst"
        own = (s.attributes or {}).get(c.ATTR_GEN_AI_CONVERSATION_ID)
        assert own in (None, (top.attributes or {}).get(c.ATTR_GEN_AI_CONVERSATION_ID))
