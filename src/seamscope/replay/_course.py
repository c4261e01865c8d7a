"""The recorded course of each conversation, read from OTLP-JSON for ``whatif``
and ``calibrate``.

What the ledger was told, in the order it was told, per
``gen_ai.conversation.id``:

* a model call: a ``chat`` span (by its end: usage is reported just before
  the span ends) with its ``gen_ai.usage.*`` tokens and, when the ledger
  accounted it, ``seamscope.offload.carried`` (the offloads its prompt
  carried). A conversation with no chat span so marked (a trace written
  before the attribute existed, or by an adapter that reports usage after its
  chat span ended) is read with the ledger's default: every chat span counts
  and carries every live offload that was not recalled;
* a gate call: a ``seamscope.offload_gate`` span (by its end: a fired offload
  is followed once the gate has decided) with its inputs and configuration.
  A gate span naming a ``seamscope.offload.mechanism`` decided a framework's
  own offload (a Deep Agents eviction, a Strands ``ContextOffloader``
  offload, gated live), not one of the gate's: it is not read (the
  offload it let through is its ``seamscope.compaction`` span);
* a recall: a ``seamscope.offload.recalled`` span event, by its own time;
* a compaction: a ``seamscope.compaction`` span, by its end;
* a settlement: a ``seamscope.offload.settle`` span, by its start.

Reading groups the spans into traces as ``explain`` does (see
:class:`CourseReader`): a span the input holds twice (a re-sent batch, a
collector's replay, anywhere in the input) counts once, and only the spans
above have their attributes read. Memory follows the traces open at once and
the largest conversation, not the file.
"""

from __future__ import annotations

import contextlib
import json
import marshal
import math
import os
import sqlite3
import tempfile
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from operator import itemgetter
from typing import Any, NamedTuple, TextIO, cast

from seamscope.decisions.records import SettleTrigger
from seamscope.explain import (
    SPILL_MEMORY_BYTES,
    Collector,
    FinishedTraces,
    Problem,
    SpanRecord,
    TraceInfo,
    merge,
    reread,
)
from seamscope.telemetry import conventions as c

_STORE_FAILED = c.OffloadReasonCode.STORE_FAILED.value

__all__ = [
    "Chat",
    "Compact",
    "Conversation",
    "CourseReader",
    "Gate",
    "Rates",
    "Recall",
    "Settle",
    "Event",
    "SETTLED_EARLY",
]

_KEY_VALUE = itemgetter("key", "value")


Rates = tuple[float, float, float | None, float | None]
"""Input, output, cache-read and cache-write rates, USD per 1M tokens, as recorded."""


class Chat(NamedTuple):
    t: int
    model: str
    usage: tuple[int, int, int, int]  # ModelUsage's fields: built when a ledger needs it
    carried: tuple[str, ...] | None  # None: not marked (the ledger's default)
    stubs: tuple[float, ...] = ()  # the stub size of each carried offload


class Gate(NamedTuple):
    t: int
    tool: str | None
    model: str
    output_tokens: float
    fire: bool
    offload_id: str | None
    horizon: int
    recall_probability: float
    stub_tokens: float | None
    threshold_tokens: int | None
    recall_input_tokens: int | None
    recall_output_tokens: int | None
    net_saving_usd: float
    store_failed: bool = False  # the gate fired but the offload store did not keep it
    rates: Rates | None = None  # the rates the gate priced its model at (USD per 1M tokens)


class Recall(NamedTuple):
    t: int
    offload_id: str
    model: str
    input_tokens: float
    output_tokens: int


class Compact(NamedTuple):
    t: int
    compaction_id: str
    mechanism: str
    model: str
    removed_tokens: float
    kept_tokens: float
    cost: Decimal
    horizon: int
    recall_probability: float
    priced: bool
    tool_call_ids: tuple[str, ...]
    tool: str | None = None  # gen_ai.tool.name: the tool whose output it took out


class Settle(NamedTuple):
    t: int
    offload_id: str
    trigger: str
    realized_net_usd: float | None
    turns_carried: int | None
    recalls: int | None
    model: str = ""
    rates: Rates | None = None  # the ledger's rates for ``model`` (USD per 1M tokens)


Event = Chat | Gate | Recall | Compact | Settle

SETTLED_EARLY = frozenset(
    t.value for t in (SettleTrigger.IDLE, SettleTrigger.EVICTED, SettleTrigger.EXPIRED)
)
"""Settle triggers that end the ledger's following of an offload, not the offload:
the conversation may go on, its prompts carrying the stub (a chat span no longer
lists it in ``seamscope.offload.carried``) and its model recalling the output (a
recall event). Such a settlement is censored: the offload is read on to the
conversation's end (its next settlement by another trigger, or the course's end)."""


@dataclass(slots=True)
class Conversation:
    """One conversation's events (in the order the ledger saw them, once sorted)."""

    conversation_id: str
    events: list[tuple[int, int, Event]] = field(default_factory=list)
    marked: bool = False  # some chat span carries seamscope.offload.carried

    def ordered(self) -> list[Event]:
        """The events by time (ties in reading order); unmarked chats dropped
        when the conversation is marked."""
        self.events.sort()  # (time, reading order): never equal, events never compared
        out: list[Event] = []
        for _, _, event in self.events:
            if self.marked and type(event) is Chat and event.carried is None:
                continue  # a model call the ledger did not account (a middleware's own)
            out.append(event)
        return out


def _value(raw: Any) -> Any:
    """An ``AnyValue`` as a Python value (None as None)."""
    if type(raw) is not dict:
        return raw
    if "stringValue" in raw:
        return raw["stringValue"]
    if "boolValue" in raw:
        return raw["boolValue"]
    if "doubleValue" in raw:
        return raw["doubleValue"]
    if "intValue" in raw:
        return int(raw["intValue"])
    if "arrayValue" in raw:
        return tuple(_value(v) for v in (raw["arrayValue"] or {}).get("values") or ())
    return None


_READ = frozenset(
    {
        c.ATTR_COMPACTION_COST_USD,
        c.ATTR_COMPACTION_KEPT_TOKENS,
        c.ATTR_COMPACTION_REMOVED_TOKENS,
        c.ATTR_COMPACTION_TOOL_CALL_IDS,
        c.ATTR_GEN_AI_CONVERSATION_ID,
        c.ATTR_GEN_AI_OPERATION_NAME,
        c.ATTR_GEN_AI_REQUEST_MODEL,
        c.ATTR_GEN_AI_TOOL_NAME,
        c.ATTR_GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS,
        c.ATTR_GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
        c.ATTR_GEN_AI_USAGE_CACHE_WRITE_INPUT_TOKENS,
        c.ATTR_GEN_AI_USAGE_INPUT_TOKENS,
        c.ATTR_GEN_AI_USAGE_OUTPUT_TOKENS,
        c.ATTR_OFFLOAD_CACHE_READ_USD_PER_MTOK,
        c.ATTR_OFFLOAD_CACHE_WRITE_USD_PER_MTOK,
        c.ATTR_OFFLOAD_CARRIED,
        c.ATTR_OFFLOAD_CARRIED_STUB_TOKENS,
        c.ATTR_OFFLOAD_INPUT_USD_PER_MTOK,
        c.ATTR_OFFLOAD_OUTPUT_USD_PER_MTOK,
        c.ATTR_OFFLOAD_FIRE,
        c.ATTR_OFFLOAD_HORIZON,
        c.ATTR_OFFLOAD_ID,
        c.ATTR_OFFLOAD_MECHANISM,
        c.ATTR_OFFLOAD_NET_SAVING_USD,
        c.ATTR_OFFLOAD_OUTPUT_TOKENS,
        c.ATTR_OFFLOAD_PRICING_SOURCE,
        c.ATTR_OFFLOAD_REALIZED_NET_SAVING_USD,
        c.ATTR_OFFLOAD_RECALLS,
        c.ATTR_OFFLOAD_RECALL_INPUT_TOKENS,
        c.ATTR_OFFLOAD_RECALL_OUTPUT_TOKENS,
        c.ATTR_OFFLOAD_RECALL_PROBABILITY,
        c.ATTR_OFFLOAD_SETTLE_TRIGGER,
        c.ATTR_OFFLOAD_STUB_TOKENS,
        c.ATTR_OFFLOAD_THRESHOLD_TOKENS,
        c.ATTR_OFFLOAD_TURNS_CARRIED,
    }
)
"""The attributes this module reads (the others are skipped undecoded)."""


class _Attrs:
    """One span's attributes (key to value as the file has it), decoded when read."""

    __slots__ = ("_raw",)

    def __init__(self, raw: dict[Any, Any]) -> None:
        self._raw = raw

    @classmethod
    def of_items(cls, items: Any) -> _Attrs:
        """From an OTLP attribute list (a list of ``{"key", "value"}`` objects)."""
        if not items:
            return cls({})
        try:
            return cls(dict(map(_KEY_VALUE, items)))
        except (TypeError, KeyError):  # an attribute without a value: the slow way
            return cls(
                {
                    a["key"]: a.get("value")
                    for a in items
                    if type(a) is dict and a.get("key") in _READ
                }
            )

    def get(self, key: str) -> Any:
        return _value(self._raw.get(key))

    def text(self, key: str, default: str = "") -> str:
        value = _value(self._raw.get(key))
        return value if type(value) is str else default

    def int(self, key: str, default: int | None = 0) -> int | None:
        value = _value(self._raw.get(key))
        if type(value) is int:
            return value
        if type(value) is float and value.is_integer():
            return int(value)
        return default

    def number(self, key: str) -> float | None:
        value = _value(self._raw.get(key))
        return value if type(value) in (int, float) else None

    def float(self, key: str) -> float:
        value = _value(self._raw.get(key))
        return float(value) if type(value) in (int, float) else 0.0


def _usage(a: _Attrs) -> tuple[int, int, int, int]:
    """A chat span's tokens, in :class:`ModelUsage`'s order (built when read back)."""
    total = a.int(c.ATTR_GEN_AI_USAGE_INPUT_TOKENS) or 0
    read = min(total, a.int(c.ATTR_GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS) or 0)
    # a trace written before the rename (semantic-conventions-genai #440) has only the old name
    written = a.int(c.ATTR_GEN_AI_USAGE_CACHE_WRITE_INPUT_TOKENS, None)
    if written is None:
        written = a.int(c.ATTR_GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS)
    write = min(total - read, written or 0)
    return (total, max(0, a.int(c.ATTR_GEN_AI_USAGE_OUTPUT_TOKENS) or 0), read, write)


def _cost(value: float) -> Decimal:
    return Decimal(repr(value)) if value else Decimal(0)


def _stored(event: Event | tuple[Any, ...]) -> tuple[Any, ...]:
    """``event`` as plain values :mod:`marshal` writes (see :func:`_restored`); a
    model call is read in that form already."""
    if type(event) is tuple:
        return event
    if type(event) is Compact:
        return (3, *event[:6], str(event.cost), *event[7:])
    kind = 1 if type(event) is Gate else 2 if type(event) is Recall else 4
    return (kind, *event)


def _restored(row: tuple[Any, ...]) -> Event:
    kind = row[0]
    if kind == 0:
        return Chat(row[1], row[2], row[3], row[4], row[5])
    if kind == 3:
        return Compact._make((*row[1:7], Decimal(row[7]), *row[8:]))
    return (Gate, Gate, Recall, Compact, Settle)[kind](*row[1:])


class _Inputs:
    """Every input read so far, read again in one stream (the second pass): a
    file from where it started, standard input and query answers from a copy."""

    def __init__(self) -> None:
        self._parts: list[tuple[Any, int]] = []
        self._current = 0

    def add(self, handle: Any, start: int) -> None:
        self._parts.append((handle, start))

    def rewind(self) -> _Inputs:
        for handle, start in self._parts:
            handle.seek(start)
        self._current = 0
        return self

    def readline(self, limit: int = -1) -> str:
        while self._current < len(self._parts):
            text: str = self._parts[self._current][0].readline(limit)
            if text:
                if not text.endswith("\n") and len(text) != limit:
                    text += "\n"  # a file's last line: never joined to the next file's first
                return text
            self._current += 1
        return ""


class _Index:
    """Where each finished trace's events are in the spill, by conversation, in the
    order conversations were first seen: a temporary SQLite file written in
    batches, so that memory does not grow with the input (the rows of a
    conversation are read back in one ordered query at the end)."""

    _BATCH = 4096

    def __init__(self, stack: contextlib.ExitStack) -> None:
        folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="seamscope-"))
        self._db = sqlite3.connect(os.path.join(folder, "course.sqlite"))
        stack.callback(self._db.close)
        for pragma in ("journal_mode = OFF", "synchronous = OFF", "cache_size = -2048"):
            self._db.execute(f"PRAGMA {pragma}")
        self._db.execute("CREATE TABLE seen (id TEXT PRIMARY KEY, n INTEGER) WITHOUT ROWID")
        self._db.execute(
            "CREATE TABLE chunks (id TEXT, again INTEGER, trace TEXT, at INTEGER, size INTEGER)"
        )
        self._seen = 0
        self._rows: list[tuple[str, bool, str, int, int]] = []

    def add(self, conversation_id: str, trace_id: str, again: bool, at: int, size: int) -> None:
        """One chunk of a conversation's events from a trace; ``again``: from the
        second pass (the whole trace, in place of the first pass's chunks)."""
        self._rows.append((conversation_id, again, trace_id, at, size))
        if len(self._rows) >= self._BATCH:
            self._flush()

    def _flush(self) -> None:
        rows, self._rows = self._rows, []
        first = self._seen
        self._seen += len(rows)
        self._db.executemany(
            "INSERT OR IGNORE INTO seen VALUES (?, ?)",
            [(r[0], first + n) for n, r in enumerate(rows)],
        )
        self._db.executemany("INSERT INTO chunks VALUES (?, ?, ?, ?, ?)", rows)

    def conversations(self, late: Collection[str]) -> Iterator[tuple[str, list[tuple[int, int]]]]:
        """Each conversation and where its chunks are, in first-seen order; a trace
        in ``late`` by its second-pass chunks only."""
        self._flush()
        rows = self._db.execute(
            "SELECT c.id, c.again, c.trace, c.at, c.size FROM chunks c JOIN seen s ON s.id = c.id "
            "ORDER BY s.n, c.rowid"
        )
        current: str | None = None
        chunks: list[tuple[int, int]] = []
        for conversation_id, again, trace_id, at, size in rows:
            if conversation_id != current:
                if current is not None:
                    yield current, chunks
                current, chunks = conversation_id, []
            if again or trace_id not in late:
                chunks.append((at, size))
        if current is not None:
            yield current, chunks


class CourseReader:
    """Reads OTLP-JSON lines and hands each conversation's course to ``finish``.

    Spans are grouped into traces as ``explain`` groups them
    (:class:`~seamscope.explain.Collector`): a trace is merged by span id
    (:func:`~seamscope.explain.merge`: the first copy of a re-sent span
    counts, wherever in the input the copy is) and a trace that received spans
    after it was finished is read again, whole, in a second pass. Each
    finished trace's events go to a spill file (in memory up to
    :data:`SPILL_MEMORY_BYTES`, on disk past it) and where they are to an
    index on disk, per conversation; of the trace itself only its id is kept,
    in a fixed-size filter (:class:`~seamscope.explain.FinishedTraces`).
    At :meth:`close_all` each conversation is read back, one at a time, in the
    order it was first seen, and handed on. Memory follows the traces open at
    once and the largest conversation, not the file.
    """

    def __init__(self, finish: Callable[[Conversation], None]) -> None:
        self._finish = finish
        self._source = "<input>"
        self._collector = Collector(self._trace, report=self._report, finished=FinishedTraces())
        self._inputs = _Inputs()
        self._stack = contextlib.ExitStack()
        self._spill: Any = self._stack.enter_context(
            tempfile.SpooledTemporaryFile(max_size=SPILL_MEMORY_BYTES)  # noqa: SIM115
        )
        self._size = 0
        self._index = _Index(self._stack)
        self._queried: Any = None
        self._trace_duplicates: dict[str, int] = {}
        self.problems: list[tuple[str, int, str]] = []
        self.problem_count = 0
        self.duplicates = 0
        """Spans dropped as copies of a span already read (same trace and span id)."""
        self._rates: tuple[dict[str, Rates], dict[str, Rates]] = ({}, {})  # gates, settles

    @property
    def lines(self) -> int:
        """Lines (export requests) read in the first pass."""
        return self._collector.reader.lines

    @property
    def rates(self) -> dict[str, Rates]:
        """The rates each model was priced at in the input (a settle span's, the
        ledger's, before a gate span's): for the models a conversation's own spans
        do not price."""
        gates, settles = self._rates
        return {**gates, **settles}

    def _report(self, problem: Problem) -> None:
        self.problem_count += 1
        if len(self.problems) < 100:
            span = f"span {problem.span_id}: " if problem.span_id else ""
            self.problems.append((self._source, problem.line, span + problem.message))

    def read(self, handle: TextIO, source: str = "<input>") -> None:
        """Read one input; traces and conversations go on into the next input."""
        self._source = source
        copy = None
        try:
            seekable = handle.seekable()
            start = handle.tell() if seekable else 0
        except (OSError, ValueError):
            seekable = False
        if seekable:
            self._inputs.add(handle, start)
        else:
            copy = self._stack.enter_context(
                tempfile.SpooledTemporaryFile(SPILL_MEMORY_BYTES, "w+", encoding="utf-8")  # noqa: SIM115
            )
            self._inputs.add(copy, 0)
        self._collector.read(handle, copy)

    def feed(self, request: Any, source: str = "<query>") -> None:
        """One export request already parsed (an answer of a query API); read with
        the others of the same source at :meth:`close_all`."""
        if self._queried is None:
            self._queried = (
                self._stack.enter_context(
                    tempfile.SpooledTemporaryFile(SPILL_MEMORY_BYTES, "w+", encoding="utf-8")  # noqa: SIM115
                ),
                source,
            )
        self._queried[0].write(json.dumps(request, separators=(",", ":")) + "\n")

    def close_all(self) -> None:
        """Finish reading (the second pass, when a trace needs it) and hand on every
        conversation."""
        try:
            if self._queried is not None:
                copy, source = self._queried
                self._queried = None
                copy.seek(0)
                self.read(copy, source)
            late = self._collector.late
            if late:
                reread(cast(TextIO, self._inputs.rewind()), late, self._trace)
            again = {t.trace_id for t in late}
            for conversation_id, chunks in self._index.conversations(again):
                self._finish(self._conversation(conversation_id, chunks))
        finally:
            self._stack.close()

    def _conversation(self, key: str, chunks: Iterable[tuple[int, int]]) -> Conversation:
        conv = Conversation(key)
        for offset, length in chunks:
            self._spill.seek(offset)
            for t, line, index, row in marshal.loads(self._spill.read(length)):
                event = _restored(row)
                if type(event) is Chat and event.carried is not None:
                    conv.marked = True
                conv.events.append((t, line * _LINE_SPAN + index, event))
        return conv

    def _trace(self, info: TraceInfo, records: list[SpanRecord]) -> None:
        spans, duplicates = merge(records)
        if info.late:  # the second pass: the whole trace, the first pass's copies again
            self.duplicates += duplicates - self._trace_duplicates.pop(info.trace_id, 0)
        elif duplicates:
            self.duplicates += duplicates
            self._trace_duplicates[info.trace_id] = duplicates
        found: dict[str, list[tuple[int, int, int, tuple[Any, ...]]]] = {}
        for index, span in enumerate(spans.values()):
            for key, event in self._events(span, spans):
                row = _stored(event)  # (kind, time, ...)
                found.setdefault(key, []).append((row[1], span.line, index, row))
                if isinstance(event, Settle | Gate) and event.rates is not None and event.model:
                    self._rates[type(event) is Settle].setdefault(event.model, event.rates)
        for key, rows in found.items():
            data = marshal.dumps(rows)
            self._spill.seek(self._size)
            self._spill.write(data)
            self._index.add(key, info.trace_id, info.late, self._size, len(data))
            self._size += len(data)

    @staticmethod
    def _events(
        span: SpanRecord, spans: dict[str, SpanRecord]
    ) -> Iterator[tuple[str, Event | tuple[Any, ...]]]:
        for raw in span.events or ():
            if type(raw) is dict and raw.get("name") == c.EVENT_OFFLOAD_RECALLED:
                recall = _recall(raw)
                if recall is not None:
                    yield recall
        name = span.name
        if name.startswith("chat"):
            kind = 0
        elif name == c.SPAN_OFFLOAD_GATE:
            kind = 1
        elif name == c.SPAN_COMPACTION:
            kind = 2
        elif name == c.SPAN_OFFLOAD_SETTLE:
            kind = 3
        else:
            return
        a = _Attrs(span.attributes)
        conversation_id = a.get(c.ATTR_GEN_AI_CONVERSATION_ID)
        if kind == 2 and (type(conversation_id) is not str or not conversation_id):
            conversation_id = _ancestor_conversation(span, spans)  # its iteration names it
        if type(conversation_id) is not str or not conversation_id:
            return  # the ledger follows conversations only
        end = span.end_ns
        if kind == 0:
            if a.get(c.ATTR_GEN_AI_OPERATION_NAME) != "chat":
                return
            carried = a.get(c.ATTR_OFFLOAD_CARRIED)
            if carried is not None:
                carried = tuple(str(x) for x in carried) if type(carried) is tuple else ()
            sizes = a.get(c.ATTR_OFFLOAD_CARRIED_STUB_TOKENS)
            stubs = tuple(float(x) for x in sizes) if isinstance(sizes, tuple) else ()
            model = a.text(c.ATTR_GEN_AI_REQUEST_MODEL)
            yield conversation_id, (0, end, model, _usage(a), carried, stubs)  # a Chat, stored
        elif kind == 1:
            if a.text(c.ATTR_OFFLOAD_MECHANISM):
                return  # a framework's offload decided: its compaction span is the event
            yield conversation_id, _gate(end, a)
        elif kind == 2:
            yield conversation_id, _compact(end, a)
        else:
            start = span.start_ns
            value = a.get(c.ATTR_OFFLOAD_REALIZED_NET_SAVING_USD)
            yield (
                conversation_id,
                Settle(
                    start,
                    a.text(c.ATTR_OFFLOAD_ID),
                    a.text(c.ATTR_OFFLOAD_SETTLE_TRIGGER, "explicit"),
                    float(value) if type(value) in (int, float) else None,
                    a.int(c.ATTR_OFFLOAD_TURNS_CARRIED, None),
                    a.int(c.ATTR_OFFLOAD_RECALLS, None),
                    a.text(c.ATTR_GEN_AI_REQUEST_MODEL),
                    _rates(a),
                ),
            )


_LINE_SPAN = 1 << 32  # reading order: line, then the span's place in its trace


def _ancestor_conversation(span: SpanRecord, spans: dict[str, SpanRecord]) -> str | None:
    parent = span.parent_span_id
    for _ in range(64):
        found = spans.get(parent) if parent else None
        if found is None:
            return None
        value = _value(found.attributes.get(c.ATTR_GEN_AI_CONVERSATION_ID))
        if type(value) is str and value:
            return value
        parent = found.parent_span_id
    return None


def _gate(t: int, a: _Attrs) -> Gate:
    offload_id = a.get(c.ATTR_OFFLOAD_ID)
    tool = a.get(c.ATTR_GEN_AI_TOOL_NAME)
    return Gate(
        t,
        tool if type(tool) is str else None,
        a.text(c.ATTR_GEN_AI_REQUEST_MODEL),
        a.float(c.ATTR_OFFLOAD_OUTPUT_TOKENS),
        a.get(c.ATTR_OFFLOAD_FIRE) is True,
        offload_id if type(offload_id) is str else None,
        a.int(c.ATTR_OFFLOAD_HORIZON) or 0,
        a.float(c.ATTR_OFFLOAD_RECALL_PROBABILITY),
        a.number(c.ATTR_OFFLOAD_STUB_TOKENS),
        a.int(c.ATTR_OFFLOAD_THRESHOLD_TOKENS, None),
        a.int(c.ATTR_OFFLOAD_RECALL_INPUT_TOKENS, None),
        a.int(c.ATTR_OFFLOAD_RECALL_OUTPUT_TOKENS, None),
        a.float(c.ATTR_OFFLOAD_NET_SAVING_USD),
        a.get(c.ATTR_OFFLOAD_REASON_CODE) == _STORE_FAILED,
        _rates(a),
    )


def _rates(a: _Attrs) -> Rates | None:
    """The rates a gate or settle span recorded; None without both the input and
    output rate (a span written before they were recorded, or unpriced)."""
    rate_in = a.number(c.ATTR_OFFLOAD_INPUT_USD_PER_MTOK)
    rate_out = a.number(c.ATTR_OFFLOAD_OUTPUT_USD_PER_MTOK)
    if not (_rate(rate_in) and _rate(rate_out)):
        return None
    read = a.number(c.ATTR_OFFLOAD_CACHE_READ_USD_PER_MTOK)
    write = a.number(c.ATTR_OFFLOAD_CACHE_WRITE_USD_PER_MTOK)
    return (
        float(rate_in),  # type: ignore[arg-type]
        float(rate_out),  # type: ignore[arg-type]
        float(read) if _rate(read) else None,  # type: ignore[arg-type]
        float(write) if _rate(write) else None,  # type: ignore[arg-type]
    )


def _rate(value: float | None) -> bool:
    return value is not None and math.isfinite(value) and value >= 0


def _compact(t: int, a: _Attrs) -> Compact:
    ids = a.get(c.ATTR_COMPACTION_TOOL_CALL_IDS)
    return Compact(
        t,
        a.text(c.ATTR_OFFLOAD_ID),
        a.text(c.ATTR_OFFLOAD_MECHANISM, "context_editing"),
        a.text(c.ATTR_GEN_AI_REQUEST_MODEL),
        a.float(c.ATTR_COMPACTION_REMOVED_TOKENS),
        a.number(c.ATTR_COMPACTION_KEPT_TOKENS) or 0,
        _cost(a.float(c.ATTR_COMPACTION_COST_USD)),
        a.int(c.ATTR_OFFLOAD_HORIZON) or 0,
        a.float(c.ATTR_OFFLOAD_RECALL_PROBABILITY),
        a.text(c.ATTR_OFFLOAD_PRICING_SOURCE, "none") != "none",
        tuple(str(x) for x in ids) if isinstance(ids, tuple) else (),
        a.text(c.ATTR_GEN_AI_TOOL_NAME) or None,
    )


def _recall(ev: dict[str, Any]) -> tuple[str, Recall] | None:
    a = _Attrs.of_items(ev.get("attributes"))
    conversation_id = a.text(c.ATTR_GEN_AI_CONVERSATION_ID)
    offload_id = a.text(c.ATTR_OFFLOAD_ID)
    if not conversation_id or not offload_id:
        return None
    t = _int(ev.get("timeUnixNano"))
    recall = Recall(
        t,
        offload_id,
        a.text(c.ATTR_GEN_AI_REQUEST_MODEL),
        max(0, a.number(c.ATTR_GEN_AI_USAGE_INPUT_TOKENS) or 0),
        max(0, a.int(c.ATTR_GEN_AI_USAGE_OUTPUT_TOKENS) or 0),
    )
    return conversation_id, recall


def _int(raw: Any) -> int:
    try:
        return max(0, int(raw or 0))
    except (TypeError, ValueError):
        return 0
