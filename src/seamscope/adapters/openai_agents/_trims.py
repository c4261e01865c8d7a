"""The tool outputs ``ToolOutputTrimmer`` trimmed, per conversation.

The trimmer (the caller's ``RunConfig.call_model_input_filter``) works on a
copy of the model input before every model call: the history and the
session keep the full output, and the same old output is trimmed again on
every later call. :class:`Trims` remembers each trimmed output once per
conversation, so it is recorded once (a compaction) and counted as carried
by every later call whose real input holds its preview, until the model
calls the same tool with the same arguments again (a re-read: the data is
back in the conversation, and the preview saves nothing from then on).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from seamscope.adapters._kit import Conversations
from seamscope.adapters.openai_agents._translate import Trimmed

__all__ = ["Trims", "compaction_id"]


def compaction_id(call_id: str) -> str:
    """The ledger's id of the trim of one tool call's output."""
    return f"tool_output_trimmer:{call_id}"


@dataclass(slots=True)
class _Kept:
    """One conversation's trimmed outputs."""

    trims: dict[str, Trimmed] = field(default_factory=dict)
    """call id -> the trim, as first recorded"""
    reread: set[str] = field(default_factory=set)
    """call ids whose data a later call of the same tool fetched again"""
    current: tuple[str, ...] = ()
    """call ids whose preview the last model input really held"""


class Trims:
    """Per conversation (scope), the outputs the trimmer trimmed; at most
    ``limit`` conversations (the least recently used forgotten first)."""

    def __init__(self, limit: int) -> None:
        self._kept: Conversations[_Kept] = Conversations(limit, _Kept)

    def sent(self, scope: str, trims: Iterable[Trimmed]) -> tuple[list[Trimmed], tuple[str, ...]]:
        """A model input that really holds these trims' previews is sent: the
        trims seen for the first time in the conversation (to record), and
        the compaction ids it carries (every one not re-read)."""
        with self._kept.of(scope) as kept:
            new: list[Trimmed] = []
            held: list[str] = []
            for trim in trims:
                if trim.call_id not in kept.trims:
                    kept.trims[trim.call_id] = trim
                    new.append(trim)
                if trim.call_id not in kept.reread:
                    held.append(trim.call_id)
            kept.current = tuple(held)
            return new, tuple(compaction_id(call_id) for call_id in held)

    def reread(self, scope: str, tool: str, args: Mapping[str, Any]) -> str | None:
        """The trim (its compaction id) a new call of ``tool`` with the same
        ``args`` fetches again, when the last model input held its preview;
        from now on it is no longer counted as carried."""
        with self._kept.existing(scope) as kept:
            if kept is None:
                return None
            for call_id in reversed(kept.current):
                trim = kept.trims.get(call_id)
                if (
                    trim is not None
                    and call_id not in kept.reread
                    and trim.tool == tool
                    and dict(trim.args) == dict(args)
                ):
                    kept.reread.add(call_id)
                    return compaction_id(call_id)
            return None
