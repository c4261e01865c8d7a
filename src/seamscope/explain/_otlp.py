"""Read OTLP-JSON (one export request per line) into plain span records.

The format is what the OpenTelemetry file exporters write (the Python
``opentelemetry-exporter-otlp-json-file`` package and the Collector's
``file`` exporter): each line is ``{"resourceSpans": [...]}``. Trace and span
ids are hex strings (base64 is accepted too); ``intValue`` may be a string.

The reader is defensive, because the files come from other programs and
may be cut short, repeated or hostile. Nothing in a line makes it raise:

* a line that is not JSON, is nested too deeply, holds a number Python
  cannot convert, or is longer than :data:`MAX_LINE_CHARS` is a
  :class:`Problem` naming the line, and is skipped;
* a span with a missing or malformed field (an id that is not hex, a time
  outside 64 bits, no name, attributes or events that are not lists) is a
  :class:`Problem` naming the line and the span id, and is skipped; the
  other spans of the line are kept;
* attribute values are kept as the file has them (OTLP ``AnyValue``
  objects) and decoded only when read, through :class:`Values`: a value of
  the wrong type, an ``intValue`` outside 64 bits, a non-finite double or an
  array nested deeper than :data:`MAX_VALUE_DEPTH` reads as absent and is
  reported once as a :class:`Problem` of its span; strings are cut to
  :data:`MAX_STRING_CHARS` characters and arrays to :data:`MAX_ARRAY_ITEMS`
  items, so one huge attribute costs its parse and nothing after.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, NamedTuple, TextIO, cast

__all__ = [
    "LOG_LINE",
    "MAX_ARRAY_ITEMS",
    "MAX_LINE_CHARS",
    "MAX_STRING_CHARS",
    "MAX_VALUE_DEPTH",
    "LineReader",
    "Problem",
    "SpanRecord",
    "SpanSummary",
    "Values",
    "compact",
    "decode",
    "id_needles",
    "text_needles",
    "read_lines",
    "text_value",
]

MAX_LINE_CHARS = 64 * 1024 * 1024
"""A longer line is skipped unparsed (it is read in pieces, never held whole)."""
MAX_STRING_CHARS = 2048
"""Characters kept of a string value; the rest is replaced by a count."""
MAX_ARRAY_ITEMS = 256
"""Items kept of an array value."""
MAX_VALUE_DEPTH = 16
"""Nesting of ``arrayValue``/``kvlistValue`` accepted in one attribute."""

_INT64 = (-(2**63), 2**63 - 1)
_UINT64 = (0, 2**64 - 1)
_HEX32 = re.compile(r"[0-9a-f]{32}")
_HEX16 = re.compile(r"[0-9a-f]{16}")
_STATUS = {0: "UNSET", 1: "OK", 2: "ERROR", "STATUS_CODE_OK": "OK", "STATUS_CODE_ERROR": "ERROR"}
_OTHER_SIGNALS = ("resourceMetrics", "resourceLogs", "resourceProfiles")
_KEY_VALUE = itemgetter("key", "value")


class SpanRecord(NamedTuple):
    """One span, framework-free: what the views and the span tree read.

    A named tuple rather than a frozen dataclass: the reader builds one per
    span of the file, a frozen dataclass of these 11 fields takes four times
    as long to build (1.2 µs against 0.3 µs on the machine of docs/performance.md's
    benchmark), and the second pass spills records with :mod:`marshal`, which
    stores plain tuples. ``attributes`` maps each key to its value as the
    file has it; read them with :class:`Values`. ``events`` are the file's
    event objects, likewise.
    """

    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    start_ns: int
    end_ns: int
    attributes: dict[Any, Any]
    events: Any = ()
    status_code: str = "UNSET"
    line: int = 0
    service: str | None = None


@dataclass(frozen=True, slots=True)
class SpanSummary:
    """What pass one keeps of a span it does not keep whole (``--trace-id``)."""

    trace_id: str
    name: str
    start_ns: int
    is_root: bool
    conversation_id: str | None


# a line of a structlog JSON log (an "event" key and no resourceSpans): the demo
# writes one beside its trace, and explain says which file to open instead
LOG_LINE = "a log line (structlog JSON), not an OTLP trace export"


@dataclass(frozen=True, slots=True)
class Problem:
    """A line or span that was skipped: where (1-based line, span id) and why."""

    line: int
    message: str
    span_id: str | None = None

    def describe(self, source: str) -> str:
        where = f"{source}:{self.line}" if self.line else source
        span = f": span {self.span_id}" if self.span_id else ""
        return f"{where}{span}: {self.message}"


class _Bad(ValueError):
    """A field that cannot be read; its message names it."""


_CUT_NOTE = 40  # room for the note a cut string ends with


def _cut(text: str) -> str:
    if len(text) <= MAX_STRING_CHARS:
        return text
    return f"{text[:MAX_STRING_CHARS]}… ({len(text) - MAX_STRING_CHARS} more characters)"


def _int_in(raw: Any, bounds: tuple[int, int], what: str) -> int:
    if type(raw) is int:
        value = raw
    elif type(raw) is str:
        if len(raw) > 21:  # never within 64 bits; int() of it could take long
            digits = raw.strip().removeprefix("-")
            if digits.isascii() and digits.isdigit():
                raise _Bad(f"{what} is out of the 64-bit range")
            raise _Bad(f"{what} is not an integer ({raw[:40]!r}…)")
        try:
            value = int(raw)
        except ValueError:
            raise _Bad(f"{what} is not an integer ({raw!r})") from None
    else:
        raise _Bad(f"{what} is not an integer ({type(raw).__name__})")
    if not bounds[0] <= value <= bounds[1]:
        raise _Bad(f"{what} is out of the 64-bit range")
    return value


def _time(raw: Any, what: str) -> int:
    """A time in nanoseconds (0 when absent); the usual decimal string inline."""
    if type(raw) is str and 0 < len(raw) < 20:  # under 20 digits: within 64 bits if >= 0
        try:
            value = int(raw)
        except ValueError:
            raise _Bad(f"{what} is not an integer ({raw!r})") from None
        if value >= 0:
            return value
    return _int_in(raw or 0, _UINT64, what)


def _double(raw: Any) -> float | str:
    if type(raw) is float or type(raw) is int:
        try:
            value = float(raw)
        except OverflowError:
            raise _Bad("doubleValue is out of range") from None
    elif type(raw) is str and len(raw) <= 40:
        try:
            value = float(raw)
        except ValueError:
            raise _Bad(f"doubleValue is not a number ({raw!r})") from None
    else:
        raise _Bad(f"doubleValue is not a number ({type(raw).__name__})")
    if math.isfinite(value):
        return value
    return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")


def decode(raw: Any, depth: int = 0) -> Any:
    """An ``AnyValue`` as a Python value (str, bool, int, float, tuple, dict, None).

    A value already compacted (see :func:`compact`), or given bare by the
    file, is taken as it is once checked. Raises ``ValueError`` (with the
    reason) for a value that cannot be read.
    """
    shape = type(raw)
    if shape is str:
        return _cut(raw)
    if shape is bool or shape is tuple:
        return raw
    if shape is int:
        return _int_in(raw, _INT64, "intValue")
    if shape is float:
        return _double(raw)
    if shape is not dict:
        raise _Bad("the value is not an object")
    if "stringValue" in raw:
        text = raw["stringValue"]
        if type(text) is not str:
            raise _Bad("stringValue is not a string")
        return _cut(text)
    if "boolValue" in raw:
        flag = raw["boolValue"]
        if type(flag) is not bool:
            raise _Bad("boolValue is not a boolean")
        return flag
    if "intValue" in raw:
        return _int_in(raw["intValue"], _INT64, "intValue")
    if "doubleValue" in raw:
        return _double(raw["doubleValue"])
    if "arrayValue" in raw or "kvlistValue" in raw:
        if depth >= MAX_VALUE_DEPTH:
            raise _Bad(f"nested deeper than {MAX_VALUE_DEPTH} levels")
        kind = "arrayValue" if "arrayValue" in raw else "kvlistValue"
        body = raw[kind] or {}
        if type(body) is not dict:
            raise _Bad(f"{kind} is not an object")
        items = body.get("values") or []
        if type(items) is not list:
            raise _Bad(f"{kind}.values is not a list")
        if kind == "arrayValue":
            return tuple(decode(v, depth + 1) for v in items[:MAX_ARRAY_ITEMS])
        out = {}
        for item in items[:MAX_ARRAY_ITEMS]:
            if type(item) is not dict or type(item.get("key")) is not str:
                raise _Bad("a kvlistValue entry has no string key")
            out[_cut(item["key"])] = decode(item.get("value") or {}, depth + 1)
        return out
    if "bytesValue" in raw:
        data = raw["bytesValue"]
        if type(data) is not str:
            raise _Bad("bytesValue is not a string")
        return _cut(data)
    return None


def text_value(raw: Any) -> str | None:
    """A ``stringValue``'s text, or None (no problem reported)."""
    if type(raw) is dict:
        text = raw.get("stringValue")
        if type(text) is str:
            return text if len(text) <= MAX_STRING_CHARS else _cut(text)
    return None


def _finite(raw: Any) -> float:
    value = _double(raw)
    if type(value) is not float:
        raise _Bad("doubleValue is not finite")
    return value


def compact(attributes: dict[Any, Any]) -> None:
    """Replace, in place, each simple ``AnyValue`` by its Python value.

    A string, bool, int, finite double or array of strings held as a plain
    value saves the one-key dict around it (about 180 bytes each);
    :func:`decode` and :class:`Values` read both forms. Values that are not
    simple stay as the file has them.
    """
    for key, raw in attributes.items():
        if type(raw) is not dict or len(raw) != 1:
            continue
        if type(text := raw.get("stringValue")) is str:
            attributes[key] = _cut(text)
        elif type(flag := raw.get("boolValue")) is bool:
            attributes[key] = flag
        elif "arrayValue" in raw:
            body = raw["arrayValue"]
            items = body.get("values") if type(body) is dict else None
            if type(items) is list:
                texts = [text_value(v) for v in items[:MAX_ARRAY_ITEMS]]
                if None not in texts:
                    attributes[key] = tuple(texts)
        elif "intValue" in raw or "doubleValue" in raw:
            try:
                value = decode(raw)
            except _Bad:
                continue  # read (and reported) as it is
            if type(value) is not str:  # a non-finite double stays as it is
                attributes[key] = value


class Values:
    """Typed reads of one span's attributes, as the file has them.

    Each read returns None (or False, or ``[]``) for a key that is absent or
    whose value cannot be read as asked; with a ``sink``, a value of the
    second kind is also added to it as a :class:`Problem` of ``span``, once
    per read.
    """

    __slots__ = ("_raw", "_sink", "_span")

    def __init__(
        self,
        raw: Mapping[Any, Any],
        sink: list[Problem] | None = None,
        span: SpanRecord | None = None,
        *,
        what: str = "attribute",
    ) -> None:
        self._raw = raw
        self._sink = sink
        self._span = (span, what)

    def _problem(self, key: Any, why: str) -> None:
        if self._sink is not None:
            span, what = self._span
            line, span_id = (span.line, span.span_id) if span is not None else (0, None)
            self._sink.append(Problem(line, f"{what} {key}: {why}; ignored", span_id))

    def text(self, key: str) -> str | None:
        """A string value; any other readable value as its text."""
        raw = self._raw.get(key)
        if raw is None:
            return None
        if type(raw) is dict:
            text = raw.get("stringValue")
            if type(text) is str:
                return text if len(text) <= MAX_STRING_CHARS else _cut(text)
        elif type(raw) is str:  # compacted (so already cut), or bare in the file
            return raw if len(raw) <= MAX_STRING_CHARS + _CUT_NOTE else _cut(raw)
        value = self.value(key)
        return None if value is None else _cut(str(value))

    def number(self, key: str) -> int | float | None:
        """An ``intValue`` or finite ``doubleValue``."""
        raw = self._raw.get(key)
        if raw is None:
            return None
        try:
            if type(raw) is dict:
                if "intValue" in raw:
                    return _int_in(raw["intValue"], _INT64, "intValue")
                if "doubleValue" in raw:
                    return _finite(raw["doubleValue"])
            elif type(raw) is int:
                return _int_in(raw, _INT64, "intValue")
            elif type(raw) is float:
                return _finite(raw)
        except _Bad as exc:
            self._problem(key, str(exc))
            return None
        self._problem(key, "not a number")
        return None

    def flag(self, key: str) -> bool:
        """True only for ``boolValue: true``."""
        raw = self._raw.get(key)
        return raw is True or (type(raw) is dict and raw.get("boolValue") is True)

    def texts(self, key: str) -> list[str]:
        """An array's items as text (a single value as a list of one)."""
        raw = self._raw.get(key)
        if raw is None:
            return []
        if type(raw) is tuple and all(type(v) is str for v in raw):
            return list(raw)
        if type(raw) is dict and "arrayValue" in raw:
            body = raw["arrayValue"]
            items = body.get("values") if type(body) is dict else None
            if not items:
                return []
            if type(items) is list:
                texts = [text_value(v) for v in items[:MAX_ARRAY_ITEMS]]
                if None not in texts:
                    return cast(list[str], texts)
        value = self.value(key)
        if value is None:
            return []
        if isinstance(value, tuple):
            return [_cut(v if type(v) is str else str(v)) for v in value]
        return [_cut(str(value))]

    def value(self, key: Any) -> Any:
        """Any value, decoded (see :func:`decode`)."""
        raw = self._raw.get(key)
        if raw is None:
            return None
        try:
            return decode(raw)
        except _Bad as exc:
            self._problem(key, str(exc))
        except RecursionError:
            self._problem(key, "nested too deeply")
        return None

    def items(self) -> list[tuple[str, Any]]:
        """Every attribute, decoded, with its key as text."""
        return [(_cut(k if type(k) is str else str(k)), self.value(k)) for k in self._raw]


def _attributes(items: Any) -> dict[Any, Any]:
    """The attribute list as a mapping of key to value, as the file has it."""
    if not items:
        return {}
    if type(items) is not list:
        raise _Bad("attributes is not a list")
    try:
        return dict(map(_KEY_VALUE, items))
    except (TypeError, KeyError):
        attrs = {}
        for item in items:
            if type(item) is not dict or "key" not in item:
                raise _Bad("an attribute is not an object with a key") from None
            try:
                attrs[item["key"]] = item.get("value")
            except TypeError:
                raise _Bad("an attribute key is not a string") from None
        return attrs


def _id(raw: Any, size: int, pattern: re.Pattern[str], what: str) -> str:
    """A lower-case hex id of ``size`` hex digits (hex or base64 in the file)."""
    if type(raw) is str:
        if len(raw) == size:
            text = raw.lower()
            if pattern.fullmatch(text):
                return text
        elif len(raw) == 4 * -(-size // 6):  # base64 of size/2 bytes
            try:
                data = base64.b64decode(raw, validate=True)
            except (binascii.Error, ValueError):
                data = b""
            if len(data) * 2 == size:
                return data.hex()
    shown = repr(raw[:40]) if isinstance(raw, str) else type(raw).__name__
    raise _Bad(f"{what} is not a {size}-digit hex id ({shown})")


def id_needles(prefix: str) -> tuple[str, ...] | None:
    """Strings one of which a line holding a span of a trace whose id starts with the
    lower-case hex ``prefix`` must contain: the prefix in lower and upper case and, for
    ids written in base64, the base64 of its first whole 3-byte groups. None when a line
    cannot be ruled out this way (a prefix shorter than 6 digits: no base64 needle).

    A file's ids are hex strings written in one case, or base64: a line none of these
    is in cannot hold the trace, so it is skipped without being parsed.
    """
    whole = len(prefix) // 6 * 6
    if not whole:
        return None
    b64 = base64.b64encode(bytes.fromhex(prefix[:whole])).decode("ascii")
    return tuple(dict.fromkeys((prefix, prefix.upper(), b64)))


def text_needles(text: str) -> tuple[str, ...]:
    """The forms a string attribute value ``text`` takes in a JSON line (quoted, with
    non-ASCII characters escaped or not)."""
    return tuple(dict.fromkeys((json.dumps(text), json.dumps(text, ensure_ascii=False))))


def _json_problem(exc: json.JSONDecodeError, text: str) -> str:
    end = len(text.rstrip())
    if exc.pos >= end - 1 or exc.msg.startswith("Unterminated"):
        return (
            f"line looks truncated: the JSON stops at column {end} before the export request "
            "is complete"
        )
    return f"not valid JSON: {exc.msg} (column {exc.colno})"


class LineReader:
    """Turns one line of OTLP-JSON into span records, summaries and problems.

    ``keep``: a predicate on the trace id; a span of a trace it rejects
    becomes a :class:`SpanSummary` (its name, start, whether it is a root, and
    the conversation id of a root or of a span named in
    ``conversation_spans``).
    """

    def __init__(
        self,
        *,
        keep: Any = None,
        conversation_key: str | None = None,
        conversation_spans: Collection[str] = (),
    ) -> None:
        self._keep = keep
        self._conversation_key = conversation_key
        self._conversation_spans = conversation_spans
        self.lines = 0
        self.other_signals = 0
        self.export_lines = 0
        """Lines that are, or look like (cut short), an OTLP trace export request."""

    def read(
        self, number: int, text: str
    ) -> tuple[list[SpanRecord], list[SpanSummary], list[Problem]]:
        """The spans of line ``number``; a problem for it or for each bad span."""
        if not text.strip():
            return [], [], []
        self.lines += 1
        try:
            request = json.loads(text)
        except json.JSONDecodeError as exc:
            self.export_lines += '"resourceSpans"' in text
            return [], [], [Problem(number, _json_problem(exc, text))]
        except RecursionError:
            self.export_lines += '"resourceSpans"' in text
            return [], [], [Problem(number, "not readable: JSON nested too deeply")]
        except ValueError as exc:  # e.g. an integer of more than 4300 digits
            self.export_lines += '"resourceSpans"' in text
            return [], [], [Problem(number, f"not readable: {exc}")]
        if type(request) is dict and "resourceSpans" in request:
            self.export_lines += 1
        if type(request) is not dict or "resourceSpans" not in request:
            if type(request) is dict and any(k in request for k in _OTHER_SIGNALS):
                self.other_signals += 1
                return [], [], []  # metrics or logs in the same file: not ours to read
            if type(request) is dict and "event" in request:
                return [], [], [Problem(number, LOG_LINE)]
            return [], [], [Problem(number, "not an OTLP trace export (no resourceSpans)")]
        spans: list[SpanRecord] = []
        summaries: list[SpanSummary] = []
        problems: list[Problem] = []
        try:
            for raw in self._raw_spans(request["resourceSpans"]):
                self._span(number, raw, spans, summaries, problems)
        except _Bad as exc:
            problems.append(Problem(number, f"malformed export request: {exc}"))
        return spans, summaries, problems

    def _raw_spans(self, resource_spans: Any) -> Iterator[tuple[str | None, Any]]:
        if type(resource_spans) is not list:
            raise _Bad("resourceSpans is not a list")
        for rs in resource_spans:
            if type(rs) is not dict:
                raise _Bad("a resourceSpans entry is not an object")
            service = None
            resource = rs.get("resource") or {}
            if type(resource) is dict:
                try:
                    found = _attributes(resource.get("attributes"))
                except _Bad:
                    found = {}
                service = text_value(found.get("service.name"))
            scopes = rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans") or []
            if type(scopes) is not list:
                raise _Bad("scopeSpans is not a list")
            for ss in scopes:
                if type(ss) is not dict:
                    raise _Bad("a scopeSpans entry is not an object")
                raws = ss.get("spans") or []
                if type(raws) is not list:
                    raise _Bad("spans is not a list")
                for raw in raws:
                    yield service, raw

    def _span(
        self,
        number: int,
        item: tuple[str | None, Any],
        spans: list[SpanRecord],
        summaries: list[SpanSummary],
        problems: list[Problem],
    ) -> None:
        service, sp = item
        span_id = None
        try:
            if type(sp) is not dict:
                raise _Bad("the span is not an object")
            raw_span_id = sp.get("spanId")
            span_id = raw_span_id[:40] if isinstance(raw_span_id, str) else None
            trace_id = sp.get("traceId")  # the usual case is checked inline: it is most spans
            if type(trace_id) is not str or len(trace_id) != 32 or not _HEX32.fullmatch(trace_id):
                trace_id = _id(trace_id, 32, _HEX32, "traceId")
            if (
                type(raw_span_id) is not str
                or len(raw_span_id) != 16
                or not _HEX16.fullmatch(raw_span_id)
            ):
                # a problem names the span only by a string id (never the raw value)
                span_id = _id(raw_span_id, 16, _HEX16, "spanId")
            else:
                span_id = raw_span_id
            name = sp.get("name")
            if type(name) is not str:
                raise _Bad("the span has no name")
            start = _time(sp.get("startTimeUnixNano"), "startTimeUnixNano")
            parent = sp.get("parentSpanId") or None
            if parent is not None and (
                type(parent) is not str or len(parent) != 16 or not _HEX16.fullmatch(parent)
            ):
                parent = _id(parent, 16, _HEX16, "parentSpanId")
            if self._keep is not None and not self._keep(trace_id):
                summaries.append(self._summary(trace_id, name, start, parent is None, sp))
                return
            end = _time(sp.get("endTimeUnixNano"), "endTimeUnixNano")
            events = sp.get("events") or ()
            if type(events) is not list and events != ():
                raise _Bad("events is not a list")
            status = sp.get("status") or {}
            if type(status) is not dict:
                raise _Bad("status is not an object")
            code = status.get("code", 0)
            spans.append(
                SpanRecord(
                    trace_id,
                    span_id,
                    parent,
                    name if len(name) <= MAX_STRING_CHARS else _cut(name),
                    start,
                    end,
                    _attributes(sp.get("attributes")),
                    events,
                    _STATUS.get(code, "UNSET") if type(code) in (int, str) else "UNSET",
                    number,
                    service,
                )
            )
        except _Bad as exc:
            problems.append(Problem(number, f"{exc}; span skipped", span_id))
        except RecursionError:
            problems.append(Problem(number, "nested too deeply; span skipped", span_id))

    def _summary(
        self, trace_id: str, name: str, start: int, is_root: bool, sp: dict[str, Any]
    ) -> SpanSummary:
        conversation = None
        if self._conversation_key and (is_root or name in self._conversation_spans):
            try:
                found = _attributes(sp.get("attributes"))
            except _Bad:
                found = {}
            conversation = text_value(found.get(self._conversation_key))
        return SpanSummary(trace_id, name, start, is_root, conversation)


def read_lines(handle: TextIO) -> Iterator[tuple[int, str | None]]:
    """``(number, text)`` per line; ``text`` is None for a line longer than
    :data:`MAX_LINE_CHARS`, which is read in pieces and dropped."""
    number = 0
    while True:
        text = handle.readline(MAX_LINE_CHARS + 1)
        if not text:
            return
        number += 1
        if len(text) > MAX_LINE_CHARS and not text.endswith("\n"):
            while True:  # skip the rest of the line without holding it
                rest = handle.readline(MAX_LINE_CHARS)
                if not rest or rest.endswith("\n"):
                    break
            yield number, None
            continue
        yield number, text
