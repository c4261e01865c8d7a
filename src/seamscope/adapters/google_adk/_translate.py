"""Google ADK and google-genai objects in, seamscope values out (and back):
small pure functions.

No OpenTelemetry and no state here: each function reads ADK or genai values
(a request's ``contents`` and ``config``, a ``tools_dict``, an
``LlmResponse``, usage metadata, a tool's result) and returns a seamscope
value or a new ADK/genai value, mutating nothing it was given.

A tool's answer reaches the model as a ``FunctionResponse`` whose
``response`` is a dict: a tool that returns a str is answered
``{"result": text}`` by ADK. That text is what policies read, what the
offload gate may take and what a stub replaces; any other dict is read as
its JSON.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from seamscope.adapters._kit import rewritten
from seamscope.adapters._outputs import StubScan
from seamscope.adapters.google_adk._framework import LlmResponse, types
from seamscope.decisions import Message, ModelUsage, PostModelResult, ToolCall
from seamscope.loop import RECALL_TOOL

__all__ = [
    "call_args",
    "declarations",
    "emitted",
    "emitting_event",
    "forced_tool_config",
    "held_for_confirmation",
    "messages",
    "narrowed",
    "offloadable_text",
    "recall_id",
    "response_text",
    "rewrite",
    "runnable",
    "stubbed",
    "stubs",
    "usage",
]

_RESULT = "result"


# -- messages ------------------------------------------------------------------------


def _part_text(part: types.Part) -> str:
    """A part's text, leaving out the model's thoughts."""
    if part.thought or not isinstance(part.text, str):
        return ""
    return part.text


def _system_text(instruction: Any) -> str:
    """The text of a ``system_instruction`` (a str, a Content, a Part or a list)."""
    if instruction is None:
        return ""
    if isinstance(instruction, str):
        return instruction
    if isinstance(instruction, types.Content):
        return "".join(_part_text(p) for p in instruction.parts or ())
    if isinstance(instruction, types.Part):
        return _part_text(instruction)
    if isinstance(instruction, Sequence):
        return "".join(_system_text(item) for item in instruction)
    return ""


def call_args(call: types.FunctionCall) -> dict[str, Any]:
    """A function call's arguments as a dict (``{}`` when it has none)."""
    args = call.args
    return dict(args) if isinstance(args, Mapping) else {}


def _tool_call(call: types.FunctionCall) -> ToolCall:
    return ToolCall(call.id or "", call.name or "", call_args(call))


def response_text(response: Any) -> str:
    """The text of a tool's answer as the model reads it: a ``{"result": str}``
    answer's text, else the answer's JSON (a str as it is)."""
    if isinstance(response, str):
        return response
    if isinstance(response, Mapping):
        if set(response) == {_RESULT} and isinstance(response[_RESULT], str):
            return str(response[_RESULT])
        try:
            return json.dumps(response, default=str, ensure_ascii=False)
        except (TypeError, ValueError):
            return str(response)
    return "" if response is None else str(response)


def messages(contents: Iterable[types.Content], system_instruction: Any = None) -> list[Message]:
    """A request's conversation as seamscope Messages (what policies and stages read).

    The system instruction is one system message; a user content's text a user
    message and each of its function responses a tool message naming its call
    and tool; a model content is one assistant message: its text and its
    function calls. Thoughts, files and other parts are left out.
    """
    out: list[Message] = []
    system = _system_text(system_instruction)
    if system:
        out.append(Message("system", system))
    for content in contents:
        parts = content.parts or ()
        if content.role == "model":
            text = "".join(_part_text(p) for p in parts)
            calls = tuple(_tool_call(p.function_call) for p in parts if p.function_call)
            out.append(Message("assistant", text, calls))
            continue
        text = "".join(_part_text(p) for p in parts)
        if text:
            out.append(Message("user", text))
        for part in parts:
            answer = part.function_response
            if answer is not None:
                out.append(
                    Message(
                        "tool",
                        response_text(answer.response),
                        name=answer.name,
                        tool_call_id=answer.id,
                    )
                )
    return out


# -- tools --------------------------------------------------------------------------------


def declarations(tools: Iterable[Any] | None) -> list[types.FunctionDeclaration]:
    """The function declarations a request offers the model, in order (a
    config's ``tools``: genai ``Tool`` s; built-in tools such as search or
    code execution have none)."""
    out: list[types.FunctionDeclaration] = []
    for tool in tools or ():
        if isinstance(tool, types.Tool):
            out.extend(tool.function_declarations or ())
    return out


def narrowed(tools: Sequence[Any] | None, keep: Collection[str]) -> list[Any] | None:
    """A config's ``tools`` with only the function declarations named in ``keep``:
    new ``Tool`` values (the given ones are not changed); a ``Tool`` left with
    no declaration and nothing else is dropped; built-in tools stay."""
    if tools is None:
        return None
    out: list[Any] = []
    for tool in tools:
        if not isinstance(tool, types.Tool) or not tool.function_declarations:
            out.append(tool)
            continue
        kept = [d for d in tool.function_declarations if d.name in keep]
        if len(kept) == len(tool.function_declarations):
            out.append(tool)
            continue
        rest = tool.model_copy(update={"function_declarations": kept or None})
        if kept or rest.model_dump(exclude_none=True):
            out.append(rest)
    return out


def runnable(
    tools_dict: Mapping[str, Any], offered: Collection[str], keep: Collection[str]
) -> dict[str, Any]:
    """What may run after a selection: ``tools_dict`` without the offered tools
    the selection dropped (a tool that was never a function declaration of the
    request stays: the selection never saw it)."""
    return {name: tool for name, tool in tools_dict.items() if name not in offered or name in keep}


def forced_tool_config(config: types.ToolConfig | None, name: str) -> types.ToolConfig:
    """A request's ``tool_config`` that makes the model call ``name`` (mode ANY,
    that one function allowed); the rest of ``config`` is kept."""
    forced = types.FunctionCallingConfig(
        mode=types.FunctionCallingConfigMode.ANY, allowed_function_names=[name]
    )
    if config is None:
        return types.ToolConfig(function_calling_config=forced)
    return config.model_copy(update={"function_calling_config": forced})


# -- model output ---------------------------------------------------------------------------


def emitted(
    response: LlmResponse,
) -> tuple[Message, tuple[ToolCall, ...], tuple[int, ...]]:
    """The assistant message of a response (its text and function calls), the
    calls the POST seam judges and their positions in the response's parts."""
    parts = () if response.content is None else response.content.parts or ()
    texts: list[str] = []
    calls: list[ToolCall] = []
    positions: list[int] = []
    for index, part in enumerate(parts):
        if part.function_call is not None:
            calls.append(_tool_call(part.function_call))
            positions.append(index)
        else:
            texts.append(_part_text(part))
    message = Message("assistant", "".join(texts), tuple(calls))
    return message, tuple(calls), tuple(positions)


def rewrite(
    response: LlmResponse, positions: Sequence[int], post: PostModelResult
) -> LlmResponse | None:
    """The response with the function calls the POST seam decided, or None when
    nothing changed. A rewritten call keeps its id (the tool's answer names
    it) and the rest of its part."""
    content = response.content
    if content is None or not content.parts:
        return None
    parts = list(content.parts)
    changed = False
    for at, final in rewritten(post, positions):
        part = parts[at]
        if part.function_call is None:
            continue
        call = types.FunctionCall(id=part.function_call.id, name=final.name, args=dict(final.args))
        parts[at] = part.model_copy(update={"function_call": call})
        changed = True
    if not changed:
        return None
    return response.model_copy(update={"content": content.model_copy(update={"parts": parts})})


def usage(metadata: Any) -> ModelUsage | None:
    """A ModelUsage from a response's usage metadata (None when it has no counts).

    As ADK and Gemini count them: input is the prompt plus the tool-use
    prompt, output the candidates plus the thoughts; the cached content is
    the part of the input read from the cache; a cache write is read where a
    model reports one (``cache_creation_input_tokens``).
    """
    if metadata is None:
        return None
    prompt = getattr(metadata, "prompt_token_count", None)
    tool_prompt = getattr(metadata, "tool_use_prompt_token_count", None)
    candidates = getattr(metadata, "candidates_token_count", None)
    thoughts = getattr(metadata, "thoughts_token_count", None)
    if prompt is None and tool_prompt is None and candidates is None and thoughts is None:
        return None
    input_tokens = int(prompt or 0) + int(tool_prompt or 0)
    read = int(getattr(metadata, "cached_content_token_count", None) or 0)
    write = int(getattr(metadata, "cache_creation_input_tokens", None) or 0)
    input_tokens = max(input_tokens, read + write)
    return ModelUsage(input_tokens, int(candidates or 0) + int(thoughts or 0), read, write)


def held_for_confirmation(tool_context: Any) -> bool:
    """Whether a tool call was answered with ADK's tool confirmation instead of
    its work: a confirmation requested for it (the call waits for a human's
    answer), or a confirmation refused (ADK answers the call as rejected)."""
    actions = getattr(tool_context, "actions", None)
    requested = getattr(actions, "requested_tool_confirmations", None)
    call_id = getattr(tool_context, "function_call_id", None)
    if isinstance(requested, Mapping) and call_id in requested:
        return True
    confirmation = getattr(tool_context, "tool_confirmation", None)
    return confirmation is not None and getattr(confirmation, "confirmed", None) is False


def emitting_event(events: Any, call_id: str) -> Any:
    """The event of the model call that emitted function call ``call_id``: the
    last whole event of ``events`` (a session's, as its session service keeps
    them) whose content holds the call (None when none does)."""
    if not isinstance(events, Sequence) or not call_id:
        return None
    for event in reversed(events):
        if getattr(event, "partial", None) is True:
            continue
        content = getattr(event, "content", None)
        for part in getattr(content, "parts", None) or ():
            call = getattr(part, "function_call", None)
            if call is not None and getattr(call, "id", None) == call_id:
                return event
    return None


# -- tool results and the offloads a request carries ----------------------------------------


def stubs(contents: Iterable[types.Content]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The offload ids whose stub a request's contents hold (function responses
    whose text is one of seamscope's stubs, in order), and those of them a
    recall in the same contents brought back."""
    scan = StubScan()
    for content in contents:
        for part in content.parts or ():
            call = part.function_call
            answer = part.function_response
            if call is not None and call.name == RECALL_TOOL and call.id:
                scan.recall(call.id, recall_id(call_args(call)))
            elif answer is not None:
                scan.answer(
                    answer.id or "",
                    response_text(answer.response),
                    recall=answer.name == RECALL_TOOL,
                    failed=isinstance(answer.response, Mapping) and "error" in answer.response,
                )
    return scan.result()


def offloadable_text(result: Any) -> str | None:
    """The text the offload gate may take from a tool's result: a str result,
    or the text of a ``{"result": str}`` answer (text results only)."""
    if isinstance(result, str):
        return result
    if (
        isinstance(result, Mapping)
        and set(result) == {_RESULT}
        and isinstance(result[_RESULT], str)
    ):
        return str(result[_RESULT])
    return None


def stubbed(stub: str) -> dict[str, Any]:
    """The answer that replaces an offloaded result: the stub, as ADK answers a
    tool that returned text."""
    return {_RESULT: stub}


def recall_id(args: Any) -> str:
    """The offload id a recall tool call asks for."""
    if isinstance(args, Mapping):
        return str(args.get("offload_id", ""))
    return ""
