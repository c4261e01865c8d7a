"""The truth matrix for Google ADK's ``Runner`` with ``SeamscopePlugin``.

The models are ``BaseLlm`` s answering from the harness's scripts and
logging each call they served through :meth:`Ground.model_call` (the model
name a call was asked to serve, the function declarations it was offered,
the forced tool, the contents it got); the tools record through
:meth:`Ground.run_tool`. The agent loop, tool execution, streaming (ADK's
SSE mode), sessions, sub-agents and ``AgentTool`` are ADK's own; no network.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest
from google.adk.agents import LlmAgent
from google.adk.agents.run_config import RunConfig, StreamingMode
from google.adk.apps import App
from google.adk.flows.llm_flows.tools import _batch_executor as adk_batch_executor
from google.adk.models import LlmRequest
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.adk.telemetry import node_tracing as adk_node_tracing
from google.adk.telemetry import tracing as adk_tracing
from google.adk.tools import ToolContext
from google.genai import types
from pydantic import BaseModel

from adapters._google_adk_support import ScriptedLlm, Step, offered
from seamscope.adapters.google_adk import SeamscopePlugin
from seamscope.decisions import ForcedChoiceStage, RolePaletteStage, ToolCallPolicy
from seamscope.loop import RECALL_TOOL
from seamscope.telemetry import conventions as c

from ._harness import Call, Ground, Reply, Seen, disagreements, reply
from .test_reference_truth import BIG, HAIKU, OPUS, POLICIES, PRICES, Telemetry, make_layer

USER = "truth-user"
GENAI_OPERATIONS = ("invoke_agent", "chat", "generate_content", "execute_tool")
MODES = ("run_async", "run", "stream")

# -- glue: ADK's contents as neutral records ----------------------------------------------------


def _text(parts: Sequence[types.Part]) -> str:
    return "".join(p.text for p in parts if isinstance(p.text, str) and not p.thought)


def _answer_text(response: Any) -> str:
    """A function response as the model reads it: a ``{"result": str}`` answer's
    text, else its JSON."""
    if isinstance(response, Mapping) and set(response) == {"result"}:
        value = response["result"]
        return value if isinstance(value, str) else json.dumps(value, default=str)
    return json.dumps(response, default=str)


def seen(contents: Sequence[types.Content], system: Any = None) -> list[Seen]:
    out: list[Seen] = []
    if isinstance(system, str) and system:
        out.append(Seen("system", system))
    for content in contents:
        parts = content.parts or ()
        if content.role == "model":
            calls = tuple(
                Call(f.id or "", f.name or "", f.args or {})
                for f in (p.function_call for p in parts)
                if f is not None
            )
            out.append(Seen("assistant", _text(parts), calls=calls))
            continue
        if _text(parts):
            out.append(Seen("user", _text(parts)))
        for part in parts:
            answer = part.function_response
            if answer is None:
                continue
            failed = isinstance(answer.response, Mapping) and "error" in answer.response
            out.append(
                Seen(
                    "tool",
                    _answer_text(answer.response),
                    answer.id,
                    answer.name,
                    "error" if failed else None,
                )
            )
    return out


def _forced(request: LlmRequest) -> Any:
    config = request.config.tool_config
    calling = None if config is None else config.function_calling_config
    if calling is None or calling.mode != types.FunctionCallingConfigMode.ANY:
        return None
    names = calling.allowed_function_names or ()
    return names[0] if len(names) == 1 else None


def _step(got: Reply) -> Step:
    parts = [types.Part(text=got.text)] if got.text else []
    parts += [
        types.Part(function_call=types.FunctionCall(id=x.id, name=x.name, args=dict(x.args)))
        for x in got.calls
    ]
    return Step(tuple(parts), (got.usage[0], got.usage[1], 0))


def models(
    ground: Ground, names: Sequence[str] = (OPUS, HAIKU), hold: set[str] | None = None
) -> dict[str, ScriptedLlm]:
    """One model per name, answering the harness's scripts; the model a call
    served is the name it was asked to serve (the request's ``model``). A
    streamed text reply of a conversation in ``hold`` stops after its first
    character and never completes."""
    hold = set() if hold is None else hold

    def answer(request: LlmRequest, streamed: bool) -> Step:
        system = request.config.system_instruction
        got = ground.model_call(
            request.model or "",
            offered(request),
            _forced(request),
            seen(request.contents, system if isinstance(system, str) else None),
        )
        if got.error is not None:
            return Step((), error=got.error)
        return _step(got)

    def held(request: LlmRequest) -> bool:
        return any(m.text.startswith(f"{h}: ") for h in hold for m in seen(request.contents))

    return {name: ScriptedLlm(model=name, answer=answer, hold=held) for name in names}


def tools(ground: Ground) -> list[Callable[..., Any]]:
    def recorded(ctx: ToolContext, name: str, args: dict[str, Any], body: Callable[[], str]) -> str:
        return ground.run_tool(name, args, ctx.function_call_id, lambda a: body(), ctx.session.id)

    def run_block(block: str, tool_context: ToolContext) -> str:
        """Run a saved block."""
        return recorded(tool_context, "run_block", {"block": block}, lambda: f"ran {block}")

    def fetch_data(source: str, tool_context: ToolContext, rows: int = 10) -> str:
        """Read rows."""
        args = {"source": source, "rows": rows}
        return recorded(tool_context, "fetch_data", args, lambda: f"{rows} rows of {source}")

    async def search(query: str, tool_context: ToolContext) -> str:
        """Search the archive."""
        await asyncio.sleep(0)
        return recorded(tool_context, "search", {"query": query}, lambda: f"hits for {query}")

    def archive_search(query: str, tool_context: ToolContext) -> str:
        """Search old archives."""
        args = {"query": query}
        return recorded(tool_context, "archive_search", args, lambda: f"old hits for {query}")

    def big_report(tool_context: ToolContext, topic: str = "") -> str:
        """The full report."""
        return recorded(tool_context, "big_report", {"topic": topic}, lambda: BIG)

    async def lookup(key: str, tool_context: ToolContext) -> str:
        """Look a key up."""
        return recorded(tool_context, "lookup", {"key": key}, lambda: f"found {key}")

    def flaky(tool_context: ToolContext, reason: str = "") -> str:
        """An archive that is down."""

        def down() -> str:
            raise ConnectionError("archive offline")

        return recorded(tool_context, "flaky", {"reason": reason}, down)

    return [run_block, fetch_data, search, archive_search, big_report, lookup, flaky]


def agent(ground: Ground, model: ScriptedLlm | None = None, **kwargs: Any) -> LlmAgent:
    """The analyst: the harness's tools, its own model OPUS unless given."""
    kwargs.setdefault("instruction", "You analyse sales.")
    kwargs.setdefault("tools", tools(ground))
    return LlmAgent(name="analyst", model=model or models(ground)[OPUS], **kwargs)


class Conversation:
    """One conversation: an ADK session named after it (so its conversation id
    is its name), each run given the session's events so far."""

    def __init__(self, runner: Runner, ground: Ground, conv: str) -> None:
        self.runner, self.ground, self.conv = runner, ground, conv
        self.output: str = ""
        self._made = False

    async def _session(self) -> None:
        if not self._made:
            await self.runner.session_service.create_session(
                app_name=self.runner.app_name, user_id=USER, session_id=self.conv
            )
            self._made = True

    def _message(self, text: str) -> types.Content:
        return types.Content(role="user", parts=[types.Part(text=f"{self.conv}: {text}")])

    async def ended(self) -> None:
        """Record the run's end and the session's contents."""
        session = await self.runner.session_service.get_session(
            app_name=self.runner.app_name, user_id=USER, session_id=self.conv
        )
        contents = [e.content for e in (session.events if session else ()) if e.content]
        self.ground.invoked(self.conv, seen(contents))

    async def arun(self, text: str, mode: str = "run_async") -> str:
        await self._session()
        streaming = StreamingMode.SSE if mode == "stream" else StreamingMode.NONE
        last = ""
        async for event in self.runner.run_async(
            user_id=USER,
            session_id=self.conv,
            new_message=self._message(text),
            run_config=RunConfig(streaming_mode=streaming),
        ):
            if event.content and not event.partial and _text(event.content.parts or ()):
                last = _text(event.content.parts or ())
        await self.ended()
        self.output = last
        return last

    def run(self, text: str, mode: str = "run_async") -> str:
        if mode != "run":
            return asyncio.run(self.arun(text, mode))
        asyncio.run(self._session())
        last = ""
        for event in self.runner.run(
            user_id=USER, session_id=self.conv, new_message=self._message(text)
        ):
            if event.content and not event.partial and _text(event.content.parts or ()):
                last = _text(event.content.parts or ())
        asyncio.run(self.ended())
        self.output = last
        return last


def runner(root: LlmAgent, plugins: Sequence[Any] = ()) -> Runner:
    return Runner(
        app=App(name="truth", root_agent=root, plugins=list(plugins)),
        session_service=InMemorySessionService(),
    )


# -- the glue itself, without seamscope: ADK's own run, recorded ---------------------------------


def test_the_glue_records_what_adk_ran_without_seamscope() -> None:
    ground = Ground(
        {
            "g1": [
                Reply(calls=(Call("a1", "run_block", {"block": "q3"}),)),
                Reply(text="Ran it."),
            ]
        }
    )
    conversation = Conversation(runner(agent(ground)), ground, "g1")
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
    *,
    layer: Any = None,
    hold: set[str] | None = None,
    plugin_options: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> tuple[Runner, SeamscopePlugin]:
    """The analyst on OPUS with the plugin; the PRE seam's HAIKU is the same
    kind of model, served by its name."""
    instances = models(ground, hold=hold)
    layer = layer or make_layer(tel)
    options = {"models": {HAIKU: instances[HAIKU]}, **(plugin_options or {})}
    plugin = SeamscopePlugin(layer, **options)
    return runner(agent(ground, instances[OPUS], **kwargs), [plugin]), plugin


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


@pytest.mark.parametrize("mode", MODES)
def test_several_calls_in_one_message_in_every_mode(
    mode: str, captured_logs: list[dict[str, Any]]
) -> None:
    """a1 is redirected (run_block -> fetch_data, on haiku), a2's redirect target
    (archive_search) is not routed (the palette drops it), a3 is untouched."""
    tel = Telemetry()
    ground = Ground({"c1": list(MULTI)})
    runs, _ = agent_for(ground, tel)
    assert "Q3 sales grew." == Conversation(runs, ground, "c1").run("How did sales go?", mode)

    assert [] == check(ground, tel, captured_logs)
    assert sorted([("fetch_data", "a1"), ("search", "a2"), ("lookup", "a3")]) == sorted(
        (r.name, r.call_id) for r in ground.tool_runs
    )
    assert [HAIKU, HAIKU] == [m.model for m in ground.model_calls]
    assert 1 == sum(1 for e in captured_logs if e.get("event") == c.LOG_PALETTE_GATE_DROP)
    # the real tool ran under its own name: the span names it
    [redirected] = [
        s
        for s in tel.spans()
        if (s.attributes or {}).get(c.ATTR_GEN_AI_TOOL_CALL_ID) == "a1"
        and s.name.startswith("execute_tool")
    ]
    assert "execute_tool fetch_data" == redirected.name


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
    runs, plugin = agent_for(ground, tel, layer=make_layer(tel, offload_id_factory=lambda: "off-a"))
    conversation = Conversation(runs, ground, "c3")
    texts = ["the report", "look up x", "the full report again", "thanks"]
    for text, mode in zip(texts, ("run_async", "run", "stream", "run_async"), strict=True):
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


def test_a_recall_the_model_makes_up_is_adks_to_answer(
    captured_logs: list[dict[str, Any]],
) -> None:
    """No stub in the prompt: the recall tool is not offered, and a call of it
    is an unknown tool's call, answered by ADK as without seamscope."""
    tel = Telemetry()
    ground = Ground(
        {"c4": [reply((RECALL_TOOL, {"offload_id": "off-x"}, "r1")), reply(text="No.")]}
    )
    runs, _ = agent_for(ground, tel)
    Conversation(runs, ground, "c4").run("bring off-x back")

    assert [] == check(ground, tel, captured_logs)
    [answer] = [m for m in ground.transcripts["c4"] if m.role == "tool"]
    assert (RECALL_TOOL, "error") == (answer.name, answer.status)
    assert [] == [s.name for s in tel.spans() if s.name.startswith("execute_tool")]


# -- a stream abandoned part way ---------------------------------------------------------------


def _abandon(tel: Telemetry) -> Ground:
    """c2's first call emits three calls; the second streams one character of
    its text: the caller stops reading there."""
    ground = Ground({"c2": list(MULTI)})
    runs, _ = agent_for(ground, tel, hold={"c2"})
    conversation = Conversation(runs, ground, "c2")

    async def go() -> None:
        await conversation._session()
        events = runs.run_async(
            user_id=USER,
            session_id="c2",
            new_message=conversation._message("How did sales go?"),
            run_config=RunConfig(streaming_mode=StreamingMode.SSE),
        )
        async with contextlib.aclosing(events) as stream:
            async for event in stream:
                if event.partial and event.content and _text(event.content.parts or ()):
                    break  # the second call is under way: stop reading
        await conversation.ended()

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
    assert [c.ABANDONED_RUN] == [(s.attributes or {}).get(c.ATTR_ERROR_TYPE) for s in agents]


def test_a_stream_abandoned_part_way_tells_the_truth(
    captured_logs: list[dict[str, Any]],
) -> None:
    tel = Telemetry()
    ground = _abandon(tel)

    assert [] == check(ground, tel, captured_logs, prices=None)


# -- errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_an_unhandled_tool_error_ends_the_run_with_it(
    mode: str, captured_logs: list[dict[str, Any]]
) -> None:
    tel = Telemetry()
    ground = Ground({"c6": [reply(("flaky", {}, "f1")), reply(text="never")]})
    runs, _ = agent_for(ground, tel)
    conversation = Conversation(runs, ground, "c6")
    with pytest.raises(ConnectionError):
        conversation.run("go", mode)
    ground.unfinished.add("c6")
    asyncio.run(conversation.ended())

    assert [] == tel.watch.open_spans()
    assert [] == check(ground, tel, captured_logs, prices=None)
    failed = sorted(
        s.name
        for s in tel.spans()
        if (s.attributes or {}).get(c.ATTR_ERROR_TYPE) == "ConnectionError"
    )
    assert ["execute_tool flaky", "invoke_agent analyst", c.SPAN_ITERATION] == failed


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
    runs, _ = agent_for(ground, tel)
    conversation = Conversation(runs, ground, "c8")
    with pytest.raises(Overloaded):
        conversation.run("look k up", mode)
    ground.unfinished.add("c8")
    asyncio.run(conversation.ended())

    assert [] == tel.watch.open_spans()
    assert [] == check(ground, tel, captured_logs, prices=None)
    failed = sorted(
        s.name for s in tel.spans() if (s.attributes or {}).get(c.ATTR_ERROR_TYPE) == "Overloaded"
    )
    assert [f"chat {OPUS}", "invoke_agent analyst", c.SPAN_ITERATION] == failed


# -- structured output beside a policy for its tool ---------------------------------------------


class Weather(BaseModel):
    """The weather in a city."""

    city: str
    celsius: int


GRAB_OUTPUT = ToolCallPolicy(
    "grab_output", match=lambda ctx: True, when_tool="set_model_response", redirect_to="lookup"
)


@pytest.mark.parametrize("mode", MODES)
def test_structured_output_is_never_redirected_nor_a_tool_run(
    mode: str, captured_logs: list[dict[str, Any]]
) -> None:
    tel = Telemetry()
    ground = Ground(
        {
            "c7": [
                reply(("run_block", {"block": "weather"}, "w0")),
                reply(("set_model_response", {"city": "Oslo", "celsius": 4}, "w1")),
            ]
        }
    )
    ground.structured.add("set_model_response")
    layer = make_layer(tel, policies=[*POLICIES, GRAB_OUTPUT])
    runs, _ = agent_for(ground, tel, layer=layer, output_schema=Weather)
    output = Conversation(runs, ground, "c7").run("weather in Oslo?", mode)

    assert [] == check(ground, tel, captured_logs)
    assert Weather(city="Oslo", celsius=4) == Weather.model_validate_json(output)
    assert [("run_block", "w0")] == [(r.name, r.call_id) for r in ground.tool_runs]
    dispatched = [
        (call_id(s), (s.attributes or {}).get(c.ATTR_DISPATCH_STRUCTURED_OUTPUT))
        for s in tel.spans()
        if s.name == c.SPAN_DISPATCH
    ]
    assert [("w0", None), ("w1", True)] == dispatched
    assert "set_model_response" in ground.model_calls[0].tools


# -- the model that served the call -------------------------------------------------------------


class OtherKind(ScriptedLlm):
    """A model of another kind than the agent's: ADK cannot call it for the agent."""


@pytest.mark.parametrize("by", ["id", "same kind", "other kind"])
def test_the_model_that_served_names_the_chat_span(
    by: str, captured_logs: list[dict[str, Any]]
) -> None:
    """The PRE seam chooses HAIKU: a model id or a model of the agent's kind is
    served by the agent's own model object (the request's model); a model of
    another kind cannot be: the agent's model serves it, the chat span names
    it and the choice is reported as unavailable beside it."""
    tel = Telemetry()
    ground = Ground({"c9": [reply(text="Sales grew.")]})
    instances = models(ground)
    chosen: Any = {
        "id": HAIKU,
        "same kind": instances[HAIKU],
        "other kind": OtherKind(model=HAIKU),
    }[by]
    plugin = SeamscopePlugin(make_layer(tel), {HAIKU: chosen})
    Conversation(runner(agent(ground, instances[OPUS]), [plugin]), ground, "c9").run(
        "How did sales go?"
    )

    assert [] == check(ground, tel, captured_logs)
    served = OPUS if by == "other kind" else HAIKU
    assert [served] == [m.model for m in ground.model_calls]
    [chat] = [s for s in tel.spans() if s.name.startswith("chat ")]
    unavailable = (chat.attributes or {}).get(c.ATTR_MODEL_CHOSEN_UNAVAILABLE)
    events = [e for e in captured_logs if e.get("event") == c.LOG_MODEL_UNAVAILABLE]
    if by == "other kind":
        assert (f"chat {OPUS}", HAIKU) == (chat.name, unavailable)
        assert [(HAIKU, OPUS)] == [(e["chosen_model"], e["used_model"]) for e in events]
    else:
        assert (f"chat {HAIKU}", None, []) == (chat.name, unavailable, events)


# -- the tools the model saw, and what may run ---------------------------------------------------


def test_the_model_sees_the_selected_tools_and_only_those_can_run(
    captured_logs: list[dict[str, Any]],
) -> None:
    """The palette leaves out archive_search: the model is not offered it, and
    its call anyway is answered by ADK as an unknown tool's (nothing runs), the
    dispatch saying it was not offered."""
    tel = Telemetry()
    ground = Ground(
        {"c10": [reply(("archive_search", {"query": "q3"}, "n1")), reply(text="Old hits.")]}
    )
    runs, _ = agent_for(ground, tel)
    Conversation(runs, ground, "c10").run("search the archive")

    assert [] == check(ground, tel, captured_logs, prices=None)
    palette = ("run_block", "fetch_data", "search", "big_report", "lookup", "flaky")
    assert [palette, palette] == [m.tools for m in ground.model_calls]
    assert [] == ground.tool_runs
    [dispatch] = [s for s in tel.spans() if s.name == c.SPAN_DISPATCH]
    assert ("archive_search", False) == (
        (dispatch.attributes or {}).get(c.ATTR_DISPATCH_EMITTED_TOOL),
        (dispatch.attributes or {}).get(c.ATTR_DISPATCH_OFFERED),
    )
    [answer] = [m for m in ground.transcripts["c10"] if m.role == "tool"]
    assert ("archive_search", "error") == (answer.name, answer.status)


def test_a_forced_tool_is_the_one_the_model_may_call(
    captured_logs: list[dict[str, Any]],
) -> None:
    tel = Telemetry()
    ground = Ground({"c11": [reply(("lookup", {"key": "k"}, "f1")), reply(text="Found.")]})
    forced = ForcedChoiceStage(resolver=lambda ctx: "lookup")
    palette = RolePaletteStage(resolver=lambda role: ("lookup", "search"))
    runs, _ = agent_for(ground, tel, layer=make_layer(tel, stages=[forced, palette]))
    Conversation(runs, ground, "c11").run("look k up")

    assert [] == check(ground, tel, captured_logs)
    assert [("lookup", ("search", "lookup")), (None, ("search", "lookup"))] == [
        (m.tool_choice, m.tools) for m in ground.model_calls
    ]


# -- with ADK's own tracing: one trace, no inference span twice -----------------------------------


@pytest.fixture
def adk_traced(monkeypatch: pytest.MonkeyPatch) -> Telemetry:
    """ADK's own spans recorded by the test's provider (the tracer its modules
    took at import, replaced for this test only), beside seamscope's."""
    tel = Telemetry()
    tracer = tel.tracer_provider.get_tracer("gcp.vertex.agent")
    for module in (adk_tracing, adk_node_tracing, adk_batch_executor):
        monkeypatch.setattr(module, "tracer", tracer)
    return tel


def _scope(span: Any) -> str:
    return span.instrumentation_scope.name if span.instrumentation_scope else ""


@pytest.mark.parametrize("mode", MODES)
def test_with_adks_tracing_seamscope_joins_its_trace_and_records_no_inference_span(
    mode: str, adk_traced: Telemetry
) -> None:
    tel = adk_traced
    ground = Ground({"c12": list(MULTI)})
    runs, _ = agent_for(ground, tel)
    assert "Q3 sales grew." == Conversation(runs, ground, "c12").run("How did sales go?", mode)

    spans = tel.spans()
    adk = [s for s in spans if _scope(s) == "gcp.vertex.agent"]
    mine = [s for s in spans if _scope(s) != "gcp.vertex.agent"]
    assert [] == tel.watch.open_spans()
    assert 1 == len({s.context.trace_id for s in spans})
    # the inference, agent and tool spans are ADK's alone
    assert [] == [s.name for s in mine if s.name.split(" ")[0] in GENAI_OPERATIONS]
    assert [f"generate_content {HAIKU}"] * 2 == [
        s.name for s in adk if s.name.startswith("generate_content")
    ]
    assert ["execute_tool fetch_data", "execute_tool lookup", "execute_tool search"] == sorted(
        s.name for s in adk if call_id(s) in ("a1", "a2", "a3")
    )
    # seamscope's iterations are children of ADK's invoke_agent span
    by_id = {s.context.span_id: s for s in spans}
    iterations = [s for s in mine if s.name == c.SPAN_ITERATION]
    assert ["invoke_agent analyst"] * 2 == [
        by_id[s.parent.span_id].name for s in iterations if s.parent is not None
    ]
    # what the model saw: ADK records the tools the selection left
    definitions = [
        sorted(d["name"] for d in json.loads(str((s.attributes or {})["gen_ai.tool.definitions"])))
        for s in adk
        if s.name.startswith("generate_content")
    ]
    palette = sorted(("run_block", "fetch_data", "search", "big_report", "lookup", "flaky"))
    assert [palette, palette] == definitions
    assert sorted([("fetch_data", "a1"), ("search", "a2"), ("lookup", "a3")]) == sorted(
        (r.name, r.call_id) for r in ground.tool_runs
    )


def test_with_adks_tracing_the_ledger_still_prices_every_model_call(
    adk_traced: Telemetry,
) -> None:
    """No chat span of seamscope's, yet each model call's usage reaches the
    ledger: the offload settles as without ADK's tracing."""

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
        runs, plugin = agent_for(ground, tel, layer=layer)
        conversation = Conversation(runs, ground, "c13")
        for text in ("the report", "the full report again"):
            conversation.run(text)
        return [
            (s.offload_id, s.turns_carried, s.recalls, s.realized_net_saving)
            for s in plugin.layer.end_conversation("c13")
        ]

    joined = settle(adk_traced)
    assert [] == [s.name for s in adk_traced.spans() if s.name.startswith("chat ")]
    assert settle(Telemetry()) == joined
    assert 1 == len(joined)


# -- concurrent conversations through one plugin ---------------------------------------------------

CONVERSATIONS = [f"p{i}" for i in range(16)]


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
    def go(together: bool) -> tuple[Ground, Telemetry]:
        ground = Ground({conv: _concurrent_script(conv) for conv in CONVERSATIONS})
        tel = Telemetry()
        runs, _ = agent_for(ground, tel)
        conversations = [Conversation(runs, ground, conv) for conv in CONVERSATIONS]

        async def all_of_them() -> None:
            texts = [
                "sales please" if int(x.conv[1:]) % 2 else "archive please" for x in conversations
            ]
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
    assert 16 == len({s.context.trace_id for s in roots}) == len(roots)


# -- adding the plugin changes nothing ADK does when no decision changes anything ------------------


@pytest.mark.parametrize("mode", MODES)
def test_with_nothing_to_change_adk_runs_as_without_seamscope(mode: str) -> None:
    """No policy, no stage, no large output: the models get the same requests
    (tools, contents), the same tools run, the session holds the same events,
    with and without the plugin."""

    def go(plugins: Sequence[Any]) -> dict[str, list[Any]]:
        ground = Ground({"c14": list(MULTI)})
        root = agent(ground)
        Conversation(runner(root, plugins), ground, "c14").run("How did sales go?", mode)
        return ground.decisions()

    layer = make_layer(Telemetry(), policies=(), stages=[])
    assert go([]) == go([SeamscopePlugin(layer)])
