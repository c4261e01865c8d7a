"""Ground truth for the Google ADK adapter tests, recorded outside seamscope.

:class:`ScriptedLlm` is an ADK ``BaseLlm`` that answers from a script (text
and function calls, with usage metadata), streamed or not, with no network
and no key, and logs each call it served: the model name it was asked to
serve (the request's ``model``, which a real provider serves: Gemini,
LiteLLM and Claude all read it), the function declarations it was offered,
the forced tool if any, whether it streamed, and the contents it got.
:class:`Toolbox` makes tools that log each execution (name, arguments, call
id, whether it raised). Neither reads anything from seamscope.
"""

from __future__ import annotations

import asyncio
import copy
import threading
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from google.adk.models import BaseLlm, LlmRequest, LlmResponse
from google.adk.tools import ToolContext
from google.genai import types

__all__ = [
    "BIG_REPORT_CHARS",
    "ModelCall",
    "ScriptedLlm",
    "Step",
    "ToolRun",
    "Toolbox",
    "call",
    "offered",
    "scripted_models",
    "step",
    "text",
]

BIG_REPORT_CHARS = 80_000  # 20 000 tokens by chars / 4: above the gate's 15 000


def call(name: str, args: dict[str, Any], call_id: str) -> types.Part:
    """A function call part, as a model emits it."""
    return types.Part(function_call=types.FunctionCall(id=call_id, name=name, args=args))


def text(value: str) -> types.Part:
    return types.Part(text=value)


@dataclass(frozen=True)
class Step:
    """One scripted model answer: parts and usage (input, output, cache read);
    ``error`` is raised instead of answering."""

    parts: tuple[types.Part, ...]
    usage: tuple[int, int, int] = (100, 10, 0)
    error: BaseException | None = None


def step(*parts: types.Part, usage: tuple[int, int, int] = (100, 10, 0)) -> Step:
    return Step(tuple(parts), usage)


@dataclass(frozen=True)
class ModelCall:
    """What one model call was asked (logged by the scripted model itself)."""

    model: str
    tools: tuple[str, ...]
    forced: tuple[str, ...]
    streamed: bool
    contents: tuple[types.Content, ...]

    def outputs(self) -> dict[str, Any]:
        """The tool answers the model saw, by call id."""
        return {
            part.function_response.id: part.function_response.response
            for content in self.contents
            for part in content.parts or ()
            if part.function_response is not None
        }


def offered(request: LlmRequest) -> tuple[str, ...]:
    """The function declarations a request offers the model, in order."""
    return tuple(
        d.name or ""
        for tool in request.config.tools or ()
        if isinstance(tool, types.Tool)
        for d in tool.function_declarations or ()
    )


def _forced(request: LlmRequest) -> tuple[str, ...]:
    config = request.config.tool_config
    calling = None if config is None else config.function_calling_config
    if calling is None or calling.mode != types.FunctionCallingConfigMode.ANY:
        return ()
    return tuple(calling.allowed_function_names or ())


def _metadata(usage: tuple[int, int, int]) -> types.GenerateContentResponseUsageMetadata:
    inp, out, cached = usage
    return types.GenerateContentResponseUsageMetadata(
        prompt_token_count=inp,
        candidates_token_count=out,
        cached_content_token_count=cached or None,
        total_token_count=inp + out,
    )


Answer = Callable[[LlmRequest, bool], Step]


class ScriptedLlm(BaseLlm):
    """An ADK model that answers each call with ``answer(request, streamed)``.

    Streamed (ADK's SSE mode), it yields each text part's first character,
    then the rest, then each function call, as partial responses, and the
    whole answer last (ADK's contract); ``hold(request)`` True stops the
    stream after the first character, never to complete.
    """

    answer: Any = None
    hold: Any = None

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        got: Step = self.answer(llm_request, stream)
        if got.error is not None:
            raise got.error
        served = llm_request.model or self.model
        parts = [copy.deepcopy(p) for p in got.parts]
        if stream:
            for part in parts:
                if part.text:
                    yield _partial(types.Part(text=part.text[:1]))
                    if self.hold is not None and self.hold(llm_request):
                        await asyncio.Event().wait()
                    if part.text[1:]:
                        yield _partial(types.Part(text=part.text[1:]))
                else:
                    yield _partial(part)
        yield LlmResponse(
            content=types.Content(role="model", parts=parts),
            usage_metadata=_metadata(got.usage),
            model_version=served,
            finish_reason=types.FinishReason.STOP,
        )


def _partial(part: types.Part) -> LlmResponse:
    return LlmResponse(content=types.Content(role="model", parts=[part]), partial=True)


@dataclass
class _Script:
    steps: list[Step]
    log: list[ModelCall]

    def next(self, request: LlmRequest, streamed: bool) -> Step:
        self.log.append(
            ModelCall(
                request.model or "",
                offered(request),
                _forced(request),
                streamed,
                tuple(copy.deepcopy(request.contents)),
            )
        )
        if not self.steps:
            raise AssertionError("the script has no step left")
        return self.steps.pop(0)


def scripted_models(
    names: Sequence[str], steps: Sequence[Step]
) -> tuple[dict[str, ScriptedLlm], list[ModelCall]]:
    """Models by name sharing one script (whichever is asked answers the next step)."""
    script = _Script(list(steps), [])
    models = {name: ScriptedLlm(model=name, answer=script.next) for name in names}
    return models, script.log


@dataclass(frozen=True)
class ToolRun:
    """One tool execution as the tool itself saw it."""

    name: str
    args: dict[str, Any]
    call_id: str
    raised: bool


@dataclass
class Toolbox:
    """Tools that log what really ran (a lock: ADK may run them in threads)."""

    runs: list[ToolRun] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _log(self, ctx: ToolContext, name: str, args: dict[str, Any], raised: bool) -> None:
        with self._lock:
            self.runs.append(ToolRun(name, args, ctx.function_call_id or "", raised))

    def tools(self) -> list[Callable[..., Any]]:
        box = self

        def run_block(block: str, tool_context: ToolContext, limit: int = 10) -> str:
            """Run a named block."""
            box._log(tool_context, "run_block", {"block": block, "limit": limit}, False)
            return f"block {block} ran"

        def fetch_data(source: str, tool_context: ToolContext, rows: int = 10) -> str:
            """Fetch rows from a source."""
            box._log(tool_context, "fetch_data", {"source": source, "rows": rows}, False)
            return f"{rows} rows of {source}"

        async def search(query: str, tool_context: ToolContext) -> str:
            """Search the archive."""
            box._log(tool_context, "search", {"query": query}, False)
            return f"results for {query}"

        def web_search(query: str, tool_context: ToolContext) -> str:
            """Search the web."""
            box._log(tool_context, "web_search", {"query": query}, False)
            return f"web results for {query}"

        def big_report(topic: str, tool_context: ToolContext) -> str:
            """Write a long report."""
            box._log(tool_context, "big_report", {"topic": topic}, False)
            return "x" * BIG_REPORT_CHARS

        def flaky(query: str, tool_context: ToolContext) -> str:
            """A tool whose backend is down."""
            box._log(tool_context, "flaky", {"query": query}, True)
            raise RuntimeError("backend down")

        return [run_block, fetch_data, search, web_search, big_report, flaky]
