"""One Strands invocation's decision state and spans, and what the adapter
remembers per conversation of the ``ContextOffloader``'s offloads.

A :class:`Run` is one invocation of an agent (``BeforeInvocationEvent`` to
``AfterInvocationEvent``): its :class:`~seamscope.loop.Turn`, the open
model step and the tool calls under way. Strands runs one invocation of an
agent at a time; the tools of one model call may run concurrently (its
concurrent executor), so their entries are keyed by call id, behind the
run's lock.

:class:`Compactions` keeps, per conversation, each result the
``ContextOffloader`` replaced by its preview (the preview, the storage
references it names, the tokens it removed and the tokens reads brought
back), so each is priced once, counted as carried by every later prompt
that holds its preview, and a retrieval of one of its references is its
recall.

:func:`failed` records seamscope's own contained failures for every module
of the adapter.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import context as otel_context

from seamscope._internal import Invocation
from seamscope.adapters import _hooks
from seamscope.adapters._kit import Conversations
from seamscope.adapters._outputs import Outputs
from seamscope.adapters.strands import _translate as translate
from seamscope.decisions import ModelUsage, ToolCall
from seamscope.decisions.records import OffloadMechanism
from seamscope.loop import ChatCall, Iteration, Turn
from seamscope.telemetry import conventions as c

__all__ = ["HOOKS", "LOG", "Compactions", "Run", "Tool", "failed"]

HOOKS = _hooks.Contained("strands")
"""The adapter's containment of its own failures (every module's)."""
LOG = HOOKS.log
failed = HOOKS.failed


@dataclass
class Tool:
    """One tool call under way: its iteration, its ``execute_tool`` span (None
    when Strands records its own) and the context attached for its body."""

    iteration: Iteration
    call: ToolCall
    span: Invocation | None
    context: otel_context.Context
    token: object = None
    result: Any = None
    """The tool's own result, before any later hook replaced it."""


@dataclass
class Run:
    """The decision state and spans of one invocation.

    ``conversation``: the conversation id; ``scope``: whose offloads a
    recall may read; ``own_spans``: whether seamscope opens the GenAI spans
    (``invoke_agent``, ``chat``, ``execute_tool``), False when Strands' own
    tracing records them. ``offered``: the tools the open model call was
    offered (after the selection); ``structured``: Strands' structured-output
    tools of the call (never routed, never a tool run); ``finals``: the POST seam's final call
    per call id; ``error``: what failed the run, when a model call did.
    """

    turn: Turn
    conversation: str
    scope: str
    own_spans: bool
    lock: threading.RLock = field(default_factory=threading.RLock)
    iteration: Iteration | None = None
    chat: ChatCall | None = None
    usage: ModelUsage | None = None
    carried: tuple[Any, ...] = ()
    present: tuple[Any, ...] = ()
    offered: frozenset[str] = frozenset()
    recall_offered: bool = False
    structured: frozenset[str] = frozenset()
    finals: dict[str, ToolCall] = field(default_factory=dict)
    tools: dict[str, Tool] = field(default_factory=dict)
    error: BaseException | None = None
    closed: bool = False

    def end_chat(self, exc: BaseException | str | None = None) -> None:
        """End the open model call's span (failed with ``exc``), once."""
        chat, self.chat = self.chat, None
        if chat is not None:
            chat.invocation.end(exc)

    def end(self, exc: BaseException | str | None = None) -> None:
        """End every span still open: the tools' (a tool the run ended before it
        answered, as an interrupt in its before-tool hooks does:
        ``tool_call_cancelled``), the model call's, then the turn's (failed with
        ``exc``); once."""
        with self.lock:
            if self.closed:
                return
            self.closed = True
            tools, self.tools = list(self.tools.values()), {}
        for entry in tools:
            if entry.span is not None:
                entry.span.end(c.TOOL_CALL_CANCELLED if exc is None else exc)
        self.end_chat(exc)
        self.turn.end(exc)


@dataclass
class _Offload:
    compaction_id: str
    preview: str
    removed_tokens: float
    back: float = 0.0


@dataclass
class _Kept:
    by_call: dict[str, _Offload] = field(default_factory=dict)
    """tool call id -> the offload of its result"""
    by_reference: dict[str, _Offload] = field(default_factory=dict)
    absent: set[str] = field(default_factory=set)
    """tool call ids whose preview the shared offload store has no record of"""


class Compactions:
    """Per conversation (scope), the results the ``ContextOffloader`` replaced
    by a preview; at most ``limit`` conversations (the least recently used
    dropped first).

    An offload made on another worker is learnt from the shared offload store
    that keeps its record (:meth:`learn`): a prompt that holds its preview
    finds it there, and retrievals of its references are its recalls here
    too."""

    def __init__(self, limit: int) -> None:
        self._kept: Conversations[_Kept] = Conversations(limit, _Kept)

    def offloaded(
        self,
        scope: str,
        call_id: str,
        compaction_id: str,
        preview: str,
        references: tuple[str, ...],
        removed_tokens: float,
    ) -> bool:
        """Note a result replaced by ``preview``; False when it was already noted."""
        with self._kept.of(scope) as kept:
            if call_id in kept.by_call:
                return False
            entry = _Offload(compaction_id, preview, removed_tokens)
            kept.by_call[call_id] = entry
            for reference in references:
                kept.by_reference[reference] = entry
            return True

    def learn(self, scope: str, results: dict[str, str], outputs: Outputs) -> None:
        """Note the offloads whose preview ``results`` (a prompt's tool results'
        text by call id) hold that this process did not see made, from the
        shared store's records (one lookup for the new ones)."""
        previews = [i for i, text in results.items() if translate.is_offloader_preview(text)]
        if not previews:
            return
        with self._kept.of(scope) as kept:
            new = [i for i in previews if i not in kept.by_call and i not in kept.absent]
        if not new:
            return
        found = outputs.compactions(scope, OffloadMechanism.STRANDS_CONTEXT_OFFLOAD, new)
        with self._kept.of(scope) as kept:
            for call_id, record in found.items():
                if record is None:
                    kept.absent.add(call_id)
                elif call_id not in kept.by_call:
                    entry = _Offload(record.offload_id, record.stub, record.output_tokens)
                    kept.by_call[call_id] = entry
                    for reference in translate.references(record.stub):
                        kept.by_reference[reference] = entry

    def carried(self, scope: str, results: dict[str, str]) -> tuple[str, ...]:
        """The compaction ids whose preview a prompt holds (``results``: its tool
        results' text by call id), minus those whose reads brought back as
        many tokens as they removed (the preview saves nothing more)."""
        with self._kept.existing(scope) as kept:
            if kept is None:
                return ()
            found = [
                entry.compaction_id
                for call_id, text in results.items()
                if (entry := kept.by_call.get(call_id)) is not None
                and text == entry.preview
                and entry.back < entry.removed_tokens
            ]
            return tuple(dict.fromkeys(found))

    def read(self, scope: str, reference: str, tokens: float) -> str | None:
        """A retrieval of ``reference`` brought ``tokens`` back: the compaction it
        recalls (None: not a reference of this conversation's offloads)."""
        with self._kept.existing(scope) as kept:
            entry = None if kept is None else kept.by_reference.get(reference)
            if entry is None:
                return None
            entry.back += tokens
            return entry.compaction_id
