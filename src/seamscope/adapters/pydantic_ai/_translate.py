"""pydantic-ai objects in, seamscope values out (and back): small pure functions.

No OpenTelemetry and no state here: each function reads pydantic-ai values
(messages, a ``ModelResponse``, ``ToolDefinition`` lists, a ``RequestUsage``)
and returns a seamscope value or a new pydantic-ai value, mutating nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from seamscope.adapters._kit import rewritten
from seamscope.adapters._outputs import StubScan
from seamscope.adapters.pydantic_ai._framework import (
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolDefinition,
    ToolReturnPart,
    UserPromptPart,
)
from seamscope.decisions import Message, ModelUsage, PostModelResult, ToolCall
from seamscope.loop import RECALL_TOOL

__all__ = [
    "call_args",
    "stubs",
    "emitted",
    "emitting_usage",
    "messages",
    "offered",
    "offloadable_text",
    "output_calls",
    "recall_id",
    "rewrite",
    "usage",
]


# -- messages ------------------------------------------------------------------------


def _text(content: Any) -> str:
    """The text of a user prompt (a str or a sequence of str and media parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "".join(part for part in content if isinstance(part, str))
    return ""


def call_args(part: ToolCallPart) -> dict[str, Any]:
    """A tool call's arguments as a dict (``{}`` for arguments that are not an
    object, kept under ``"__raw__"``), so the POST seam never raises on them."""
    try:
        return dict(part.args_as_dict())
    except Exception:
        return {} if not part.args else {"__raw__": part.args}


def _tool_call(part: ToolCallPart) -> ToolCall:
    return ToolCall(part.tool_call_id, part.tool_name, call_args(part))


def messages(history: Iterable[Any]) -> list[Message]:
    """The conversation as seamscope Messages (what policies and stages read).

    A request's instructions and system prompts are system messages, user
    prompts user messages, tool returns tool messages naming their call and
    tool; a retry prompt is a tool message when it answers a call (else a
    user message). A response is one assistant message: its text and its
    tool calls. Other parts (thinking, files, native tools) are left out.
    """
    out: list[Message] = []
    for message in history:
        if isinstance(message, ModelRequest):
            if message.instructions:
                out.append(Message("system", message.instructions))
            for part in message.parts:
                if isinstance(part, SystemPromptPart):
                    out.append(Message("system", part.content))
                elif isinstance(part, UserPromptPart):
                    out.append(Message("user", _text(part.content)))
                elif isinstance(part, ToolReturnPart):
                    out.append(
                        Message(
                            "tool",
                            part.model_response_str(),
                            name=part.tool_name,
                            tool_call_id=part.tool_call_id,
                        )
                    )
                elif isinstance(part, RetryPromptPart):
                    if part.tool_name:
                        out.append(
                            Message(
                                "tool",
                                part.model_response(),
                                name=part.tool_name,
                                tool_call_id=part.tool_call_id,
                            )
                        )
                    else:
                        out.append(Message("user", part.model_response()))
        elif isinstance(message, ModelResponse):
            out.append(emitted(message, ())[0])
    return out


# -- tools and models ----------------------------------------------------------------------


def offered(tool_defs: Sequence[ToolDefinition], *, recall: bool) -> list[ToolDefinition]:
    """The step's function tools; the recall tool only when ``recall`` (something
    to recall in this conversation)."""
    if recall:
        return list(tool_defs)
    return [t for t in tool_defs if t.name != RECALL_TOOL]


# -- model output ---------------------------------------------------------------------------


def emitted(
    response: ModelResponse, output_tools: Iterable[str]
) -> tuple[Message, tuple[ToolCall, ...], tuple[int, ...]]:
    """The assistant message of a response (its text and every tool call), the
    function tool calls the POST seam judges and their positions in
    ``response.parts``. Output tools such as ``final_result`` are left out
    (the agent consumes them itself), and so are pydantic-ai's own call kinds
    (subclasses of ``ToolCallPart``, e.g. a tool search)."""
    skip = frozenset(output_tools)
    texts: list[str] = []
    every: list[ToolCall] = []
    calls: list[ToolCall] = []
    positions: list[int] = []
    for index, part in enumerate(response.parts):
        if isinstance(part, ToolCallPart):
            call = _tool_call(part)
            every.append(call)
            if type(part) is ToolCallPart and part.tool_name not in skip:
                calls.append(call)
                positions.append(index)
        elif isinstance(part, TextPart):
            texts.append(part.content)
    message = Message("assistant", "".join(texts), tuple(every))
    return (message, tuple(calls), tuple(positions))


def output_calls(response: ModelResponse, output_tools: Iterable[str]) -> tuple[ToolCall, ...]:
    """The response's calls of an output tool (``final_result`` for a structured
    ``output_type``): the structured answer the agent consumes itself."""
    names = frozenset(output_tools)
    return tuple(
        _tool_call(part)
        for part in response.parts
        if type(part) is ToolCallPart and part.tool_name in names
    )


def rewrite(
    response: ModelResponse, positions: Sequence[int], post: PostModelResult
) -> ModelResponse | None:
    """The response with the tool calls the POST seam decided, or None when
    nothing changed. A rewritten part keeps its ``tool_call_id`` (the tool's
    return answers it) and loses its provider item ``id`` (a provider must
    not replay its stored copy of the emitted call)."""
    parts = list(response.parts)
    changed = False
    for at, final in rewritten(post, positions):
        part: Any = parts[at]
        if type(part) is not ToolCallPart:
            continue
        parts[at] = dataclasses.replace(part, tool_name=final.name, args=dict(final.args), id=None)
        changed = True
    return dataclasses.replace(response, parts=parts) if changed else None


def usage(raw: Any) -> ModelUsage | None:
    """A ModelUsage from a pydantic-ai ``RequestUsage`` (None when it has no values).

    Cache reads and writes are parts of the input, whichever way the
    provider counted them.
    """
    if raw is None:
        return None
    read = int(getattr(raw, "cache_read_tokens", 0) or 0)
    write = int(getattr(raw, "cache_write_tokens", 0) or 0)
    input_tokens = max(int(getattr(raw, "input_tokens", 0) or 0), read + write)
    output_tokens = int(getattr(raw, "output_tokens", 0) or 0)
    return ModelUsage(input_tokens, output_tokens, read, write)


def emitting_usage(history: Sequence[Any], call_id: str) -> ModelUsage | None:
    """The usage of the model request that emitted tool call ``call_id``: the
    ``usage`` of the last ``ModelResponse`` of ``history`` that holds it (None
    when none does)."""
    for message in reversed(history):
        if isinstance(message, ModelResponse) and any(
            isinstance(part, ToolCallPart) and part.tool_call_id == call_id
            for part in message.parts
        ):
            return usage(message.usage)
    return None


# -- tool results and the offloads a request carries ----------------------------------------


def stubs(history: Iterable[Any]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The offload ids whose stub a request's messages hold (tool returns whose
    content is one of seamscope's stubs, in order), and those of them a
    recall in the same messages brought back."""
    scan = StubScan()
    for message in history:
        for part in getattr(message, "parts", ()):
            if isinstance(part, ToolCallPart) and part.tool_name == RECALL_TOOL:
                scan.recall(part.tool_call_id, recall_id(call_args(part)))
            elif isinstance(part, ToolReturnPart):
                scan.answer(part.tool_call_id, part.content, recall=part.tool_name == RECALL_TOOL)
    return scan.result()


def offloadable_text(result: Any) -> str | None:
    """The text the offload gate may take from a tool result (text results only)."""
    return result if isinstance(result, str) else None


def recall_id(args: Any) -> str:
    """The offload id a recall tool call asks for."""
    if isinstance(args, Mapping):
        return str(args.get("offload_id", ""))
    return ""
