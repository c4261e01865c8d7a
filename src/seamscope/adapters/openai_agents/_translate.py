"""Agents SDK objects in, seamscope values out (and back): small pure functions.

No OpenTelemetry and no state here: each function reads SDK objects
(Responses input items, ``ModelResponse`` output items, ``Usage``) and
returns a seamscope value or a new SDK object, mutating nothing.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Collection, Mapping, Sequence
from typing import Any, get_args, get_origin

from seamscope.adapters._kit import rewritten
from seamscope.adapters._outputs import Offloaded
from seamscope.adapters.openai_agents._framework import (
    Agent,
    FunctionTool,
    ModelSettings,
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    Tool,
    ToolOriginType,
    get_default_model_settings,
    get_function_tool_origin,
)
from seamscope.decisions import Message, ModelUsage, PostModelResult, ToolCall
from seamscope.decisions.records import tool_name
from seamscope.loop import RECALL_TOOL, estimate_tokens

__all__ = [
    "Offloaded",
    "agent_tool",
    "call_outputs",
    "recalled",
    "conversation_id",
    "emitted",
    "emitting_usage",
    "messages",
    "offered_named",
    "offloadable_text",
    "without_generated_cache_key",
    "own_settings",
    "parse_args",
    "recall_id",
    "rewrite",
    "selected_tools",
    "stub_input",
    "Trimmed",
    "trimmed",
    "trimmer_reason",
    "usage",
    "with_forced_tool",
    "with_parameters",
]


# -- the run's identity ------------------------------------------------------------


def conversation_id(explicit: str | None, session: Any, sdk_conversation: str | None) -> str | None:
    """seamscope's conversation id: the one given, else the session's
    ``session_id``, else the SDK's server-side ``conversation_id``."""
    if explicit:
        return str(explicit)
    found = getattr(session, "session_id", None) if session is not None else None
    if isinstance(found, str) and found:
        return found
    return sdk_conversation or None


# -- model input -------------------------------------------------------------------


def _field(item: Any, key: str) -> Any:
    if isinstance(item, dict):  # the usual input item: no abstract Mapping check
        return item.get(key)
    return item.get(key) if isinstance(item, Mapping) else getattr(item, key, None)


def _text(content: Any) -> str:
    """The text of a Responses content value (a str or a list of parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        parts: list[str] = []
        for part in content:
            text = _field(part, "text")
            if isinstance(text, str):
                parts.append(text)
            elif isinstance(part, str):
                parts.append(part)
        return "".join(parts)
    return ""


def parse_args(raw: Any) -> dict[str, Any]:
    """A function call's arguments: a JSON object string (or a mapping) as a dict.

    Anything that is not an object becomes ``{}`` (kept under ``"__raw__"``
    when it was not empty), so the POST seam never raises on it.
    """
    if isinstance(raw, Mapping):
        return dict(raw)
    if not isinstance(raw, str) or not raw.strip():
        return {}
    try:
        parsed = json.loads(raw)
    except ValueError:
        return {"__raw__": raw}
    return dict(parsed) if isinstance(parsed, Mapping) else {"__raw__": parsed}


def messages(instructions: str | None, items: str | Sequence[Any]) -> list[Message]:
    """The model input as seamscope Messages (what policies and stages read).

    The system instructions come first; user, assistant, system and
    developer messages keep their text (developer counts as system);
    consecutive ``function_call`` items join one assistant message's tool
    calls; a ``function_call_output`` is a tool message naming its call and
    tool. Other items (reasoning, hosted tool calls) are left out.
    """
    out: list[Message] = []
    if instructions:
        out.append(Message("system", instructions))
    if isinstance(items, str):
        out.append(Message("user", items))
        return out
    names: dict[str, str] = {}
    for item in items:
        kind = _field(item, "type")
        role = _field(item, "role")
        if kind == "function_call":
            call = ToolCall(
                str(_field(item, "call_id") or ""),
                str(_field(item, "name") or ""),
                parse_args(_field(item, "arguments")),
            )
            names[call.id] = call.name
            if out and out[-1].role == "assistant":
                last = out[-1]
                out[-1] = Message("assistant", last.content, (*last.tool_calls, call))
            else:
                out.append(Message("assistant", "", (call,)))
        elif kind == "function_call_output":
            call_id = str(_field(item, "call_id") or "")
            out.append(
                Message(
                    "tool",
                    _text(_field(item, "output")),
                    name=names.get(call_id),
                    tool_call_id=call_id,
                )
            )
        elif isinstance(role, str) and (kind in (None, "message")):
            role = "system" if role == "developer" else role
            out.append(Message(role, _text(_field(item, "content"))))
    return out


def stub_input(
    items: Sequence[Any], offloaded: Mapping[str, Offloaded]
) -> tuple[list[Any], tuple[str, ...]]:
    """The model input with each offloaded tool output replaced by its stub
    (matched by call id), and the offload ids whose stub it now carries."""
    out: list[Any] = []
    carried: list[str] = []
    for item in items:
        if _field(item, "type") == "function_call_output":
            found = offloaded.get(str(_field(item, "call_id") or ""))
            if found is not None:
                if isinstance(item, Mapping):
                    item = {**item, "output": found.stub}
                else:
                    item = item.model_copy(update={"output": found.stub})
                carried.append(found.offload_id)
        out.append(item)
    return out, tuple(carried)


def recalled(items: Any, trimmed: Collection[str] = ()) -> tuple[str, ...]:
    """The offload ids a recall in the model input brought back (a recall call
    whose output is not an error, nor ``trimmed``: call ids whose output an
    input filter replaced by a preview, which brings nothing back)."""
    if isinstance(items, str) or not isinstance(items, Sequence):
        return ()
    asked: dict[str, str] = {}
    back: list[str] = []
    for item in items:
        kind = _field(item, "type")
        if kind == "function_call" and _field(item, "name") == RECALL_TOOL:
            asked[str(_field(item, "call_id") or "")] = recall_id(_field(item, "arguments"))
        elif kind == "function_call_output":
            call_id = str(_field(item, "call_id") or "")
            offload_id = asked.get(call_id)
            output = _field(item, "output")
            if call_id in trimmed:
                continue
            if offload_id and not (isinstance(output, str) and output.startswith("error:")):
                back.append(offload_id)
    return tuple(back)


def call_outputs(items: Any) -> list[tuple[str, Any]]:
    """``(call id, output)`` of the function call outputs in a model input."""
    if isinstance(items, str) or not isinstance(items, Sequence):
        return []
    return [
        (str(_field(item, "call_id") or ""), _field(item, "output"))
        for item in items
        if _field(item, "type") == "function_call_output"
    ]


@dataclasses.dataclass(frozen=True, slots=True)
class Trimmed:
    """A tool output an input filter replaced by a shorter text in the model input.

    ``tool``/``args``: the call that produced it, as the input's
    ``function_call`` item holds it (``"?"``/``{}`` when the input holds no
    such item); ``removed_tokens``: the original output's text (chars / 4,
    never rounded); ``preview``: the text the filter put in its place.
    """

    call_id: str
    tool: str
    args: Mapping[str, Any]
    removed_tokens: float
    preview: str


def _output_text(output: Any) -> str | None:
    """A function call output's text: a str, or a structured output made of
    text parts only (None for one with an image or a file, whose size in
    tokens is not its text's, and for anything else)."""
    if isinstance(output, str):
        return output
    if not isinstance(output, Sequence) or not output:
        return None
    texts: list[str] = []
    for part in output:
        text = _field(part, "text")
        if _field(part, "type") != "input_text" or not isinstance(text, str):
            return None
        texts.append(text)
    return "".join(texts)


def trimmed(before: Any, after: Any) -> list[Trimmed]:
    """The function call outputs an input filter shortened: matched by call id
    between the model input it received (``before``) and the one it returned
    (``after``), each now a shorter text than it was. Read from the effect
    only, whatever made it; outputs that are not text are left out."""
    if isinstance(before, str) or not isinstance(before, Sequence):
        return []
    if isinstance(after, str) or not isinstance(after, Sequence):
        return []
    original: dict[str, Any] = {}
    calls: dict[str, tuple[str, dict[str, Any]]] = {}
    for item in before:
        kind = _field(item, "type")
        call_id = str(_field(item, "call_id") or "")
        if not call_id:
            continue
        if kind == "function_call_output":
            original[call_id] = _field(item, "output")
        elif kind == "function_call":
            name = _field(item, "name")
            calls[call_id] = (
                name if isinstance(name, str) and name else "?",
                parse_args(_field(item, "arguments")),
            )
    out: list[Trimmed] = []
    for item in after:
        call_id = str(_field(item, "call_id") or "")
        if _field(item, "type") != "function_call_output" or call_id not in original:
            continue
        was, now = original[call_id], _field(item, "output")
        if now is was or not isinstance(now, str):
            continue
        text = _output_text(was)
        if text is None or len(now) >= len(text):
            continue
        name, args = calls.get(call_id, ("?", {}))
        out.append(Trimmed(call_id, name, args, estimate_tokens(text), now))
    return out


def trimmer_reason(trimmer: Any, trim: Trimmed) -> str:
    """ToolOutputTrimmer: its window and sizes (public fields, read with a
    default), and the output it trimmed. Names a tool and sizes, never content."""
    fields = [
        f"{name}={value}"
        for name in ("recent_turns", "max_output_chars", "preview_chars")
        if isinstance(value := getattr(trimmer, name, None), int)
    ]
    return (
        f"{type(trimmer).__name__}({', '.join(fields)}) trimmed the output of {trim.tool} "
        f"({trim.removed_tokens:g} tokens) to a {estimate_tokens(trim.preview):g}-token preview"
    )


# -- tools and models ---------------------------------------------------------------


def agent_tool(tool: Any) -> str | None:
    """The agent an ``Agent.as_tool`` tool runs (its name), from the tool's public
    ``ToolOrigin``; None for any other tool."""
    origin = get_function_tool_origin(tool) if isinstance(tool, FunctionTool) else None
    if origin is None or origin.type is not ToolOriginType.AGENT_AS_TOOL:
        return None
    return origin.agent_name or getattr(tool, "name", None)


_SDK_TOOLS: tuple[type, ...] = tuple(get_origin(kind) or kind for kind in get_args(Tool))
"""Every class of the SDK's ``Tool`` union (``ComputerTool[Any]`` as ``ComputerTool``):
``isinstance`` cannot take the union itself, which holds a subscripted generic."""


def offered_named(tools: Sequence[Any], *, recall: bool) -> tuple[list[Any], list[Any]]:
    """The turn's tools whose name can be read (they go through selection; the
    recall tool only when ``recall``: something to recall), and the rest (sent
    untouched: no name-keyed rule can judge them); each name read once."""
    named: list[Any] = []
    other: list[Any] = []
    for tool in tools:
        name = tool_name(tool)
        if name is None:
            other.append(tool)
        elif recall or name != RECALL_TOOL:
            named.append(tool)
    return named, other


def selected_tools(
    selected: Sequence[Any], offered: Sequence[Any] = ()
) -> tuple[list[Tool], list[Any]]:
    """The selected tools the SDK can send (the very objects offered, or any
    SDK tool a catalogue binds), and the rest (by name)."""
    offered_ids = {id(tool) for tool in offered}
    sendable: list[Tool] = []
    other: list[Any] = []
    for tool in selected:
        if id(tool) in offered_ids or isinstance(tool, _SDK_TOOLS):
            sendable.append(tool)
        else:
            other.append(tool)
    return sendable, other


def with_forced_tool(settings: ModelSettings, forced: str | None) -> ModelSettings:
    """The model settings with ``tool_choice`` set to a forced tool."""
    if not forced:
        return settings
    return dataclasses.replace(settings, tool_choice=forced)


def with_parameters(settings: ModelSettings, parameters: Mapping[str, Any]) -> ModelSettings:
    """The model settings with a ModelConfig's parameters laid over them:
    ModelSettings fields by name, anything else in ``extra_args``."""
    if not parameters:
        return settings
    known = {f.name for f in dataclasses.fields(ModelSettings)}
    fields = {k: v for k, v in parameters.items() if k in known and k != "extra_args"}
    extra = {k: v for k, v in parameters.items() if k not in fields}
    if extra:
        fields["extra_args"] = {**(settings.extra_args or {}), **extra}
    return dataclasses.replace(settings, **fields)


_CACHE_KEY = "prompt_cache_key"
_GENERATED_CACHE_KEY = "agents-sdk:"  # the prefix of the keys the SDK's runner generates


def without_generated_cache_key(settings: ModelSettings) -> ModelSettings:
    """The settings without the prompt cache key the SDK's runner generated
    (for a model that does not take one), a key the caller set kept."""
    extra = settings.extra_args
    key = None if not extra else extra.get(_CACHE_KEY)
    if not isinstance(key, str) or not key.startswith(_GENERATED_CACHE_KEY):
        return settings
    rest = {k: v for k, v in (extra or {}).items() if k != _CACHE_KEY}
    return dataclasses.replace(settings, extra_args=rest or None)


def own_settings(agent: Any, settings: ModelSettings) -> ModelSettings:
    """The settings the SDK itself would pass for an agent with a model *name*.

    The adapter's model is set as ``RunConfig.model``, so the SDK no longer
    applies the default settings of an agent's named model (e.g. a GPT-5
    reasoning default); they are put back here when the agent left its
    settings implicit.
    """
    model = getattr(agent, "model", None)
    if not isinstance(model, str) or not isinstance(agent, Agent):
        return settings
    defaults = get_default_model_settings(model)
    if agent.model_settings != defaults or defaults == ModelSettings():
        return settings
    return defaults.resolve(settings)


# -- model output ---------------------------------------------------------------------


def emitted(output: Sequence[Any]) -> tuple[Message, tuple[int, ...]]:
    """The assistant message of a model response (its text and its function
    calls) and the positions of those calls in ``output``."""
    texts: list[str] = []
    calls: list[ToolCall] = []
    positions: list[int] = []
    for index, item in enumerate(output):
        if isinstance(item, ResponseFunctionToolCall):
            calls.append(ToolCall(item.call_id, item.name, parse_args(item.arguments)))
            positions.append(index)
        elif isinstance(item, ResponseOutputMessage):
            texts.append(_text(item.content))
    return Message("assistant", "".join(texts), tuple(calls)), tuple(positions)


def rewrite(
    output: Sequence[Any], positions: Sequence[int], post: PostModelResult
) -> list[Any] | None:
    """The output items with the tool calls the POST seam decided (call id and
    item id kept), or None when nothing changed."""
    items = list(output)
    changed = False
    for at, final in rewritten(post, positions):
        items[at] = items[at].model_copy(
            update={"name": final.name, "arguments": json.dumps(dict(final.args))}
        )
        changed = True
    return items if changed else None


def usage(raw: Any) -> ModelUsage | None:
    """A ModelUsage from an SDK ``Usage`` or a Responses ``ResponseUsage``.

    The Responses API counts cached tokens inside ``input_tokens``; cache
    writes are read when the provider reports them.
    """
    if raw is None:
        return None
    details = getattr(raw, "input_tokens_details", None)
    read = int(getattr(details, "cached_tokens", 0) or 0)
    write = int(getattr(details, "cache_write_tokens", 0) or 0)
    input_tokens = max(int(getattr(raw, "input_tokens", 0) or 0), read + write)
    return ModelUsage(input_tokens, int(getattr(raw, "output_tokens", 0) or 0), read, write)


def emitting_usage(state: Any, call_id: str) -> ModelUsage | None:
    """The usage of the model call that emitted tool call ``call_id``, as a
    resumed ``RunState`` holds it: the last of its model responses whose
    output holds a function call of that ``call_id`` (None when none does,
    or it has no usage)."""
    responses = getattr(state, "_model_responses", None)  # the SDK's own field, serialized
    if not isinstance(responses, Sequence):
        return None
    for response in reversed(responses):
        for item in getattr(response, "output", None) or ():
            if _field(item, "type") == "function_call" and _field(item, "call_id") == call_id:
                return usage(getattr(response, "usage", None))
    return None


# -- tool results -----------------------------------------------------------------------


def offloadable_text(result: Any) -> str | None:
    """The text the offload gate may take from a tool result (text results only)."""
    return result if isinstance(result, str) else None


def recall_id(arguments: Any) -> str:
    """The offload id a recall tool call asks for."""
    return str(parse_args(arguments).get("offload_id", ""))
