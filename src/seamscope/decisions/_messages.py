"""Framework-neutral views of messages, tools and tool calls.

The decision core works with whatever message and tool objects the loop
uses (LangChain messages and tools, plain dicts, seamscope's own
:class:`Message`). These helpers read the few things the core needs (a
message's role and text, a tool's name) without importing any framework.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from seamscope.decisions.records import (
    ToolCall,
    tool_name,
)

__all__ = [
    "Message",
    "ToolCall",
    "is_tool_message",
    "last_user_message",
    "last_user_text",
    "message_role",
    "message_text",
    "tool_message_name",
    "tool_name",
]

_ROLE_ALIASES = {
    "human": "user",
    "user": "user",
    "ai": "assistant",
    "assistant": "assistant",
    "tool": "tool",
    "system": "system",
    "function": "tool",
}


@dataclass(frozen=True, slots=True)
class Message:
    """A chat message of the reference loop.

    ``role`` is ``user``, ``assistant``, ``tool`` or ``system``. An assistant
    message may carry ``tool_calls``; a tool message names its tool in
    ``name`` and answers ``tool_call_id``.
    """

    role: str
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    name: str | None = None
    tool_call_id: str | None = None


def message_role(message: Any) -> str | None:
    """``user``/``assistant``/``tool``/``system`` for any supported message shape."""
    if isinstance(message, Mapping):
        raw = message.get("role") or message.get("type")
    else:
        raw = getattr(message, "role", None) or getattr(message, "type", None)
    if not isinstance(raw, str):
        return None
    return _ROLE_ALIASES.get(raw.lower(), raw.lower())


def message_text(message: Any) -> str:
    """The message's text content ('' when it has none or it is not text)."""
    content = (
        message.get("content")
        if isinstance(message, Mapping)
        else getattr(message, "content", None)
    )
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, Mapping) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "".join(parts)
    return ""


def is_tool_message(message: Any) -> bool:
    """True for a tool-result message of any supported shape."""
    return message_role(message) == "tool"


def tool_message_name(message: Any) -> str | None:
    """The tool a tool-result message answers, when the message names it."""
    name = message.get("name") if isinstance(message, Mapping) else getattr(message, "name", None)
    return name if isinstance(name, str) else None


def last_user_message(messages: Sequence[Any]) -> Any | None:
    """The most recent user message, or None."""
    for message in reversed(messages):
        if message_role(message) == "user":
            return message
    return None


def last_user_text(messages: Sequence[Any]) -> str:
    """Text of the most recent user message ('' when there is none)."""
    message = last_user_message(messages)
    return "" if message is None else message_text(message)
