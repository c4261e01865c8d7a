"""The truth matrix for a Strands Agents ``Agent`` with ``SeamscopePlugin``.

The models are ``ScriptedModel`` s answering from the harness's scripts and
logging each call they served through :meth:`Ground.model_call` (the model
that served it, the tool specs it was offered, the forced tool, the
messages it got); the tools record through :meth:`Ground.run_tool`. The
agent loop, tool execution (concurrent by default), streaming, the
``ContextOffloader`` and its storage are Strands' own; no network.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.instrumentation.threading import ThreadingInstrumentor
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from pydantic import BaseModel
from strands import Agent, ModelRetryStrategy, tool
from strands.hooks import BeforeToolCallEvent
from strands.middleware import InvokeModelStage, ModelStopReason
from strands.plugins import Plugin
from strands.storage import LocalFileStorage
from strands.telemetry import tracer as strands_tracer
from strands.types.exceptions import EventLoopException, ModelThrottledException
from strands.types.tools import ToolContext
from strands.vended_plugins.context_offloader import ContextOffloader, InMemoryStorage

from adapters._strands_support import Request, ScriptedModel, Step, use
from seamscope.adapters.strands import SeamscopePlugin
from seamscope.cli import main as cli
from seamscope.decisions import ForcedChoiceStage, RolePaletteStage, ToolCallPolicy
from seamscope.decisions.records import OffloadMechanism
from seamscope.loop import RECALL_TOOL
from seamscope.telemetry import conventions as c

from ._harness import Call, Ground, Reply, Seen, conversation_of, disagreements, reply
from .test_reference_truth import (
    BIG,
    HAIKU,
    OPUS,
    PALETTE,
    POLICIES,
    PRICES,
    Telemetry,
    make_layer,
)

MODES = ("call", "invoke_async", "stream")
GENAI_OPERATIONS = ("invoke_agent", "chat", "execute_tool")
OFFLOADER_RETRIEVE = "retrieve_offloaded_content"


@pytest.fixture(autouse=True)
def threading_left_as_found() -> Iterator[None]:
    """Strands' tracer instruments threading for the whole process when it is
    first made: undone after each test, so the tests after these run as
    they would without Strands."""
    before = ThreadingInstrumentor().is_instrumented_by_opentelemetry
    yield
    if not before and ThreadingInstrumentor().is_instrumented_by_opentelemetry:
        ThreadingInstrumentor().uninstrument()


# -- glue: Strands' messages as neutral records --------------------------------------------------


def _text(blocks: Sequence[Mapping[str, Any]]) -> str:
    out: list[str] = []
    for block in blocks:
        if isinstance(block.get("text"), str):
            out.append(block["text"])
        elif "json" in block:
            out.append(json.dumps(block["json"]))
    return "".join(out)


def seen(messages: Sequence[Mapping[str, Any]], system: str | None = None) -> list[Seen]:
    out: list[Seen] = [Seen("system", system)] if system else []
    names: dict[str, str] = {}
    for message in messages:
        blocks = message.get("content") or []
        if message.get("role") == "assistant":
            calls = tuple(
                Call(b["toolUse"]["toolUseId"], b["toolUse"]["name"], b["toolUse"].get("input"))
                for b in blocks
                if "toolUse" in b
            )
            names.update((x.id, x.name) for x in calls)
            out.append(Seen("assistant", _text([b for b in blocks if "text" in b]), calls=calls))
            continue
        text = _text([b for b in blocks if "text" in b])
        if text:
            out.append(Seen("user", text))
        for block in blocks:
            result = block.get("toolResult")
            if result is None:
                continue
            call_id = result.get("toolUseId")
            status = "error" if result.get("status") == "error" else None
            out.append(
                Seen(
                    "tool", _text(result.get("content") or []), call_id, names.get(call_id), status
                )
            )
    return out


def _forced(choice: Any) -> Any:
    if isinstance(choice, Mapping) and isinstance(choice.get("tool"), Mapping):
        return choice["tool"].get("name")
    return None


def _step(got: Reply) -> Step:
    content: list[dict[str, Any]] = [{"text": got.text}] if got.text else []
    content += [use(x.name, dict(x.args), x.id) for x in got.calls]
    return Step(tuple(content), (got.usage[0], got.usage[1], 0))


def models(
    ground: Ground, names: Sequence[str] = (OPUS, HAIKU), hold: set[str] | None = None
) -> dict[str, ScriptedModel]:
    """One model per name, answering the harness's scripts; a streamed text
    reply of a conversation in ``hold`` stops after its first character."""
    hold = set() if hold is None else hold

    def answer(request: Request) -> Step:
        got = ground.model_call(
            request.model,
            request.tools,
            _forced(request.tool_choice),
            seen(request.messages, request.system),
        )
        if got.error is not None:
            return Step(error=got.error)
        return _step(got)

    def held(request: Request) -> bool:
        return conversation_of(seen(request.messages)) in hold

    return {name: ScriptedModel(name, answer, hold=held) for name in names}


def tools(ground: Ground) -> list[Any]:
    def recorded(ctx: ToolContext, name: str, args: dict[str, Any], body: Callable[[], str]) -> str:
        conversation = conversation_of(seen(ctx.agent.messages))
        call_id = ctx.tool_use["toolUseId"]
        return ground.run_tool(name, args, call_id, lambda a: body(), conversation)

    @tool(context=True)
    def run_block(block: str, tool_context: ToolContext) -> str:
        """Run a saved block."""
        return recorded(tool_context, "run_block", {"block": block}, lambda: f"ran {block}")

    @tool(context=True)
    def fetch_data(source: str, tool_context: ToolContext, rows: int = 10) -> str:
        """Read rows."""
        args = {"source": source, "rows": rows}
        return recorded(tool_context, "fetch_data", args, lambda: f"{rows} rows of {source}")

    @tool(context=True)
    async def search(query: str, tool_context: ToolContext) -> str:
        """Search the archive."""
        await asyncio.sleep(0)
        return recorded(tool_context, "search", {"query": query}, lambda: f"hits for {query}")

    @tool(context=True)
    def archive_search(query: str, tool_context: ToolContext) -> str:
        """Search old archives."""
        args = {"query": query}
        return recorded(tool_context, "archive_search", args, lambda: f"old hits for {query}")

    @tool(context=True)
    def big_report(tool_context: ToolContext, topic: str = "") -> str:
        """The full report."""
        return recorded(tool_context, "big_report", {"topic": topic}, lambda: BIG)

    @tool(context=True)
    def small_report(tool_context: ToolContext, topic: str = "") -> str:
        """A short report (1 000 tokens)."""
        body = ("z" * 99 + "\n") * 40
        return recorded(tool_context, "small_report", {"topic": topic}, lambda: body)

    @tool(context=True)
    async def lookup(key: str, tool_context: ToolContext) -> str:
        """Look a key up."""
        return recorded(tool_context, "lookup", {"key": key}, lambda: f"found {key}")

    @tool(context=True)
    def flaky(tool_context: ToolContext, reason: str = "") -> str:
        """An archive that is down."""

        def down() -> str:
            raise ConnectionError("archive offline")

        return recorded(tool_context, "flaky", {"reason": reason}, down)

    return [run_block, fetch_data, search, archive_search, big_report, small_report, lookup, flaky]


def agent(
    ground: Ground,
    conv: str,
    model: ScriptedModel,
    plugins: Sequence[Any] = (),
    **kwargs: Any,
) -> Agent:
    """The analyst of one conversation (its id in the agent's state), the
    harness's tools, no printing."""
    kwargs.setdefault("system_prompt", "You analyse sales.")
    return Agent(
        model=model,
        tools=tools(ground),
        name="analyst",
        callback_handler=None,
        plugins=list(plugins),
        state={"conversation": conv},
        **kwargs,
    )


def conversation_id(agent: Any) -> str:
    """The plugin's conversation id: the one the agent's state names."""
    return str(agent.state.get("conversation"))


class Conversation:
    """One conversation: one Strands agent, its history kept across runs."""

    def __init__(self, agent: Agent, ground: Ground, conv: str) -> None:
        self.agent, self.ground, self.conv = agent, ground, conv
        self.result: Any = None

    def ended(self) -> None:
        self.ground.invoked(self.conv, seen(self.agent.messages))

    async def arun(self, text: str, mode: str = "invoke_async") -> str:
        prompt = f"{self.conv}: {text}"
        if mode == "stream":
            async for event in self.agent.stream_async(prompt):
                if "result" in event:
                    self.result = event["result"]
        else:
            self.result = await self.agent.invoke_async(prompt)
        self.ended()
        return str(self.result).strip()

    def run(self, text: str, mode: str = "call") -> str:
        if mode == "call":
            try:
                self.result = self.agent(f"{self.conv}: {text}")
                return str(self.result).strip()
            finally:
                self.ended()
        return asyncio.run(self.arun(text, mode))


# -- the glue itself, without seamscope: Strands' own run, recorded ------------------------------


def test_the_glue_records_what_strands_ran_without_seamscope() -> None:
    ground = Ground(
        {
            "g1": [
                Reply(calls=(Call("a1", "run_block", {"block": "q3"}),)),
                Reply(text="Ran it."),
            ]
        }
    )
    conversation = Conversation(agent(ground, "g1", models(ground)[OPUS]), ground, "g1")
    assert "Ran it." == conversation.run("run the q3 block")

    assert [(OPUS, "run_block"), (OPUS, None)] == [
        (m.model, m.reply.calls[0].name if m.reply.calls else None) for m in ground.model_calls
    ]
    assert "run_block" in ground.model_calls[0].tools
    assert [("run_block", "a1", "ran q3")] == [
        (r.name, r.call_id, r.output) for r in ground.tool_runs
    ]
    assert [("user", None), ("assistant", None), ("tool", "ran q3"), ("assistant", None)] == [
        (m.role, m.text if m.role == "tool" else None) for m in ground.transcripts["g1"]
    ]


# -- the plugin's runs ----------------------------------------------------------------------------


def agent_for(
    ground: Ground,
    tel: Telemetry,
    conv: str,
    *,
    layer: Any = None,
    hold: set[str] | None = None,
    plugin_options: Mapping[str, Any] | None = None,
    plugins: Sequence[Any] = (),
    **kwargs: Any,
) -> tuple[Conversation, SeamscopePlugin]:
    """The analyst on OPUS with the plugin; the PRE seam's HAIKU is served by
    its own model object."""
    instances = models(ground, hold=hold)
    layer = layer or make_layer(tel)
    options = {
        "models": {HAIKU: instances[HAIKU]},
        "conversation": conversation_id,
        **(plugin_options or {}),
    }
    plugin = SeamscopePlugin(layer, **options)
    made = agent(ground, conv, instances[OPUS], [*plugins, plugin], **kwargs)
    return Conversation(made, ground, conv), plugin


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


def call_id(span: Any) -> Any:
    return (span.attributes or {}).get(c.ATTR_GEN_AI_TOOL_CALL_ID)


def attrs(span: Any) -> dict[str, Any]:
    return dict(span.attributes or {})


MULTI = [
    reply(
        ("run_block", {"block": "sales_q3"}, "a1"),
        ("search", {"query": "q3"}, "a2"),
        ("lookup", {"key": "k"}, "a3"),
    ),
    reply(text="Q3 sales grew."),
]


@pytest.mark.parametrize("mode", MODES)
def test_several_calls_in_one_message_in_every_mode(
    mode: str, captured_logs: list[dict[str, Any]]
) -> None:
    """a1 is redirected (run_block -> fetch_data, on haiku), a2's redirect target
    (archive_search) is not routed (the palette drops it), a3 is untouched."""
    tel = Telemetry()
    ground = Ground({"c1": list(MULTI)})
    conversation, _ = agent_for(ground, tel, "c1")
    assert "Q3 sales grew." == conversation.run("How did sales go?", mode)

    assert [] == check(ground, tel, captured_logs)
    assert sorted([("fetch_data", "a1"), ("search", "a2"), ("lookup", "a3")]) == sorted(
        (r.name, r.call_id) for r in ground.tool_runs
    )
    assert {"source": "sales_q3", "rows": 5} == next(
        r.args for r in ground.tool_runs if r.call_id == "a1"
    )
    assert [HAIKU, HAIKU] == [m.model for m in ground.model_calls]
    assert 1 == sum(1 for e in captured_logs if e.get("event") == c.LOG_PALETTE_GATE_DROP)
    # the tool that really ran names the span, and the message Strands kept
    [redirected] = [
        s for s in tel.spans() if call_id(s) == "a1" and s.name.startswith("execute_tool")
    ]
    assert "execute_tool fetch_data" == redirected.name
    [kept] = [m for m in ground.transcripts["c1"] if m.role == "assistant" and m.calls]
    assert ["fetch_data", "search", "lookup"] == [x.name for x in kept.calls]


class Undo(Plugin):
    """A plugin listed before seamscope whose model-stage middleware (outside
    seamscope's) puts the model's own tool uses back in the answer."""

    name = "undo"

    def init_agent(self, agent: Any) -> None:
        async def undo(context: Any, next_fn: Any) -> Any:
            async for event in next_fn(context):
                if isinstance(event, ModelStopReason):
                    for block in event.message["content"]:
                        use = block.get("toolUse")
                        if use is not None and use["toolUseId"] == "a1":
                            use["name"], use["input"] = "run_block", {"block": "sales_q3"}
                yield event

        agent.add_middleware(InvokeModelStage, undo)


def test_a_redirect_an_outer_middleware_undid_still_runs_through_the_before_tool_hook(
    captured_logs: list[dict[str, Any]],
) -> None:
    """The POST seam redirected a1 (run_block -> fetch_data); a middleware
    outside seamscope's put run_block back in the message Strands keeps: the
    before-tool hook runs the call as the POST seam decided, and the
    execute_tool span names the tool that really ran."""
    tel = Telemetry()
    ground = Ground({"c16": list(MULTI)})
    conversation, _ = agent_for(ground, tel, "c16", plugins=[Undo()])
    assert "Q3 sales grew." == conversation.run("How did sales go?")

    assert [("fetch_data", "a1", {"source": "sales_q3", "rows": 5})] == [
        (r.name, r.call_id, r.args) for r in ground.tool_runs if r.call_id == "a1"
    ]
    [span] = [s for s in tel.spans() if call_id(s) == "a1" and s.name.startswith("execute_tool")]
    [dispatch] = [s for s in tel.spans() if s.name == c.SPAN_DISPATCH and call_id(s) == "a1"]
    assert ("execute_tool fetch_data", "fetch_data") == (
        span.name,
        attrs(dispatch).get(c.ATTR_DISPATCH_FINAL_TOOL),
    )
    assert [] == tel.watch.open_spans()


# -- a conversation of several runs: an offload, a later recall --------------------------------


def test_a_conversation_of_several_runs_offloads_then_recalls(
    captured_logs: list[dict[str, Any]],
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
    layer = make_layer(tel, offload_id_factory=lambda: "off-a")
    conversation, plugin = agent_for(ground, tel, "c3", layer=layer)
    texts = ["the report", "look up x", "the full report again", "thanks"]
    for text, mode in zip(texts, ("call", "invoke_async", "stream", "call"), strict=True):
        conversation.run(text, mode)
    settled = plugin.layer.end_conversation("c3")

    assert [] == check(ground, tel, captured_logs)
    # the recall tool was offered only once a stub was in the prompt
    assert [False, True, True, True, True, True, True] == [
        RECALL_TOOL in m.tools for m in ground.model_calls
    ]
    assert 1 == sum(1 for m in ground.transcripts["c3"] if m.name == RECALL_TOOL)
    assert [("off-a", 4, 1)] == [(s.offload_id, s.turns_carried, s.recalls) for s in settled]
    assert BIG == plugin.stored_output("off-a", "c3")
    # the recall tool is offered and run by the plugin, never registered on the agent
    assert RECALL_TOOL not in conversation.agent.tool_names


def test_a_recall_the_model_makes_up_is_strands_to_answer(
    captured_logs: list[dict[str, Any]],
) -> None:
    """No stub in the prompt: the recall tool is not offered, and a call of it
    is an unknown tool's call, answered by Strands as without seamscope."""
    tel = Telemetry()
    ground = Ground(
        {"c4": [reply((RECALL_TOOL, {"offload_id": "off-x"}, "r1")), reply(text="No.")]}
    )
    conversation, _ = agent_for(ground, tel, "c4")
    conversation.run("bring off-x back")

    assert [] == check(ground, tel, captured_logs)
    [answer] = [m for m in ground.transcripts["c4"] if m.role == "tool"]
    assert (RECALL_TOOL, "error") == (answer.name, answer.status)
    assert "Unknown tool" in answer.text or "not found" in answer.text.lower()
    assert [] == [s.name for s in tel.spans() if s.name.startswith("execute_tool")]


# -- the tools the model saw ----------------------------------------------------------------------


def test_the_model_sees_the_selected_tools_and_a_narrowed_one_it_calls_anyway_runs(
    captured_logs: list[dict[str, Any]],
) -> None:
    """The palette leaves out archive_search: the model is not offered it; a
    call of it anyway is Strands' to run (a registered tool runs whatever
    the model was offered), its dispatch saying it was not offered."""
    tel = Telemetry()
    ground = Ground(
        {"c10": [reply(("archive_search", {"query": "q3"}, "n1")), reply(text="Old hits.")]}
    )
    conversation, _ = agent_for(ground, tel, "c10")
    conversation.run("search the archive")

    assert [] == check(ground, tel, captured_logs, prices=None)
    palette = ("run_block", "fetch_data", "search", "big_report", "lookup", "flaky")
    assert [palette, palette] == [m.tools for m in ground.model_calls]
    assert [("archive_search", "n1")] == [(r.name, r.call_id) for r in ground.tool_runs]
    [dispatch] = [s for s in tel.spans() if s.name == c.SPAN_DISPATCH]
    assert ("archive_search", False) == (
        attrs(dispatch).get(c.ATTR_DISPATCH_EMITTED_TOOL),
        attrs(dispatch).get(c.ATTR_DISPATCH_OFFERED),
    )
    assert ["execute_tool archive_search"] == [
        s.name for s in tel.spans() if s.name.startswith("execute_tool")
    ]


def test_a_forced_tool_is_the_one_the_model_may_call(
    captured_logs: list[dict[str, Any]],
) -> None:
    tel = Telemetry()
    ground = Ground({"c11": [reply(("lookup", {"key": "k"}, "f1")), reply(text="Found.")]})
    forced = ForcedChoiceStage(resolver=lambda ctx: "lookup" if ctx.iteration == 0 else None)
    palette = RolePaletteStage(resolver=lambda role: ("lookup", "search"))
    layer = make_layer(tel, stages=[forced, palette])
    conversation, _ = agent_for(ground, tel, "c11", layer=layer)
    conversation.run("look k up")

    assert [] == check(ground, tel, captured_logs)
    assert [("lookup", ("search", "lookup")), (None, ("search", "lookup"))] == [
        (m.tool_choice, m.tools) for m in ground.model_calls
    ]


# -- structured output beside a policy for its tool ---------------------------------------------


class Weather(BaseModel):
    """The weather in a city."""

    city: str
    celsius: int


GRAB_OUTPUT = ToolCallPolicy(
    "grab_output", match=lambda ctx: True, when_tool="Weather", redirect_to="lookup"
)


@pytest.mark.parametrize("mode", MODES)
def test_structured_output_is_never_redirected_nor_a_tool_run(
    mode: str, captured_logs: list[dict[str, Any]]
) -> None:
    """Strands' structured-output tool (named after the output model) is kept
    whatever the stages decide, never goes through the POST seam and is no
    tool run of seamscope's: its dispatch says structured_output."""
    tel = Telemetry()
    ground = Ground(
        {
            "c7": [
                reply(("run_block", {"block": "weather"}, "w0")),
                reply(("Weather", {"city": "Oslo", "celsius": 4}, "w1")),
            ]
        }
    )
    ground.structured.add("Weather")
    layer = make_layer(tel, policies=[*POLICIES, GRAB_OUTPUT])
    conversation, _ = agent_for(ground, tel, "c7", layer=layer, structured_output_model=Weather)
    conversation.run("weather in Oslo?", mode)

    assert [] == check(ground, tel, captured_logs)
    assert Weather(city="Oslo", celsius=4) == conversation.result.structured_output
    assert [("run_block", "w0")] == [(r.name, r.call_id) for r in ground.tool_runs]
    dispatched = [
        (call_id(s), attrs(s).get(c.ATTR_DISPATCH_STRUCTURED_OUTPUT))
        for s in tel.spans()
        if s.name == c.SPAN_DISPATCH
    ]
    assert [("w0", None), ("w1", True)] == dispatched
    assert "Weather" in ground.model_calls[0].tools


# -- the model that served the call -------------------------------------------------------------


@pytest.mark.parametrize("by", ["models", "agent's own", "not callable here"])
def test_the_model_that_served_names_the_chat_span(
    by: str, captured_logs: list[dict[str, Any]]
) -> None:
    """The PRE seam chooses HAIKU: given in ``models`` it serves the call; when
    the agent's own model is HAIKU it serves it; otherwise the agent's model
    serves it, the chat span names it and the choice is reported as
    unavailable beside it."""
    tel = Telemetry()
    ground = Ground({"c9": [reply(text="Sales grew.")]})
    instances = models(ground)
    own = instances[HAIKU] if by == "agent's own" else instances[OPUS]
    chosen = {HAIKU: instances[HAIKU]} if by == "models" else {}
    plugin = SeamscopePlugin(make_layer(tel), chosen, conversation=conversation_id)
    Conversation(agent(ground, "c9", own, [plugin]), ground, "c9").run("How did sales go?")

    assert [] == check(ground, tel, captured_logs)
    served = OPUS if by == "not callable here" else HAIKU
    assert [served] == [m.model for m in ground.model_calls]
    [chat] = [s for s in tel.spans() if s.name.startswith("chat ")]
    unavailable = attrs(chat).get(c.ATTR_MODEL_CHOSEN_UNAVAILABLE)
    events = [e for e in captured_logs if e.get("event") == c.LOG_MODEL_UNAVAILABLE]
    if by == "not callable here":
        assert (f"chat {OPUS}", HAIKU) == (chat.name, unavailable)
        assert [(HAIKU, OPUS)] == [(e["chosen_model"], e["used_model"]) for e in events]
    else:
        assert (f"chat {HAIKU}", None, []) == (chat.name, unavailable, events)


# -- errors --------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_a_tool_error_is_the_tools_span_and_the_run_goes_on(
    mode: str, captured_logs: list[dict[str, Any]]
) -> None:
    """Strands answers a tool's exception with an error result and goes on:
    the tool's span ends with what it raised, the run ends well."""
    tel = Telemetry()
    ground = Ground({"c6": [reply(("flaky", {}, "f1")), reply(text="It is down.")]})
    conversation, _ = agent_for(ground, tel, "c6")
    assert "It is down." == conversation.run("go", mode)

    assert [] == tel.watch.open_spans()
    assert [] == check(ground, tel, captured_logs, prices=None)
    failed = sorted(
        s.name for s in tel.spans() if attrs(s).get(c.ATTR_ERROR_TYPE) == "ConnectionError"
    )
    assert ["execute_tool flaky"] == failed


class Overloaded(Exception):
    """The provider's answer to one call too many."""


@pytest.mark.parametrize("mode", MODES)
def test_a_model_error_ends_its_chat_span_and_the_run_with_it(
    mode: str, captured_logs: list[dict[str, Any]]
) -> None:
    tel = Telemetry()
    ground = Ground(
        {"c8": [reply(("lookup", {"key": "k"}, "m1")), Reply(error=Overloaded("try later"))]}
    )
    conversation, _ = agent_for(ground, tel, "c8")
    # Strands raises a later cycle's error wrapped, raised from it (as without seamscope)
    with pytest.raises(EventLoopException) as raised:
        conversation.run("look k up", mode)
    assert isinstance(raised.value.__cause__, Overloaded)
    ground.unfinished.add("c8")

    assert [] == tel.watch.open_spans()
    assert [] == check(ground, tel, captured_logs, prices=None)
    failed = sorted(s.name for s in tel.spans() if attrs(s).get(c.ATTR_ERROR_TYPE) == "Overloaded")
    assert [f"chat {OPUS}", "invoke_agent analyst", c.SPAN_ITERATION] == failed


def test_a_throttled_call_retried_by_strands_fails_its_chat_span_and_the_run_goes_on(
    captured_logs: list[dict[str, Any]],
) -> None:
    """Strands' retry strategy calls the model again after a throttle: the
    throttled call's chat span fails, the retried one answers, the run ends
    well."""
    tel = Telemetry()
    ground = Ground(
        {
            "c14": [
                Reply(error=ModelThrottledException("slow down")),
                reply(("lookup", {"key": "k"}, "t1")),
                reply(text="Found."),
            ]
        }
    )
    retry = ModelRetryStrategy(max_attempts=2, initial_delay=0, max_delay=0)
    conversation, _ = agent_for(ground, tel, "c14", retry_strategy=retry)
    assert "Found." == conversation.run("look k up")

    assert [] == tel.watch.open_spans()
    assert [] == check(ground, tel, captured_logs, prices=None)
    failed = [s.name for s in tel.spans() if attrs(s).get(c.ATTR_ERROR_TYPE)]
    assert [f"chat {OPUS}"] == failed


def test_an_agent_run_by_a_tool_is_a_nested_run_of_the_callers_conversation() -> None:
    """A tool that runs another agent (with the same plugin): the helper's run
    sits under the tool's execute_tool span, in the caller's conversation
    and trace, its spans naming the helper."""
    tel = Telemetry()
    ground = Ground(
        {
            "c15": [
                reply(("ask_helper", {"question": "q3"}, "h1")),
                reply(text="The helper says q3 grew."),
                reply(text="Done."),
            ]
        }
    )
    instances = models(ground)
    plugin = SeamscopePlugin(make_layer(tel), conversation=conversation_id)
    helper = Agent(model=instances[HAIKU], name="helper", callback_handler=None, plugins=[plugin])

    @tool
    def ask_helper(question: str) -> str:
        """Ask the helper agent."""
        return str(helper(f"c15: {question}")).strip()

    made = Agent(
        model=instances[OPUS],
        tools=[ask_helper],
        name="analyst",
        callback_handler=None,
        plugins=[plugin],
        state={"conversation": "c15"},
    )
    assert "Done." == Conversation(made, ground, "c15").run("ask the helper")

    assert [] == tel.watch.open_spans()
    spans = tel.spans()
    by_id = {s.context.span_id: s for s in spans}
    assert 1 == len({s.context.trace_id for s in spans if s.name != c.SPAN_OFFLOAD_SETTLE})
    [nested] = [s for s in spans if s.name == "invoke_agent helper"]
    assert nested.parent is not None
    assert "execute_tool ask_helper" == by_id[nested.parent.span_id].name
    assert {"c15"} == {
        attrs(s).get(c.ATTR_GEN_AI_CONVERSATION_ID)
        for s in spans
        if s.name in (c.SPAN_ITERATION, c.SPAN_SELECT_TOOLS, c.SPAN_SEAM_PRE_MODEL)
    }
    under = [
        attrs(s).get(c.ATTR_GEN_AI_AGENT_NAME)
        for s in spans
        if s.name == c.SPAN_ITERATION and s.parent and s.parent.span_id == nested.context.span_id
    ]
    assert ["helper"] == under
    assert [OPUS, HAIKU, OPUS] == [m.model for m in ground.model_calls]
    assert [f"chat {OPUS}", f"chat {HAIKU}", f"chat {OPUS}"] == [
        s.name for s in sorted(spans, key=lambda s: s.start_time or 0) if s.name.startswith("chat")
    ]


# -- a stream abandoned part way ---------------------------------------------------------------


def cut_off(ground: Ground, conv: str, error: str) -> None:
    """Shim: the conversation's last model call never delivered its reply (its
    stream was abandoned); :meth:`Ground.model_call` logged it as answered."""
    for i in range(len(ground.model_calls) - 1, -1, -1):
        if ground.model_calls[i].conversation == conv:
            ground.model_calls[i] = dataclasses.replace(ground.model_calls[i], raised=error)
            return


def _abandon(tel: Telemetry) -> Ground:
    """c2's first call emits three calls; the second streams one character of
    its text: the caller stops reading there."""
    ground = Ground({"c2": list(MULTI)})
    conversation, _ = agent_for(ground, tel, "c2", hold={"c2"})

    async def go() -> None:
        events = conversation.agent.stream_async("c2: How did sales go?")
        async with contextlib.aclosing(events) as stream:
            async for event in stream:
                if event.get("data"):
                    break  # the second call is under way: stop reading
        conversation.ended()

    asyncio.run(asyncio.wait_for(go(), 10))
    ground.unfinished.add("c2")
    cut_off(ground, "c2", "CancelledError")
    return ground


def test_a_stream_abandoned_part_way_ends_every_span(
    captured_logs: list[dict[str, Any]],
) -> None:
    tel = Telemetry()
    ground = _abandon(tel)

    assert [] == tel.watch.open_spans()
    assert sorted(("fetch_data", "search", "lookup")) == sorted(r.name for r in ground.tool_runs)
    agents = [s for s in tel.spans() if s.name.startswith("invoke_agent")]
    assert [c.ABANDONED_RUN] == [attrs(s).get(c.ATTR_ERROR_TYPE) for s in agents]
    assert [] == check(ground, tel, captured_logs, prices=None)


# -- with Strands' own tracing: one trace, no inference span twice ---------------------------------


@pytest.fixture
def strands_traced(monkeypatch: pytest.MonkeyPatch) -> Telemetry:
    """Strands' own spans recorded by the test's provider (the tracer of its
    process-wide Tracer, replaced for this test only), beside seamscope's."""
    tel = Telemetry()
    own = strands_tracer.get_tracer()
    monkeypatch.setattr(own, "tracer", tel.tracer_provider.get_tracer(strands_tracer.__name__))
    return tel


def _scope(span: Any) -> str:
    return span.instrumentation_scope.name if span.instrumentation_scope else ""


@pytest.mark.parametrize("mode", MODES)
def test_with_strands_tracing_seamscope_joins_its_trace_and_records_no_genai_span(
    mode: str, strands_traced: Telemetry
) -> None:
    tel = strands_traced
    ground = Ground({"c12": list(MULTI)})
    conversation, _ = agent_for(ground, tel, "c12")
    assert "Q3 sales grew." == conversation.run("How did sales go?", mode)

    spans = tel.spans()
    theirs = [s for s in spans if _scope(s) == strands_tracer.__name__]
    mine = [s for s in spans if _scope(s) != strands_tracer.__name__]
    assert [] == tel.watch.open_spans()
    assert 1 == len({s.context.trace_id for s in spans})
    # the agent, inference and tool spans are Strands' alone
    assert [] == [s.name for s in mine if s.name.split(" ")[0] in GENAI_OPERATIONS]
    assert 2 == len([s for s in theirs if s.name.startswith("chat")])
    assert ["execute_tool fetch_data", "execute_tool lookup", "execute_tool search"] == sorted(
        s.name for s in theirs if s.name.startswith("execute_tool")
    )
    # seamscope's iterations are children of Strands' event-loop cycles
    by_id = {s.context.span_id: s for s in spans}
    iterations = [s for s in mine if s.name == c.SPAN_ITERATION]
    assert ["execute_event_loop_cycle"] * 2 == [
        by_id[s.parent.span_id].name for s in iterations if s.parent is not None
    ]
    assert sorted([("fetch_data", "a1"), ("search", "a2"), ("lookup", "a3")]) == sorted(
        (r.name, r.call_id) for r in ground.tool_runs
    )


def test_with_strands_tracing_the_ledger_still_prices_every_model_call(
    strands_traced: Telemetry,
) -> None:
    """No chat span of seamscope's, yet each model call's usage reaches the
    ledger: the offload settles as without Strands' tracing."""

    def settle(tel: Telemetry) -> list[Any]:
        ground = Ground(
            {
                "c13": [
                    reply(("big_report", {"topic": "q3"}, "b1"), usage=(2_000, 40)),
                    reply(text="Stored.", usage=(2_100, 30)),
                    reply((RECALL_TOOL, {"offload_id": "off-j"}, "r1"), usage=(2_400, 60)),
                    reply(text="Here it is.", usage=(22_000, 25)),
                ]
            }
        )
        layer = make_layer(tel, offload_id_factory=lambda: "off-j")
        conversation, plugin = agent_for(ground, tel, "c13", layer=layer)
        for text in ("the report", "the full report again"):
            conversation.run(text)
        return [
            (s.offload_id, s.turns_carried, s.recalls, s.realized_net_saving)
            for s in plugin.layer.end_conversation("c13")
        ]

    joined = settle(strands_traced)
    mine = [s for s in strands_traced.spans() if _scope(s) != strands_tracer.__name__]
    assert [] == [s.name for s in mine if s.name.startswith("chat")]
    assert settle(Telemetry()) == joined
    assert 1 == len(joined)


# -- Strands' ContextOffloader: its offloads priced, and gated when asked -----------------------


def _offloader(**kwargs: Any) -> ContextOffloader:
    return ContextOffloader(storage=InMemoryStorage(), **kwargs)


def _tool_texts(ground: Ground, conv: str, call: str) -> list[str | None]:
    """What each model call of ``conv`` received as the answer to ``call``."""
    return [
        next((m.text for m in mc.messages if m.role == "tool" and m.call_id == call), None)
        for mc in ground.calls_of(conv)
    ]


def test_the_offloaders_offload_is_a_compaction_priced_by_hand(
    captured_logs: list[dict[str, Any]],
) -> None:
    """Strands' ContextOffloader replaces big_report's 20 000 tokens by its
    preview; two later model calls carry the preview, the second reads the
    whole content back with retrieve_offloaded_content (the last call holds
    preview and content: it saves nothing). The settlement,
    priced here from what the models really received: each carrying call
    saves the removed tokens and pays the preview's at its input rate; the
    retrieval pays its answer's tokens and the emitting call's output."""
    tel = Telemetry()
    # InMemoryStorage names the first block it keeps mem_1_<call id>_0
    reference = "mem_1_b1_0"
    script = [
        reply(("big_report", {"topic": "q3"}, "b1"), usage=(2_000, 40)),
        reply(("lookup", {"key": "x"}, "l1"), usage=(2_100, 30)),
        reply(("retrieve_offloaded_content", {"reference": reference}, "g1"), usage=(2_200, 60)),
        reply(text="All read.", usage=(22_000, 25)),
    ]
    ground = Ground({"c20": script})
    conversation, plugin = agent_for(ground, tel, "c20", plugins=[_offloader()])
    assert "All read." == conversation.run("the report, then x, then all of it")
    [settled] = plugin.layer.end_conversation("c20")

    assert [] == check(ground, tel, captured_logs, offload_threshold_chars=10**9)
    texts = _tool_texts(ground, "c20", "b1")
    preview = texts[1]
    assert preview is not None and preview != BIG and preview.startswith("[Offloaded: ")
    assert [None, preview, preview, preview] == texts
    assert reference in preview
    [retrieved] = [r for r in ground.calls_of("c20")[3].messages if r.call_id == "g1"]
    assert BIG.rstrip("\n") == retrieved.text.rstrip("\n")
    opus_in, opus_out = PRICES.rates[OPUS]
    # the calls that held the preview and not the content: the second and the third
    saved = 2 * len(BIG) / 4 * opus_in
    carried = 2 * len(preview) / 4 * opus_in
    recall = len(retrieved.text) / 4 * opus_in + 60 * opus_out
    assert (OffloadMechanism.STRANDS_CONTEXT_OFFLOAD, 2, 1) == (
        settled.mechanism,
        settled.turns_carried,
        settled.recalls,
    )
    assert pytest.approx(saved) == float(settled.realized_savings)
    assert pytest.approx(carried) == float(settled.stub_carry_cost)
    assert pytest.approx(recall) == float(settled.recall_cost)
    [compaction] = [s for s in tel.spans() if s.name == c.SPAN_COMPACTION]
    assert ("strands_context_offload", ["b1"]) == (
        attrs(compaction).get(c.ATTR_OFFLOAD_MECHANISM),
        list(attrs(compaction).get(c.ATTR_COMPACTION_TOOL_CALL_IDS) or ()),
    )
    # seamscope's own gate never saw the output the offloader took
    assert [] == [s for s in tel.spans() if s.name == c.SPAN_OFFLOAD_GATE]


def test_the_opt_in_gate_keeps_an_offload_that_would_lose_money_and_lets_one_that_saves(
    captured_logs: list[dict[str, Any]],
) -> None:
    """With ``gate_offloader``: small_report (1 000 tokens, a 600-token limit)
    would save less than its preview and the expected recall cost: it stays
    whole in the prompt; big_report (20 000 tokens) saves: the offloader's
    preview replaces it. Each decision and why on a gate span."""
    tel = Telemetry()
    ground = Ground(
        {
            "c21": [
                reply(("small_report", {}, "s1"), ("big_report", {}, "b1")),
                reply(text="Read both."),
            ]
        }
    )
    offloader = _offloader(max_result_tokens=600, preview_tokens=300)
    conversation, plugin = agent_for(
        ground, tel, "c21", plugins=[offloader], plugin_options={"gate_offloader": True}
    )
    conversation.run("both reports")
    settled = plugin.layer.end_conversation("c21")

    small = next(r.output for r in ground.tool_runs if r.name == "small_report")
    texts = {x: _tool_texts(ground, "c21", x)[1] for x in ("s1", "b1")}
    assert small == texts["s1"]  # kept whole
    assert texts["b1"] is not None and texts["b1"].startswith("[Offloaded: ")
    gates = {call_id(s): attrs(s) for s in tel.spans() if s.name == c.SPAN_OFFLOAD_GATE}
    assert {"s1": (False, "net_not_positive"), "b1": (True, "net_positive")} == {
        k: (a.get(c.ATTR_OFFLOAD_FIRE), a.get(c.ATTR_OFFLOAD_REASON_CODE)) for k, a in gates.items()
    }
    # each span names whose offload it decided: the offloader's, not the gate's own
    assert {"strands_context_offload"} == {a.get(c.ATTR_OFFLOAD_MECHANISM) for a in gates.values()}
    assert [("strands_context_offload:b1", 1)] == [(s.offload_id, s.turns_carried) for s in settled]


def test_without_the_opt_in_the_offloader_acts_alone_and_is_only_priced() -> None:
    tel = Telemetry()
    ground = Ground({"c22": [reply(("small_report", {}, "s1")), reply(text="Read it.")]})
    offloader = _offloader(max_result_tokens=600, preview_tokens=300)
    conversation, plugin = agent_for(ground, tel, "c22", plugins=[offloader])
    conversation.run("the small report")
    [settled] = plugin.layer.end_conversation("c22")

    assert (_tool_texts(ground, "c22", "s1")[1] or "").startswith("[Offloaded: ")
    assert [] == [s for s in tel.spans() if s.name == c.SPAN_OFFLOAD_GATE]
    # priced as it is: a loss (the preview and the horizon's recall prior are not paid
    # back by 1 000 tokens for one carried call)
    assert (1, 0) == (settled.turns_carried, settled.recalls)


def test_seamscopes_recall_answer_is_never_offloaded_by_the_offloader(
    captured_logs: list[dict[str, Any]],
) -> None:
    """The offloader is told to leave big_report alone: seamscope's gate offloads
    it; the model recalls it; the offloader would take the recall's 20 000-token
    answer too: the answer reaches the model whole, as the ledger charges it,
    and no offload of it is priced."""
    tel = Telemetry()
    ground = Ground(
        {
            "c24": [
                reply(("big_report", {"topic": "q3"}, "b1"), usage=(2_000, 40)),
                reply((RECALL_TOOL, {"offload_id": "off-r"}, "r1"), usage=(2_100, 60)),
                reply(text="Here it is.", usage=(22_000, 25)),
            ]
        }
    )
    offloader = _offloader(
        should_offload=lambda tool_name, token_count, **kw: tool_name != "big_report"
    )
    layer = make_layer(tel, offload_id_factory=lambda: "off-r")
    conversation, plugin = agent_for(ground, tel, "c24", layer=layer, plugins=[offloader])
    conversation.run("the report, all of it")
    [settled] = plugin.layer.end_conversation("c24")

    assert [] == check(ground, tel, captured_logs)
    [answer] = [m for m in ground.model_calls[2].messages if m.call_id == "r1"]
    assert BIG == answer.text
    assert ("off-r", 1, 1) == (settled.offload_id, settled.turns_carried, settled.recalls)
    assert [] == [s for s in tel.spans() if s.name == c.SPAN_COMPACTION]


def test_seamscopes_own_failures_are_contained_and_the_run_is_strands_own(
    captured_logs: list[dict[str, Any]],
) -> None:
    """A role and a scope callable that raise: each failure is a
    seamscope.telemetry.error event, the run ends as without them."""

    def boom(agent: Any) -> Any:
        raise RuntimeError("adopter bug")

    tel = Telemetry()
    ground = Ground({"c25": [reply(("lookup", {"key": "k"}, "k1")), reply(text="Found.")]})
    options = {"role": boom, "scope": boom}
    conversation, _ = agent_for(ground, tel, "c25", plugin_options=options)
    assert "Found." == conversation.run("look k up")

    assert [] == check(ground, tel, captured_logs, prices=None, telemetry_errors=3)
    assert [("lookup", "k1")] == [(r.name, r.call_id) for r in ground.tool_runs]
    hooks = sorted(e.get("hook") for e in captured_logs if e.get("event") == c.LOG_TELEMETRY_ERROR)
    assert ["strands.role", "strands.role", "strands.scope"] == hooks


def test_the_offloaders_offload_is_priced_on_any_worker_through_a_shared_store(
    tmp_path: Path,
) -> None:
    """Two workers (a layer and a plugin each) on one SQLite offload store and
    one shared storage for the offloader: the offload made on the first, its
    preview carried on both, its content read back on the second (which never
    saw it made) is its recall there; settled once, with both workers'
    accounts, priced here by hand."""
    url = f"sqlite:///{tmp_path / 'offloads.db'}"
    storage = str(tmp_path / "artifacts")
    tel = Telemetry()
    ground = Ground(
        {
            "c26": [
                reply(("big_report", {"topic": "q3"}, "b1"), usage=(2_000, 40)),
                reply(text="Stored.", usage=(2_100, 30)),
                reply(
                    ("retrieve_offloaded_content", {"reference": "b1_0"}, "g1"), usage=(2_200, 60)
                ),
                reply(text="All read.", usage=(22_000, 25)),
            ]
        }
    )
    instances = models(ground)

    def worker(messages: list[Any]) -> tuple[Agent, Any]:
        layer = make_layer(tel, offload_store=url)
        plugin = SeamscopePlugin(layer, conversation=conversation_id)
        offloader = ContextOffloader(storage=LocalFileStorage(storage))
        made = agent(ground, "c26", instances[OPUS], [offloader, plugin], messages=messages)
        return made, layer

    first, first_layer = worker([])
    Conversation(first, ground, "c26").run("the report")
    second, second_layer = worker(list(first.messages))
    Conversation(second, ground, "c26").run("all of it")
    [settled] = second_layer.end_conversation("c26")

    assert [] == first_layer.end_conversation("c26")  # settled once, fleet-wide
    preview = _tool_texts(ground, "c26", "b1")[1] or ""
    assert "b1_0" in preview
    [read] = [m.text for m in ground.model_calls[3].messages if m.call_id == "g1"]
    assert BIG == read
    opus_in, opus_out = PRICES.rates[OPUS]
    assert (OffloadMechanism.STRANDS_CONTEXT_OFFLOAD, 2, 1) == (
        settled.mechanism,
        settled.turns_carried,
        settled.recalls,
    )
    assert pytest.approx(2 * len(BIG) / 4 * opus_in) == float(settled.realized_savings)
    assert pytest.approx(2 * len(preview) / 4 * opus_in) == float(settled.stub_carry_cost)
    assert pytest.approx(len(read) / 4 * opus_in + 60 * opus_out) == float(settled.recall_cost)


def test_a_tool_an_interrupt_stops_is_cancelled_and_runs_in_the_resumed_run() -> None:
    """A hook of the user's asks a human before lookup runs (a Strands
    interrupt): the first run's execute_tool span says the call was
    cancelled, never that it answered; the resumed run runs the stored call
    (before any model call) in an iteration of its own, its span answered."""

    def approve(event: BeforeToolCallEvent) -> None:
        event.interrupt("approve", reason="needs a human")

    tel = Telemetry()
    ground = Ground({"c27": [reply(("lookup", {"key": "k"}, "k1")), reply(text="Found.")]})
    conversation, _ = agent_for(ground, tel, "c27")
    conversation.agent.add_hook(approve, BeforeToolCallEvent)
    first = conversation.agent("c27: look k up")
    assert ("interrupt", []) == (first.stop_reason, ground.tool_runs)
    [cancelled] = [s for s in tel.spans() if s.name == "execute_tool lookup"]
    assert c.TOOL_CALL_CANCELLED == attrs(cancelled).get(c.ATTR_ERROR_TYPE)

    answer = {"interruptResponse": {"interruptId": first.interrupts[0].id, "response": "yes"}}
    second = conversation.agent([answer])

    assert "end_turn" == second.stop_reason
    assert [("lookup", "k1")] == [(r.name, r.call_id) for r in ground.tool_runs]
    assert [] == tel.watch.open_spans()
    spans = tel.spans()
    by_id = {s.context.span_id: s for s in spans}
    ran = [s for s in spans if s.name == "execute_tool lookup" and s is not cancelled]
    assert [(None, c.SPAN_ITERATION)] == [
        (attrs(s).get(c.ATTR_ERROR_TYPE), by_id[s.parent.span_id].name)
        for s in ran
        if s.parent is not None
    ]
    agents = [s for s in spans if s.name.startswith("invoke_agent")]
    assert [None, None] == [attrs(s).get(c.ATTR_ERROR_TYPE) for s in agents]


# -- explain reads the ContextOffloader's offload back ------------------------------------------


def test_explain_and_whatif_read_the_offloaders_offload_and_its_recall_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tel = Telemetry()
    path = tmp_path / "trace.jsonl"
    tel.tracer_provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(str(path))))
    ground = Ground(
        {
            "c23": [
                reply(("big_report", {"topic": "q3"}, "b1")),
                reply(
                    (
                        "retrieve_offloaded_content",
                        {"reference": "mem_1_b1_0", "line_range": {"start": 1, "end": 20}},
                        "g1",
                    )
                ),
                reply(text="Read."),
            ]
        }
    )
    # the offloader's retrieval tool is a tool like any: the palette includes it
    palette = RolePaletteStage(resolver=lambda role: (*PALETTE, OFFLOADER_RETRIEVE))
    layer = make_layer(tel, stages=[palette])
    conversation, plugin = agent_for(ground, tel, "c23", layer=layer, plugins=[_offloader()])
    conversation.run("the report")
    [settled] = plugin.layer.end_conversation("c23")
    tel.tracer_provider.force_flush()

    preview = _tool_texts(ground, "c23", "b1")[1] or ""
    capsys.readouterr()
    assert 0 == cli(["explain", str(path), "--tool", "big_report"])
    lines = [line for line in capsys.readouterr().out.splitlines() if "iteration" in line]
    story = (
        "selected; output of call b1 taken out of the prompt by ContextOffloader (compaction "
        f"strands_context_offload:b1: 20000 tokens, {len(preview) / 4:g} kept); "
        "emitted and dispatched; executed"
    )
    assert [
        f"├── iteration 0  big_report: {story}",
        "├── iteration 1  big_report: selected; not called by the model",
        "└── iteration 2  big_report: selected; not called by the model",
    ] == lines
    # the retrieval: a recall of the offload, at the tokens it really brought back
    [read] = [m.text for m in ground.model_calls[2].messages if m.call_id == "g1"]
    assert 0 == cli(["explain", str(path), "--tool", "retrieve_offloaded_content"])
    lines = [line for line in capsys.readouterr().out.splitlines() if "iteration" in line]
    assert (
        "├── iteration 1  retrieve_offloaded_content: selected; emitted and dispatched; executed; "
        f"call g1 recalled strands_context_offload:b1 ({len(read) / 4:g} tokens read back)"
    ) == lines[1]
    # whatif re-settles the conversation from the trace alone, as the ledger did
    assert 0 == cli(["whatif", str(path)])
    out = capsys.readouterr().out
    assert f"c23: realized {_usd(settled.realized_net_saving)} → counterfactual" in out
    assert "(exact)" in out


def _usd(amount: Any) -> str:
    sign = "+" if amount >= 0 else "−"
    return f"{sign}${abs(amount):.4f}"


def test_whatif_answers_what_gating_the_offloader_would_have_saved(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Observed only (``gate_offloader`` off), the ContextOffloader at a
    600-token limit with a 300-token preview offloads big_report (b1, 20 000
    tokens) and small_report (s1, 1 000 tokens). Calls (input, output
    tokens):

    1. (2 000, 40): emits b1 (offloaded).
    2. (2 100, 30): b1's preview carried; emits s1 (offloaded).
    3. (2 200, 60): both previews carried; retrieves s1's content (g1: a
       recall of s1 with this call's 60 output tokens).
    4. (4 000, 25): b1's preview carried; s1's content is back; answers.

    ``whatif --set gate_offloader=true``: the gate (the layer's H=5, p=0.5,
    the preview as the stub, no size threshold) prices s1 as a loss (1 000
    tokens cannot pay for its preview and the expected retrieval) and b1 as
    a saving: s1 stays in the prompt, its retrieval never happens, b1
    settles as recorded. Counterfactual = b1's realized net; the difference
    is minus s1's realized net."""
    tel = Telemetry()
    path = tmp_path / "offloader-whatif.jsonl"
    tel.tracer_provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(str(path))))
    # InMemoryStorage names the first block of its n-th offload mem_<n>_<call id>_0
    ground = Ground(
        {
            "c25": [
                reply(("big_report", {"topic": "q3"}, "b1"), usage=(2_000, 40)),
                reply(("small_report", {}, "s1"), usage=(2_100, 30)),
                reply((OFFLOADER_RETRIEVE, {"reference": "mem_2_s1_0"}, "g1"), usage=(2_200, 60)),
                reply(text="Read.", usage=(4_000, 25)),
            ]
        }
    )
    offloader = _offloader(max_result_tokens=600, preview_tokens=300)
    conversation, plugin = agent_for(ground, tel, "c25", plugins=[offloader])
    assert "Read." == conversation.run("both reports")
    settled = {s.offload_id: s for s in plugin.layer.end_conversation("c25")}
    tel.tracer_provider.force_flush()

    # ground truth, from what the models received
    big_texts = _tool_texts(ground, "c25", "b1")
    small_texts = _tool_texts(ground, "c25", "s1")
    pb, ps = big_texts[1], small_texts[2]
    assert pb is not None and pb.startswith("[Offloaded: ") and [pb, pb, pb] == big_texts[1:]
    assert ps is not None and ps.startswith("[Offloaded: ") and [ps, ps] == small_texts[2:]
    small = next(r.output for r in ground.tool_runs if r.name == "small_report")
    [read] = [m.text for m in ground.calls_of("c25")[3].messages if m.call_id == "g1"]
    assert read is not None and small.rstrip("\n") == read.rstrip("\n")
    rate_in, rate_out = (Decimal(repr(r)) for r in PRICES.rates[OPUS])
    # b1: its preview carried by calls 2, 3 and 4, never read back
    net_b = 3 * (Decimal(len(BIG)) - len(pb)) / 4 * rate_in
    # s1: its preview carried by call 3 only (call 4 holds the content), and the
    # retrieval: its answer's tokens in, call 3's 60 output tokens
    net_s = (Decimal(len(small)) - len(ps)) / 4 * rate_in - (
        Decimal(len(read)) / 4 * rate_in + 60 * rate_out
    )
    one, two = settled["strands_context_offload:b1"], settled["strands_context_offload:s1"]
    assert (3, 0, 1, 1) == (one.turns_carried, one.recalls, two.turns_carried, two.recalls)
    assert float(net_b) == pytest.approx(float(one.realized_net_saving), abs=1e-12)
    assert float(net_s) == pytest.approx(float(two.realized_net_saving), abs=1e-12)
    assert net_s < 0 < net_b

    capsys.readouterr()
    assert 0 == cli(["whatif", str(path), "--set", "gate_offloader=true", "--format", "json"])
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]
    (line,) = [o for o in out if o.get("conversation_id") == "c25"]
    (total,) = [o["total"] for o in out if "total" in o]
    assert (2, ["strands_context_offload:s1"], 0, []) == (
        line["offloader_gated"],
        line["offloader_kept"],
        line["evictions_gated"],
        line["evictions_kept"],
    )
    realized = one.realized_net_saving + two.realized_net_saving
    assert Decimal(line["realized_usd"]) == realized
    assert Decimal(line["counterfactual_exact_usd"]) == one.realized_net_saving
    assert Decimal(total["difference_usd"]) == -two.realized_net_saving
    assert float(Decimal(total["difference_usd"])) == pytest.approx(float(-net_s), abs=1e-12)
    assert (2, 1, True, False) == (
        total["offloader_gated"],
        total["offloader_kept"],
        total["config"]["gate_offloader"],
        total["config"]["gate_evictions"],
    )
    assert 0 == cli(["whatif", str(path), "--set", "gate_offloader=true"])
    text = capsys.readouterr().out
    assert (
        "gating Strands' ContextOffloader: 1 of 2 offloads priced as a loss, kept in the prompt"
        in text
    )
    assert "kept strands_context_offload:s1" in text
    assert "gate_offloader=true" in text
    # gating Deep Agents' evictions leaves the offloader's offloads as recorded
    assert 0 == cli(["whatif", str(path), "--set", "gate_evictions=true", "--format", "json"])
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]
    (total,) = [o["total"] for o in out if "total" in o]
    assert (0, 0, "0") == (
        total["offloader_gated"],
        total["offloader_kept"],
        total["difference_usd"],
    )
    # a calibrated prior for the tool decides its offloads too, counted once per offload
    priors = tmp_path / "priors.toml"
    priors.write_text(
        'format = 1\nversion = "t"\nmin_offloads = 1\n[[priors]]\ntool = "small_report"\n'
        f'model = "{OPUS}"\nhorizon = 5\nrecall_probability = 0.5\noffloads = 3\n',
        encoding="utf-8",
    )
    assert 0 == cli(
        [
            "whatif",
            str(path),
            "--set",
            "gate_offloader=true",
            "--priors",
            str(priors),
            "--format",
            "json",
        ]
    )
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]
    (total,) = [o["total"] for o in out if "total" in o]
    assert [1] == [e["gate_calls"] for e in total["config"]["priors"]["applied"]]
    # the tool's own setting decides its offloads, as the live gate's tool priors
    # do: never read back (p=0), the small report's preview pays for itself: kept
    # offloaded, nothing changes
    never = ["--set", "tool.small_report.recall_probability=0"]
    assert 0 == cli(
        ["whatif", str(path), "--set", "gate_offloader=true", *never, "--format", "json"]
    )
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]
    (total,) = [o["total"] for o in out if "total" in o]
    assert (2, 0, "0") == (
        total["offloader_gated"],
        total["offloader_kept"],
        total["difference_usd"],
    )


# -- concurrent conversations through one plugin ---------------------------------------------------

CONVERSATIONS = [f"p{i}" for i in range(12)]


def _concurrent_script(conv: str) -> list[Reply]:
    return [
        reply(
            ("run_block", {"block": conv}, f"{conv}-1"),
            ("search", {"query": conv}, f"{conv}-2"),
            ("big_report", {"topic": conv}, f"{conv}-3"),
        ),
        reply(text=f"{conv} done"),
    ]


def _normalized(ground: Ground) -> dict[str, str]:
    """Decisions per conversation, the offload ids (random per run) left out."""
    return {
        k: re.sub(r"offloaded \w+:", "offloaded:", repr(v)) for k, v in ground.decisions().items()
    }


def test_concurrent_conversations_decide_as_sequential_ones_and_keep_their_traces() -> None:
    """One plugin, one agent per conversation, the runs interleaved on one
    event loop: the same decisions as one after the other, one trace each."""

    def go(together: bool) -> tuple[Ground, Telemetry]:
        ground = Ground({conv: _concurrent_script(conv) for conv in CONVERSATIONS})
        tel = Telemetry()
        instances = models(ground)
        plugin = SeamscopePlugin(
            make_layer(tel), {HAIKU: instances[HAIKU]}, conversation=conversation_id
        )
        conversations = [
            Conversation(agent(ground, conv, instances[OPUS], [plugin]), ground, conv)
            for conv in CONVERSATIONS
        ]
        texts = ["sales please" if int(x.conv[1:]) % 2 else "archive please" for x in conversations]

        async def all_of_them() -> None:
            if together:
                await asyncio.gather(
                    *(x.arun(t) for x, t in zip(conversations, texts, strict=True))
                )
            else:
                for x, t in zip(conversations, texts, strict=True):
                    await x.arun(t)

        asyncio.run(all_of_them())
        return ground, tel

    sequential, _ = go(False)
    concurrent, tel = go(True)

    assert _normalized(sequential) == _normalized(concurrent)
    assert [] == check(concurrent, tel, None, prices=None)
    roots = [s for s in tel.spans() if s.parent is None and s.name != c.SPAN_OFFLOAD_SETTLE]
    assert len(CONVERSATIONS) == len({s.context.trace_id for s in roots}) == len(roots)
