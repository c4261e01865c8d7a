"""Grouping a file's spans into traces, with memory bounded by the largest trace.

``explain`` prints turns in start order and numbers them per conversation,
so nothing can be printed before the whole file is read; and a file may be
far larger than memory. So a trace is *finished* (handed to a callback that
turns it into its output and keeps only that) as soon as it looks complete,
and its spans are dropped:

* when its root span (no parent) has arrived: SDKs export a span when it
  ends and a root ends after its children, so they came first;
* when :data:`IDLE_LINES` lines went by without a span of it (a trace whose
  root is elsewhere, e.g. behind a remote parent);
* when the spans of open traces exceed :data:`OPEN_BYTES` of the file, the
  least recently active traces first;
* at the end of the file.

A span that arrives for a finished trace (a re-sent batch, a span that ended
after its root) marks the trace *late*. After the first pass,
:func:`reread` reads the file again for the late traces only, writes their
spans to a spill file (in memory up to :data:`SPILL_MEMORY_BYTES`, on disk
past it) and finishes each once more with all of its spans, in one piece.

What stays in memory for the whole run is a :class:`TraceInfo` per trace
(about 300 bytes) and what the callback keeps; spans are held only while
their trace is open.
"""

from __future__ import annotations

import marshal
import tempfile
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TextIO

from seamscope.explain import _otlp
from seamscope.explain._otlp import (
    LineReader,
    Problem,
    SpanRecord,
    SpanSummary,
    compact,
    read_lines,
    text_value,
)
from seamscope.explain._views import tool_names
from seamscope.telemetry import conventions as c

__all__ = [
    "IDLE_LINES",
    "OPEN_BYTES",
    "SPILL_MEMORY_BYTES",
    "Collector",
    "FinishedTraces",
    "TraceInfo",
    "reread",
]

_SETTLE_SPANS = frozenset({c.SPAN_OFFLOAD_SETTLE, c.SPAN_OFFLOAD_SHADOW_SETTLE})
"""Spans that make a trace a settlement's (shown in the closing summary, not as undecided)."""

IDLE_LINES = 16
"""Lines without a span of an open trace after which it is finished."""
OPEN_BYTES = 32 * 1024 * 1024
"""Characters of the file whose spans may be held in open traces at once."""
SPILL_MEMORY_BYTES = 32 * 1024 * 1024
"""Span records of late traces kept in memory before the spill moves to disk."""
COMPACT_CHARS = 4 * 1024 * 1024
"""Characters of the file past which an open trace's values are compacted."""

Finish = Callable[["TraceInfo", list[SpanRecord]], None]


@dataclass(slots=True)
class TraceInfo:
    """What the first pass knows of a trace (from every span, late ones too)."""

    trace_id: str
    start_ns: int
    spans: int = 0
    root_name: str | None = None
    conversation_id: str | None = None
    conversation_from_root: bool = False
    has_iteration: bool = False
    has_settlement: bool = False
    late: bool = False
    finished: bool = False
    last_line: int = 0
    output: Any = None  # what the finish callback kept

    @property
    def has_decisions(self) -> bool:
        return self.has_iteration

    def note(self, name: str, start: int, is_root: bool, conversation: str | None) -> None:
        """Count one span (of the trace, kept whole or not)."""
        self.spans += 1
        if start < self.start_ns:
            self.start_ns = start
        if name == c.SPAN_ITERATION:
            self.has_iteration = True
        elif name in _SETTLE_SPANS:
            self.has_settlement = True
        if is_root and self.root_name is None:
            self.root_name = name
        if conversation is not None and not self.conversation_from_root:
            if is_root:
                self.conversation_id, self.conversation_from_root = conversation, True
            elif self.conversation_id is None and name == c.SPAN_ITERATION:
                self.conversation_id = conversation

    def observe(self, spans: list[SpanRecord]) -> bool:
        """Count spans kept whole, as :meth:`note` does; True when one is a root."""
        rooted = False
        self.spans += len(spans)
        start = min(s.start_ns for s in spans)
        if start < self.start_ns:
            self.start_ns = start
        for span in spans:
            name = span.name
            is_root = span.parent_span_id is None
            if name == c.SPAN_ITERATION:
                self.has_iteration = True
            elif name in _SETTLE_SPANS:
                self.has_settlement = True
            elif not is_root:
                continue
            if is_root:
                rooted = True
                if self.root_name is None:
                    self.root_name = name
            if not self.conversation_from_root:
                conversation = text_value(span.attributes.get(c.ATTR_GEN_AI_CONVERSATION_ID))
                if conversation is not None:
                    if is_root:
                        self.conversation_id, self.conversation_from_root = conversation, True
                    elif self.conversation_id is None and name == c.SPAN_ITERATION:
                        self.conversation_id = conversation
        return rooted


class FinishedTraces:
    """The ids of finished traces in a fixed 8 MiB (a Bloom filter: three bits a
    trace, placed by the id's hash), for a reader that keeps nothing else of a
    finished trace, so that its memory does not grow with the input. It may hold
    an id it was never given (about one in 1 000 at 2.5 million traces): such a
    trace is read as late, in the second pass, whole, which costs a re-read and
    changes no result."""

    _BITS = 1 << 26

    def __init__(self) -> None:
        self._bits = bytearray(self._BITS // 8)

    def _places(self, trace_id: str) -> tuple[int, int, int]:
        h = hash(trace_id)  # computed once per string, and already for the trace dicts
        mask = self._BITS - 1
        first, step = h & mask, (h >> 32) & mask | 1
        return first, (first + step) & mask, (first + 2 * step) & mask

    def add(self, trace_id: str) -> None:
        bits = self._bits
        for place in self._places(trace_id):
            bits[place >> 3] |= 1 << (place & 7)

    def __contains__(self, trace_id: str) -> bool:
        bits = self._bits
        return all(bits[place >> 3] >> (place & 7) & 1 for place in self._places(trace_id))


@dataclass(slots=True)
class _Open:
    spans: list[SpanRecord] = field(default_factory=list)
    chars: int = 0
    compact: bool = False

    def add(self, spans: list[SpanRecord], chars: int) -> None:
        """Hold ``spans``; past :data:`COMPACT_CHARS`, in their compact form."""
        self.spans.extend(spans)
        self.chars += chars
        if self.compact:
            for span in spans:
                compact(span.attributes)
        elif self.chars > COMPACT_CHARS:
            self.compact = True
            for span in self.spans:
                compact(span.attributes)


class Collector:
    """The first pass: spans per open trace, traces finished as they complete."""

    def __init__(
        self,
        finish: Finish,
        *,
        keep: Callable[[str], bool] | None = None,
        collect_tools: bool = False,
        report: Callable[[Problem], None],
        idle_lines: int | None = None,
        open_bytes: int | None = None,
        finished: FinishedTraces | None = None,
    ) -> None:
        """``finished``: keep only the ids of finished traces, there, and forget
        their :class:`TraceInfo` (:attr:`traces` then holds the open and late ones)."""
        self.traces: dict[str, TraceInfo] = {}
        self.tools: set[str] = set()
        self.problems = 0
        self.reader = LineReader(
            keep=keep,
            conversation_key=c.ATTR_GEN_AI_CONVERSATION_ID,
            conversation_spans=(c.SPAN_ITERATION,),
        )
        self._finish = finish
        self._report = report
        self._collect_tools = collect_tools
        self._idle = IDLE_LINES if idle_lines is None else idle_lines
        self._budget = OPEN_BYTES if open_bytes is None else open_bytes
        self._open: OrderedDict[str, _Open] = OrderedDict()  # least recently active first
        self._open_chars = 0
        self.skipped = 0  # lines ruled out by ``needles`` unparsed
        self._finished = finished

    @property
    def late(self) -> list[TraceInfo]:
        return [t for t in self.traces.values() if t.late]

    def read(
        self, handle: TextIO, copy: Any = None, needles: tuple[str, ...] | None = None
    ) -> None:
        """Read every line of ``handle`` (and write it to ``copy``, for a second pass).

        ``needles``: a line that holds none of these strings is skipped unparsed (and
        counted in :attr:`skipped`): with ``--trace-id``, the forms of the id's prefix
        (:func:`~seamscope.explain._otlp.id_needles`); a skipped line's problems go unnamed.
        """
        for number, text in read_lines(handle):
            if copy is not None:
                copy.write(text if text is not None else "\n")
            if text is None:
                self.problem(
                    Problem(number, f"line longer than {_otlp.MAX_LINE_CHARS} characters; skipped")
                )
                continue
            if needles is not None and not _holds(text, needles):
                if not text.isspace():
                    self.skipped += 1
                self._expire(number)
                continue
            spans, summaries, problems = self.reader.read(number, text)
            for problem in problems:
                self.problem(problem)
            if spans or summaries:
                self._add(number, len(text), spans, summaries)
            self._expire(number)
        for trace_id in list(self._open):
            self._close(trace_id)

    def summarize(
        self,
        handle: TextIO,
        needles: tuple[str, ...] | None,
        exclude: tuple[str, ...],
    ) -> None:
        """Count, from their summaries, the spans of the lines the first pass skipped
        that hold one of ``needles`` (all of them when None) and none of ``exclude``
        (those it read): with ``--trace-id``, the other turns of the chosen trace's
        conversation, so that it gets its number."""
        reader = LineReader(
            keep=_nothing,
            conversation_key=c.ATTR_GEN_AI_CONVERSATION_ID,
            conversation_spans=(c.SPAN_ITERATION,),
        )
        for number, text in read_lines(handle):
            if text is None or _holds(text, exclude):
                continue
            if needles is not None and not _holds(text, needles):
                continue
            _, summaries, _ = reader.read(number, text)  # problems are not ours to name here
            for s in summaries:
                self._info(s.trace_id, s.start_ns).note(
                    s.name, s.start_ns, s.is_root, s.conversation_id
                )

    def problem(self, problem: Problem) -> None:
        self.problems += 1
        self._report(problem)

    def _info(self, trace_id: str, start: int) -> TraceInfo:
        info = self.traces.get(trace_id)
        if info is None:
            info = self.traces[trace_id] = TraceInfo(trace_id, start)
        return info

    def _add(
        self, number: int, chars: int, spans: list[SpanRecord], summaries: list[SpanSummary]
    ) -> None:
        for s in summaries:
            self._info(s.trace_id, s.start_ns).note(
                s.name, s.start_ns, s.is_root, s.conversation_id
            )
        if not spans:
            return
        share = chars // len(spans)
        groups: dict[str, list[SpanRecord]] = {}
        for span in spans:
            group = groups.get(span.trace_id)
            if group is None:
                groups[span.trace_id] = [span]
            else:
                group.append(span)
        for trace_id, group in groups.items():
            info = self.traces.get(trace_id)
            if info is None:
                info = self._info(trace_id, group[0].start_ns)
                if self._finished is not None and trace_id in self._finished:
                    info.finished = True  # finished and forgotten: these spans are late
            rooted = info.observe(group)
            info.last_line = number
            if self._collect_tools:
                for span in group:
                    self.tools.update(tool_names(span))
            if info.finished:
                info.late = True
                continue
            held = self._open.get(trace_id)
            if held is None:
                held = self._open[trace_id] = _Open()
            else:
                self._open.move_to_end(trace_id)
            held.add(group, share * len(group))
            self._open_chars += share * len(group)
            if rooted:
                self._close(trace_id)

    def _expire(self, number: int) -> None:
        """Finish idle traces, and the least recently active past the budget
        (but never the last one open: finishing it early would not free it)."""
        while self._open:
            trace_id = next(iter(self._open))
            idle = self.traces[trace_id].last_line <= number - self._idle
            if not idle and (self._open_chars <= self._budget or len(self._open) == 1):
                return
            self._close(trace_id)

    def _close(self, trace_id: str) -> None:
        held = self._open.pop(trace_id)
        self._open_chars -= held.chars
        info = self.traces[trace_id]
        info.finished = True
        self._finish(info, held.spans)
        if self._finished is not None and not info.late:
            self._finished.add(trace_id)
            del self.traces[trace_id]


def _holds(text: str, needles: tuple[str, ...]) -> bool:
    return any(needle in text for needle in needles)


def _nothing(trace_id: str) -> bool:
    return False


def reread(
    handle: TextIO,
    late: Iterable[TraceInfo],
    finish: Finish,
) -> None:
    """Second pass: every span of the ``late`` traces, each finished in one piece."""
    wanted = {t.trace_id: t for t in late}
    reader = LineReader(keep=wanted.__contains__)
    chunks: dict[str, list[tuple[int, int]]] = {t: [] for t in wanted}
    size = 0
    with tempfile.SpooledTemporaryFile(max_size=SPILL_MEMORY_BYTES) as spill:
        for number, text in read_lines(handle):
            if text is None:
                continue
            spans, _, _ = reader.read(number, text)  # problems were named by the first pass
            groups: dict[str, list[tuple[Any, ...]]] = {}
            for span in spans:
                groups.setdefault(span.trace_id, []).append(tuple(span))
            for trace_id, group in groups.items():
                data = marshal.dumps(group)
                spill.write(data)
                chunks[trace_id].append((size, len(data)))
                size += len(data)
        for trace_id, info in wanted.items():
            held = _Open()
            for offset, length in chunks[trace_id]:
                spill.seek(offset)
                records = list(map(SpanRecord._make, marshal.loads(spill.read(length))))
                held.add(records, length)
            finish(info, held.spans)
