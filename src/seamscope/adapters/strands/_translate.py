"""Strands Agents values in, seamscope values out (and back): small pure functions.

No OpenTelemetry and no state here: each function reads Strands values (the
messages of a model call, its tool specs, a model's usage, a tool's result,
a tool use) and returns a seamscope value or a new Strands value, mutating
nothing it was given.

A tool's answer reaches the model as a ``toolResult`` whose ``content`` is a
list of blocks; its text (text blocks, JSON blocks as their JSON) is what
policies read. Only a result made of text blocks alone is text the offload
gate may take, and a stub replaces it with one text block.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from seamscope.adapters._outputs import StubScan
from seamscope.decisions import Message, ModelUsage, PostModelResult, ToolCall
from seamscope.loop import RECALL_TOOL

__all__ = [
    "OFFLOADER_RETRIEVE",
    "Offloaded",
    "emitted",
    "emitting_usage",
    "is_offloader_preview",
    "messages",
    "offloadable_text",
    "offloaded_by_offloader",
    "references",
    "result_text",
    "rewritten",
    "stubbed",
    "stubs",
    "system_text",
    "tool_call",
    "usage",
]

OFFLOADER_RETRIEVE = "retrieve_offloaded_content"
"""The retrieval tool Strands' ``ContextOffloader`` adds."""

_OFFLOADED = re.compile(r"^\[Offloaded: \d+ blocks?, ~[\d,]+ tokens\]")
_REFERENCES = "[Stored references:]"


# -- messages ------------------------------------------------------------------------------


def _blocks(message: Any) -> Sequence[Any]:
    content = message.get("content") if isinstance(message, Mapping) else None
    return content if isinstance(content, list | tuple) else ()


def result_text(content: Any) -> str:
    """The text of a tool result's content blocks as the model reads it: text
    blocks as they are, JSON blocks as their JSON, other blocks left out."""
    out: list[str] = []
    for block in content if isinstance(content, list | tuple) else ():
        if not isinstance(block, Mapping):
            continue
        if isinstance(block.get("text"), str):
            out.append(block["text"])
        elif "json" in block:
            try:
                out.append(json.dumps(block["json"], default=str, ensure_ascii=False))
            except (TypeError, ValueError):
                out.append(str(block["json"]))
    return "".join(out)


def system_text(system_prompt: Any) -> str:
    """The text of a system prompt (a str or a list of content blocks)."""
    if isinstance(system_prompt, str):
        return system_prompt
    if isinstance(system_prompt, list | tuple):
        return "".join(
            b["text"]
            for b in system_prompt
            if isinstance(b, Mapping) and isinstance(b.get("text"), str)
        )
    return ""


def tool_call(tool_use: Mapping[str, Any]) -> ToolCall:
    """A seamscope ToolCall from a Strands tool use (``input`` not a mapping: ``{}``)."""
    args = tool_use.get("input")
    return ToolCall(
        str(tool_use.get("toolUseId") or ""),
        str(tool_use.get("name") or ""),
        dict(args) if isinstance(args, Mapping) else {},
    )


def messages(history: Iterable[Any], system_prompt: Any = None) -> list[Message]:
    """A model call's messages as seamscope Messages (what policies and stages read).

    The system prompt is one system message; a user message's text one user
    message and each of its tool results a tool message naming its call and
    its tool (from the tool use it answers); an assistant message one
    assistant message: its text and its tool uses. Images, documents and
    reasoning are left out.
    """
    out: list[Message] = []
    system = system_text(system_prompt)
    if system:
        out.append(Message("system", system))
    names: dict[str, str] = {}
    for message in history:
        if not isinstance(message, Mapping):
            continue
        blocks = _blocks(message)
        text = "".join(
            b["text"] for b in blocks if isinstance(b, Mapping) and isinstance(b.get("text"), str)
        )
        if message.get("role") == "assistant":
            calls = tuple(
                tool_call(b["toolUse"])
                for b in blocks
                if isinstance(b, Mapping) and isinstance(b.get("toolUse"), Mapping)
            )
            for call in calls:
                names[call.id] = call.name
            out.append(Message("assistant", text, calls))
            continue
        if text:
            out.append(Message("user", text))
        for block in blocks:
            result = block.get("toolResult") if isinstance(block, Mapping) else None
            if not isinstance(result, Mapping):
                continue
            call_id = str(result.get("toolUseId") or "")
            out.append(
                Message(
                    "tool",
                    result_text(result.get("content")),
                    name=names.get(call_id),
                    tool_call_id=call_id,
                )
            )
    return out


# -- model output ----------------------------------------------------------------------------


def emitted(message: Mapping[str, Any]) -> tuple[Message, tuple[ToolCall, ...]]:
    """The assistant message a model call emitted and the tool calls in it."""
    blocks = _blocks(message)
    text = "".join(
        b["text"] for b in blocks if isinstance(b, Mapping) and isinstance(b.get("text"), str)
    )
    calls = tuple(
        tool_call(b["toolUse"])
        for b in blocks
        if isinstance(b, Mapping) and isinstance(b.get("toolUse"), Mapping)
    )
    return Message("assistant", text, calls), calls


def rewritten(message: Mapping[str, Any], post: PostModelResult) -> dict[str, Any] | None:
    """The assistant message with the tool calls the POST seam decided, or None
    when nothing changed: a rewritten tool use keeps its ``toolUseId`` (the
    tool's result answers it) and names the final tool with its arguments."""
    finals = {r.emitted.id: r.final for r in post.records if r.final != r.emitted}
    if not finals:
        return None
    blocks: list[Any] = []
    changed = False
    for block in _blocks(message):
        use = block.get("toolUse") if isinstance(block, Mapping) else None
        final = None if not isinstance(use, Mapping) else finals.get(str(use.get("toolUseId")))
        if final is None:
            blocks.append(block)
            continue
        blocks.append(
            {**block, "toolUse": {**use, "name": final.name, "input": dict(final.args)}}  # type: ignore[dict-item]
        )
        changed = True
    if not changed:
        return None
    return {**message, "content": blocks}


def usage(raw: Any) -> ModelUsage | None:
    """A ModelUsage from a Strands ``Usage`` (None when it has no counts).

    Strands' providers count input differently: Anthropic's and Bedrock's
    ``inputTokens`` leave the cache out, OpenAI's include it; each counts
    the cache in ``totalTokens``. Every input token is ``totalTokens`` less
    the output (at least ``inputTokens``, at least the cache read and written).
    """
    if not isinstance(raw, Mapping):
        return None

    def count(key: str) -> int:
        value = raw.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0

    given, output, total = count("inputTokens"), count("outputTokens"), count("totalTokens")
    read, write = count("cacheReadInputTokens"), count("cacheWriteInputTokens")
    if not (given or output or total or read or write):
        return None
    every = max(given, total - output, read + write)
    return ModelUsage(every, output, read, write)


def emitting_usage(messages: Any, call_id: str) -> ModelUsage | None:
    """The usage of the model call that emitted tool use ``call_id``: the
    ``metadata.usage`` Strands keeps on the last assistant message of
    ``messages`` (an agent's, as its session manager restores them) that holds
    it (None when none does, or it has no usage)."""
    if not isinstance(messages, Sequence) or not call_id:
        return None
    for message in reversed(messages):
        if not isinstance(message, Mapping) or message.get("role") != "assistant":
            continue
        if any(
            isinstance(use := b.get("toolUse"), Mapping) and use.get("toolUseId") == call_id
            for b in _blocks(message)
            if isinstance(b, Mapping)
        ):
            metadata = message.get("metadata")
            return usage(metadata.get("usage")) if isinstance(metadata, Mapping) else None
    return None


# -- tool results ----------------------------------------------------------------------------


def offloadable_text(result: Any) -> str | None:
    """The text the offload gate may take from a tool result: the text of a
    result made of text blocks only (None otherwise, or for an error result)."""
    if not isinstance(result, Mapping) or result.get("status") == "error":
        return None
    content = result.get("content")
    if not isinstance(content, list | tuple) or not content:
        return None
    if not all(isinstance(b, Mapping) and set(b) == {"text"} for b in content):
        return None
    return "".join(str(b["text"]) for b in content)


def stubbed(result: Mapping[str, Any], stub: str) -> dict[str, Any]:
    """The tool result that replaces an offloaded one: the same call and status,
    the stub as its one text block."""
    return {**result, "content": [{"text": stub}]}


def stubs(history: Iterable[Any]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The offload ids whose stub a model call's messages hold (tool results
    whose text is one of seamscope's stubs, in order), and those of them a
    recall in the same messages brought back."""
    scan = StubScan()
    for message in history:
        for block in _blocks(message):
            if not isinstance(block, Mapping):
                continue
            use = block.get("toolUse")
            result = block.get("toolResult")
            if isinstance(use, Mapping) and use.get("name") == RECALL_TOOL:
                args = use.get("input")
                offload_id = str(args.get("offload_id", "")) if isinstance(args, Mapping) else ""
                scan.recall(str(use.get("toolUseId")), offload_id)
            elif isinstance(result, Mapping):
                scan.answer(
                    str(result.get("toolUseId")),
                    result_text(result.get("content")),
                    failed=result.get("status") == "error",
                )
    return scan.result()


# -- Strands' ContextOffloader ---------------------------------------------------------------


class Offloaded:
    """One result Strands' ``ContextOffloader`` replaced by its preview: the
    preview text the model receives and the references it names."""

    __slots__ = ("preview", "references")

    def __init__(self, preview: str, references: tuple[str, ...]) -> None:
        self.preview = preview
        self.references = references


def is_offloader_preview(text: object) -> bool:
    """Whether a tool result's text is a ``ContextOffloader`` preview."""
    return isinstance(text, str) and _OFFLOADED.match(text) is not None


def references(preview: str) -> tuple[str, ...]:
    """The storage references a ``ContextOffloader`` preview lists."""
    _, found, rest = preview.rpartition(_REFERENCES)
    if not found:
        return ()
    out: list[str] = []
    for line in rest.splitlines():
        line = line.strip()
        if line:
            out.append(line.split(" (", 1)[0])
    return tuple(out)


def offloaded_by_offloader(before: Any, after: Any) -> Offloaded | None:
    """The ``ContextOffloader``'s replacement of a tool result, when ``after``
    (the result once its hook ran) is its preview of ``before`` (the tool's
    own result), else None."""
    if not isinstance(before, Mapping) or not isinstance(after, Mapping) or before is after:
        return None
    content = after.get("content")
    if not isinstance(content, list | tuple) or not content:
        return None
    first = content[0]
    text = first.get("text") if isinstance(first, Mapping) else None
    if not isinstance(text, str) or not _OFFLOADED.match(text):
        return None
    if result_text(before.get("content")) == result_text(content):
        return None
    return Offloaded(result_text(content), references(text))
