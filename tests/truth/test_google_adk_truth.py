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
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.agents.run_config import RunConfig, StreamingMode
from google.adk.apps import App
from google.adk.models import LlmRequest
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.adk.tools import ToolContext
from google.genai import types

from adapters._google_adk_support import ScriptedLlm, Step, offered

from ._harness import Call, Ground, Reply, Seen
from .test_reference_truth import BIG, HAIKU, OPUS

USER = "truth-user"
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
