"""Ground truth for the pydantic-ai adapter tests, recorded outside seamscope.

:func:`scripted_models` makes pydantic-ai ``FunctionModel`` s that answer
from one shared script and log each request (which model was asked, with
which function and output tools, streamed or not, and the messages it got);
:class:`Toolbox` makes tools that log each execution (name, arguments, call
id, whether it raised). Neither reads anything from seamscope.
"""

from __future__ import annotations

import asyncio
import copy
import json
import threading
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai import RunContext, Tool
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel
from pydantic_ai.usage import RequestUsage

__all__ = [
    "BIG_REPORT_CHARS",
    "ModelCall",
    "Step",
    "ToolRun",
    "Toolbox",
    "call",
    "scripted_models",
    "step",
    "text",
]

BIG_REPORT_CHARS = 80_000  # 20 000 tokens by chars / 4: above the gate's 15 000


def call(name: str, args: dict[str, Any], call_id: str) -> ToolCallPart:
    return ToolCallPart(name, args, tool_call_id=call_id, id=f"fc_{call_id}")


def text(value: str) -> TextPart:
    return TextPart(value)


@dataclass(frozen=True)
class Step:
    """One scripted model answer: parts and usage (input, output, cache read)."""

    parts: tuple[Any, ...]
    usage: tuple[int, int, int]


def step(*parts: Any, usage: tuple[int, int, int] = (100, 10, 0)) -> Step:
    return Step(tuple(parts), usage)


@dataclass(frozen=True)
class ModelCall:
    """What one model request was asked (logged by the scripted model itself)."""

    model: str
    tools: tuple[str, ...]
    output_tools: tuple[str, ...]
    streamed: bool
    messages: list[ModelMessage]

    def outputs(self) -> dict[str, Any]:
        """The tool returns the model saw, by call id."""
        return {
            part.tool_call_id: part.content
            for message in self.messages
            if isinstance(message, ModelRequest)
            for part in message.parts
            if isinstance(part, ToolReturnPart)
        }

    def calls(self) -> list[tuple[str, str]]:
        """The tool calls in the history the model got: (call id, tool name)."""
        return [
            (part.tool_call_id, part.tool_name)
            for message in self.messages
            if isinstance(message, ModelResponse)
            for part in message.parts
            if isinstance(part, ToolCallPart)
        ]


@dataclass
class _Script:
    steps: list[Step]
    log: list[ModelCall]
    hold_from: int | None = None  # streamed requests from this index on never complete

    def next(
        self, model: str, messages: list[ModelMessage], info: AgentInfo, streamed: bool
    ) -> Step:
        self.log.append(
            ModelCall(
                model,
                tuple(t.name for t in info.function_tools),
                tuple(t.name for t in info.output_tools),
                streamed,
                copy.deepcopy(messages),
            )
        )
        if not self.steps:
            raise AssertionError("the script has no step left")
        return self.steps.pop(0)


def _model(name: str, script: _Script) -> FunctionModel:
    def request(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        s = script.next(name, messages, info, False)
        inp, out, cached = s.usage
        return ModelResponse(
            parts=[copy.copy(p) for p in s.parts],
            usage=RequestUsage(input_tokens=inp, output_tokens=out, cache_read_tokens=cached),
        )

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        s = script.next(name, messages, info, True)
        for index, part in enumerate(s.parts):
            if isinstance(part, TextPart):
                yield part.content[:1]
                if script.hold_from is not None and len(script.log) > script.hold_from:
                    await asyncio.Event().wait()
                yield part.content[1:]
            else:
                yield {
                    index: DeltaToolCall(
                        name=part.tool_name,
                        json_args=json.dumps(part.args),
                        tool_call_id=part.tool_call_id,
                    )
                }

    return FunctionModel(request, stream_function=stream, model_name=name)


class Scripted(dict[str, FunctionModel]):
    """Models by name sharing one script; ``hold_from`` stops a streamed request."""

    def __init__(self, script: _Script, names: Sequence[str]) -> None:
        super().__init__({n: _model(n, script) for n in names})
        self.script = script

    def hold_from(self, index: int) -> None:
        self.script.hold_from = index


def scripted_models(
    names: Sequence[str], steps: Sequence[Step]
) -> tuple[Scripted, list[ModelCall]]:
    """Models sharing one script (whichever is asked answers the next step)."""
    script = _Script(list(steps), [])
    return Scripted(script, names), script.log


@dataclass(frozen=True)
class ToolRun:
    """One tool execution as the tool itself saw it."""

    name: str
    args: dict[str, Any]
    call_id: str
    raised: bool


@dataclass
class Toolbox:
    """Tools that log what really ran (sync tools run in threads: a lock)."""

    runs: list[ToolRun] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _log(self, ctx: RunContext[Any], name: str, args: dict[str, Any], raised: bool) -> None:
        with self._lock:
            self.runs.append(ToolRun(name, args, ctx.tool_call_id or "", raised))

    def tools(self) -> dict[str, Tool[Any]]:
        box = self

        def run_block(ctx: RunContext[Any], block: str, limit: int = 10) -> str:
            """Run a named block."""
            box._log(ctx, "run_block", {"block": block, "limit": limit}, False)
            return f"block {block} ran"

        def fetch_data(ctx: RunContext[Any], source: str, rows: int = 10) -> str:
            """Fetch rows from a source."""
            box._log(ctx, "fetch_data", {"source": source, "rows": rows}, False)
            return f"{rows} rows of {source}"

        async def search(ctx: RunContext[Any], query: str) -> str:
            """Search the archive."""
            box._log(ctx, "search", {"query": query}, False)
            return f"results for {query}"

        def web_search(ctx: RunContext[Any], query: str) -> str:
            """Search the web."""
            box._log(ctx, "web_search", {"query": query}, False)
            return f"web results for {query}"

        def big_report(ctx: RunContext[Any], topic: str) -> str:
            """Write a long report."""
            box._log(ctx, "big_report", {"topic": topic}, False)
            return "x" * BIG_REPORT_CHARS

        def flaky(ctx: RunContext[Any], query: str) -> str:
            """A tool whose backend is down."""
            box._log(ctx, "flaky", {"query": query}, True)
            raise RuntimeError("backend down")

        fns = (run_block, fetch_data, search, web_search, big_report, flaky)
        return {fn.__name__: Tool(fn, takes_ctx=True) for fn in fns}
