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
  is followed once the gate has decided) with its inputs and configuration;
* a recall: a ``seamscope.offload.recalled`` span event, by its own time;
* a compaction: a ``seamscope.compaction`` span, by its end;
* a settlement: a ``seamscope.offload.settle`` span, by its start.

Reading is one ``json.loads`` per line and a look at each span's name;
only the spans above have their attributes read. A conversation's events are
handed on once it has settled and :data:`SETTLED_IDLE_LINES` lines went by
without a span of it, or once :data:`IDLE_LINES` lines went by without one
(a conversation that never offloaded never settles), and at the end of the
input: memory follows the conversations open at once, not the file. A span
read twice (same span id in the same conversation) counts once.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from operator import itemgetter
from typing import Any, NamedTuple, TextIO

from seamscope.cli._otlp import MAX_LINE_CHARS, read_lines
from seamscope.decisions.records import ModelUsage
from seamscope.telemetry import conventions as c

_STORE_FAILED = c.OffloadReasonCode.STORE_FAILED.value

__all__ = [
    "IDLE_LINES",
    "SETTLED_IDLE_LINES",
    "Chat",
    "Compact",
    "Conversation",
    "CourseReader",
    "Gate",
    "Recall",
    "Settle",
    "Event",
]

SETTLED_IDLE_LINES = 64
"""Lines without a span of a settled conversation after which it is handed on."""
IDLE_LINES = 100_000
"""Lines without a span of any conversation after which it is handed on."""


_KEY_VALUE = itemgetter("key", "value")
_MAX_ORPHANS = 4096  # spans waiting for their parent's conversation id


class Chat(NamedTuple):
    t: int
    model: str
    usage: ModelUsage
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


class Settle(NamedTuple):
    t: int
    offload_id: str
    trigger: str
    realized_net_usd: float | None
    turns_carried: int | None
    recalls: int | None


Event = Chat | Gate | Recall | Compact | Settle


@dataclass(slots=True)
class Conversation:
    """One conversation's events (in the order the ledger saw them, once sorted)."""

    conversation_id: str
    events: list[tuple[int, int, Event]] = field(default_factory=list)
    span_ids: set[str] = field(default_factory=set)
    marked: bool = False  # some chat span carries seamscope.offload.carried
    settled: bool = False
    last_line: int = 0

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
        c.ATTR_GEN_AI_USAGE_INPUT_TOKENS,
        c.ATTR_GEN_AI_USAGE_OUTPUT_TOKENS,
        c.ATTR_OFFLOAD_CARRIED,
        c.ATTR_OFFLOAD_CARRIED_STUB_TOKENS,
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
    """One span's attributes: keys mapped at C speed, values decoded when read."""

    __slots__ = ("_raw",)

    def __init__(self, items: Any) -> None:
        if not items:
            self._raw: dict[str, Any] = {}
            return
        try:
            self._raw = dict(map(_KEY_VALUE, items))
        except (TypeError, KeyError):  # an attribute without a value: the slow way
            self._raw = {a["key"]: a.get("value") for a in items if a.get("key") in _READ}

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


def _usage(a: _Attrs) -> ModelUsage:
    total = a.int(c.ATTR_GEN_AI_USAGE_INPUT_TOKENS) or 0
    read = min(total, a.int(c.ATTR_GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS) or 0)
    write = min(total - read, a.int(c.ATTR_GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS) or 0)
    return ModelUsage(total, max(0, a.int(c.ATTR_GEN_AI_USAGE_OUTPUT_TOKENS) or 0), read, write)


def _cost(value: float) -> Decimal:
    return Decimal(repr(value)) if value else Decimal(0)


class CourseReader:
    """Reads OTLP-JSON lines and hands each finished conversation to ``finish``."""

    def __init__(self, finish: Callable[[Conversation], None]) -> None:
        self._finish = finish
        self._open: dict[str, Conversation] = {}
        self._source = "<input>"
        self._orphans: dict[str, list[tuple[int, dict[str, Any]]]] = {}
        self._seq = 0
        self._tick = 0  # lines read over every input, for the idle rule
        self.lines = 0
        self.problems: list[tuple[str, int, str]] = []
        self.problem_count = 0
        self.spans = 0

    def _problem(self, number: int, message: str) -> None:
        self.problem_count += 1
        if len(self.problems) < 100:
            self.problems.append((self._source, number, message))

    def read(self, handle: TextIO, source: str = "<input>") -> None:
        """Read one input; conversations still open stay open (the next input
        may go on with them) until :meth:`close_all`."""
        self._source = source
        for number, text in read_lines(handle):
            self._tick += 1
            if text is None:
                self._problem(number, f"line longer than {MAX_LINE_CHARS} characters; skipped")
                continue
            if not text.strip():
                continue
            self.lines += 1
            try:
                request = json.loads(text)
            except (ValueError, RecursionError) as exc:
                self._problem(number, f"not valid JSON ({type(exc).__name__}); skipped")
                continue
            self._request(number, request)

    def feed(self, request: Any, source: str = "<query>") -> None:
        """One export request already parsed (an answer of a query API)."""
        self._source = source
        self._tick += 1
        self.lines += 1
        self._request(self._tick, request)

    def _request(self, number: int, request: Any) -> None:
        if type(request) is not dict:
            self._problem(number, "not an OTLP export request; skipped")
            return
        try:
            for rs in request.get("resourceSpans") or ():
                for ss in rs.get("scopeSpans") or ():
                    for sp in ss.get("spans") or ():
                        self._span(number, sp)
        except (TypeError, AttributeError, KeyError, ValueError) as exc:
            self._problem(number, f"malformed span ({type(exc).__name__}); rest of line skipped")
        if self._tick % 64 == 0:
            self._expire(self._tick)

    def close_all(self) -> None:
        for conversation in list(self._open.values()):
            self._close(conversation)

    def _conversation(self, conversation_id: str) -> Conversation:
        conv = self._open.get(conversation_id)
        if conv is None:
            conv = self._open[conversation_id] = Conversation(conversation_id)
        conv.last_line = self._tick
        return conv

    def _add(self, conv: Conversation, t: int, event: Event) -> None:
        self._seq += 1
        conv.events.append((t, self._seq, event))

    def _span(self, number: int, sp: dict[str, Any]) -> None:
        self.spans += 1
        name = sp["name"]
        if self._orphans and sp.get("spanId") in self._orphans:
            self._adopt(sp)
        events = sp.get("events")
        if events:
            for ev in events:
                if ev.get("name") == c.EVENT_OFFLOAD_RECALLED:
                    self._recall(number, ev)
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
        a = _Attrs(sp.get("attributes"))
        conversation_id = a.get(c.ATTR_GEN_AI_CONVERSATION_ID)
        if type(conversation_id) is not str or not conversation_id:
            parent = sp.get("parentSpanId")
            if kind == 2 and parent and len(self._orphans) < _MAX_ORPHANS:
                # a compaction span names no conversation: its iteration does
                self._orphans.setdefault(parent, []).append((number, sp))
            return  # the ledger follows conversations only
        conv = self._conversation(conversation_id)
        span_id = str(sp.get("spanId"))
        if span_id in conv.span_ids:
            return
        conv.span_ids.add(span_id)
        end = int(sp.get("endTimeUnixNano") or 0)
        if kind == 0:
            if a.get(c.ATTR_GEN_AI_OPERATION_NAME) != "chat":
                return
            carried = a.get(c.ATTR_OFFLOAD_CARRIED)
            if carried is not None:
                conv.marked = True
                carried = tuple(str(x) for x in carried)
            sizes = a.get(c.ATTR_OFFLOAD_CARRIED_STUB_TOKENS)
            stubs = tuple(float(x) for x in sizes) if isinstance(sizes, tuple) else ()
            model = a.text(c.ATTR_GEN_AI_REQUEST_MODEL)
            self._add(conv, end, Chat(end, model, _usage(a), carried, stubs))
        elif kind == 1:
            self._add(conv, end, self._gate(end, a))
        elif kind == 2:
            self._add(conv, end, self._compact(end, a))
        else:
            start = int(sp.get("startTimeUnixNano") or 0)
            value = a.get(c.ATTR_OFFLOAD_REALIZED_NET_SAVING_USD)
            settle = Settle(
                start,
                a.text(c.ATTR_OFFLOAD_ID),
                a.text(c.ATTR_OFFLOAD_SETTLE_TRIGGER, "explicit"),
                float(value) if type(value) in (int, float) else None,
                a.int(c.ATTR_OFFLOAD_TURNS_CARRIED, None),
                a.int(c.ATTR_OFFLOAD_RECALLS, None),
            )
            conv.settled = True
            self._add(conv, start, settle)

    @staticmethod
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
        )

    @staticmethod
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
        )

    def _adopt(self, parent: dict[str, Any]) -> None:
        """Give the spans waiting for ``parent`` its conversation id."""
        waiting = self._orphans.pop(str(parent.get("spanId")), [])
        conversation_id = _Attrs(parent.get("attributes")).get(c.ATTR_GEN_AI_CONVERSATION_ID)
        if type(conversation_id) is not str or not conversation_id:
            return
        for number, sp in waiting:
            items = list(sp.get("attributes") or ())
            items.append({"key": c.ATTR_GEN_AI_CONVERSATION_ID, "value": conversation_id})
            self._span(number, {**sp, "attributes": items})
            self.spans -= 1

    def _recall(self, number: int, ev: dict[str, Any]) -> None:
        a = _Attrs(ev.get("attributes"))
        conversation_id = a.text(c.ATTR_GEN_AI_CONVERSATION_ID)
        offload_id = a.text(c.ATTR_OFFLOAD_ID)
        if not conversation_id or not offload_id:
            return
        t = int(ev.get("timeUnixNano") or 0)
        conv = self._conversation(conversation_id)
        key = f"recall:{offload_id}:{t}"
        if key in conv.span_ids:
            return
        conv.span_ids.add(key)
        recall = Recall(
            t,
            offload_id,
            a.text(c.ATTR_GEN_AI_REQUEST_MODEL),
            max(0, a.number(c.ATTR_GEN_AI_USAGE_INPUT_TOKENS) or 0),
            max(0, a.int(c.ATTR_GEN_AI_USAGE_OUTPUT_TOKENS) or 0),
        )
        self._add(conv, t, recall)

    def _expire(self, number: int) -> None:
        for conv in [
            conv
            for conv in self._open.values()
            if number - conv.last_line >= (SETTLED_IDLE_LINES if conv.settled else IDLE_LINES)
        ]:
            self._close(conv)

    def _close(self, conv: Conversation) -> None:
        del self._open[conv.conversation_id]
        self._finish(conv)
