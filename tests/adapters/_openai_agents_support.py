"""Ground truth for the OpenAI Agents SDK adapter tests, recorded outside seamscope.

:class:`ScriptedModel` is an ``agents.models.interface.Model`` that answers
from a shared script and logs each call (which model was asked, with which
tools, tool choice and input); :class:`Toolbox` makes function tools that
log each execution (name, arguments, call id, whether it raised). Neither
reads anything from seamscope.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from agents import FunctionTool, ModelResponse, Usage, function_tool
from agents.models.interface import Model
from agents.tool_context import ToolContext
from agents.usage import InputTokensDetails as UsageInputDetails
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

__all__ = [
    "BIG_REPORT_CHARS",
    "ModelCall",
    "ScriptedModel",
    "Step",
    "ToolRun",
    "Toolbox",
    "call",
    "scripted_models",
    "step",
    "text",
]

BIG_REPORT_CHARS = 80_000  # 20 000 tokens by chars / 4: above the gate's 15 000


def call(name: str, args: dict[str, Any], call_id: str) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(
        type="function_call",
        call_id=call_id,
        name=name,
        arguments=json.dumps(args),
        id=f"fc_{call_id}",
        status="completed",
    )


def text(value: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        type="message",
        id="msg",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=value, annotations=[])],
    )


@dataclass(frozen=True)
class Step:
    """One scripted model answer: output items and usage (input, output, cached)."""

    output: tuple[Any, ...]
    usage: tuple[int, int, int]


def step(*output: Any, usage: tuple[int, int, int] = (100, 10, 0)) -> Step:
    return Step(tuple(output), usage)


@dataclass(frozen=True)
class ModelCall:
    """What one model call was asked (logged by the scripted model itself)."""

    model: str
    tools: tuple[str, ...]
    handoffs: tuple[str, ...]
    tool_choice: Any
    instructions: str | None
    input: Any
    streamed: bool

    def outputs(self) -> dict[str, str]:
        """The function call outputs the model saw, by call id."""
        if isinstance(self.input, str):
            return {}
        return {
            item["call_id"]: item["output"]
            for item in self.input
            if isinstance(item, dict) and item.get("type") == "function_call_output"
        }


class ScriptedModel(Model):
    """An offline Model: answers the next step of ``script``, logs into ``log``."""

    def __init__(self, name: str, script: list[Step], log: list[ModelCall]) -> None:
        self.model = name  # read like an OpenAI model's name
        self._script = script
        self._log = log
        self.hold_from: int | None = None  # streamed calls from this index on never complete

    def _next(
        self,
        instructions: Any,
        input: Any,
        settings: Any,
        tools: Any,
        handoffs: Any,
        streamed: bool,
    ) -> Step:
        self._log.append(
            ModelCall(
                self.model,
                tuple(t.name for t in tools),
                tuple(h.tool_name for h in handoffs),
                settings.tool_choice,
                instructions,
                copy.deepcopy(input),
                streamed,
            )
        )
        if not self._script:
            raise AssertionError("the script has no step left")
        return self._script.pop(0)

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
        s = self._next(system_instructions, input, model_settings, tools, handoffs, False)
        inp, out, cached = s.usage
        usage = Usage(
            requests=1,
            input_tokens=inp,
            output_tokens=out,
            total_tokens=inp + out,
            input_tokens_details=UsageInputDetails(cached_tokens=cached, cache_write_tokens=0),
        )
        return ModelResponse(output=list(s.output), usage=usage, response_id=None)

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
        s = self._next(system_instructions, input, model_settings, tools, handoffs, True)
        inp, out, cached = s.usage
        yield ResponseTextDeltaEvent(
            type="response.output_text.delta",
            item_id="msg",
            output_index=0,
            content_index=0,
            delta="…",
            logprobs=[],
            sequence_number=0,
        )
        if self.hold_from is not None and len(self._log) > self.hold_from:
            await asyncio.Event().wait()
        response = Response(
            id="resp",
            created_at=0,
            model=self.model,
            object="response",
            output=list(s.output),
            tool_choice="auto",
            tools=[],
            top_p=None,
            parallel_tool_calls=True,
            status="completed",
            usage=ResponseUsage(
                input_tokens=inp,
                output_tokens=out,
                total_tokens=inp + out,
                input_tokens_details=InputTokensDetails(cached_tokens=cached, cache_write_tokens=0),
                output_tokens_details=OutputTokensDetails(reasoning_tokens=0),
            ),
        )
        yield ResponseCompletedEvent(
            type="response.completed", response=response, sequence_number=1
        )


def scripted_models(
    names: Sequence[str], steps: Sequence[Step]
) -> tuple[dict[str, ScriptedModel], list[ModelCall]]:
    """Models sharing one script (whichever is asked answers the next step)."""
    script = list(steps)
    log: list[ModelCall] = []
    return {name: ScriptedModel(name, script, log) for name in names}, log


@dataclass(frozen=True)
class ToolRun:
    """One tool execution as the tool itself saw it."""

    name: str
    args: dict[str, Any]
    call_id: str
    raised: bool


@dataclass
class Toolbox:
    """Function tools that log what really ran."""

    runs: list[ToolRun] = field(default_factory=list)

    def _log(self, ctx: ToolContext[Any], name: str, args: dict[str, Any], raised: bool) -> None:
        self.runs.append(ToolRun(name, args, ctx.tool_call_id, raised))

    def tools(self) -> dict[str, FunctionTool]:
        box = self

        @function_tool
        def run_block(ctx: ToolContext[Any], block: str, limit: int = 10) -> str:
            """Run a named block."""
            box._log(ctx, "run_block", {"block": block, "limit": limit}, False)
            return f"block {block} ran"

        @function_tool
        def fetch_data(ctx: ToolContext[Any], source: str, rows: int = 10) -> str:
            """Fetch rows from a source."""
            box._log(ctx, "fetch_data", {"source": source, "rows": rows}, False)
            return f"{rows} rows of {source}"

        @function_tool
        def search(ctx: ToolContext[Any], query: str) -> str:
            """Search the archive."""
            box._log(ctx, "search", {"query": query}, False)
            return f"results for {query}"

        @function_tool
        def web_search(ctx: ToolContext[Any], query: str) -> str:
            """Search the web."""
            box._log(ctx, "web_search", {"query": query}, False)
            return f"web results for {query}"

        @function_tool
        def big_report(ctx: ToolContext[Any], topic: str) -> str:
            """A long report."""
            box._log(ctx, "big_report", {"topic": topic}, False)
            return ("R" * (BIG_REPORT_CHARS - len(topic))) + topic

        @function_tool
        def flaky(ctx: ToolContext[Any], query: str) -> str:
            """A tool whose backend is down."""
            box._log(ctx, "flaky", {"query": query}, True)
            raise RuntimeError("backend down")

        @function_tool(failure_error_function=None)
        def fatal(ctx: ToolContext[Any], query: str) -> str:
            """A tool whose errors the SDK does not answer for."""
            box._log(ctx, "fatal", {"query": query}, True)
            raise KeyError("fatal")

        @function_tool
        def lookup_invoice(ctx: ToolContext[Any], number: str) -> str:
            """Look an invoice up."""
            box._log(ctx, "lookup_invoice", {"number": number}, False)
            return f"invoice {number}: paid"

        found = [
            run_block,
            fetch_data,
            search,
            web_search,
            big_report,
            flaky,
            fatal,
            lookup_invoice,
        ]
        return {t.name: t for t in found}
