"""Read OTLP-JSON (one export request per line) into plain span records.

The format is what the OpenTelemetry file exporters write (the Python
``opentelemetry-exporter-otlp-json-file`` package and the Collector's
``file`` exporter): each line is ``{"resourceSpans": [...]}``. Trace and span
ids are hex strings; ``intValue`` may be a string. A line that is not valid
JSON, or not of that shape, is reported with its line number and skipped;
the good lines are still read.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["LineError", "SpanRecord", "read_otlp_json", "parse_otlp_lines"]


@dataclass(frozen=True, slots=True)
class SpanRecord:
    """One span, framework-free."""

    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    start_ns: int
    end_ns: int
    attributes: Mapping[str, Any]
    events: tuple[tuple[str, Mapping[str, Any]], ...] = ()
    status_code: str = "UNSET"
    resource: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class LineError:
    """A line that could not be read: its number (1-based) and why."""

    line: int
    message: str


def _any_value(value: Mapping[str, Any]) -> Any:
    if not isinstance(value, Mapping):
        return None
    if "stringValue" in value:
        return value["stringValue"]
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "intValue" in value:
        return int(value["intValue"])
    if "doubleValue" in value:
        return float(value["doubleValue"])
    if "arrayValue" in value:
        return tuple(_any_value(v) for v in (value["arrayValue"] or {}).get("values", []))
    if "kvlistValue" in value:
        return {
            kv["key"]: _any_value(kv.get("value", {}))
            for kv in value["kvlistValue"].get("values", [])
        }
    if "bytesValue" in value:
        return value["bytesValue"]
    return None


def _attributes(items: Iterable[Mapping[str, Any]] | None) -> dict[str, Any]:
    return {item["key"]: _any_value(item.get("value", {})) for item in items or ()}


def _hex_id(raw: Any, size: int) -> str:
    if not isinstance(raw, str) or not raw:
        return ""
    text = raw.lower()
    if len(text) == size and all(ch in "0123456789abcdef" for ch in text):
        return text
    try:  # protobuf-JSON mapping encodes bytes as base64
        return base64.b64decode(raw, validate=True).hex()
    except (binascii.Error, ValueError):
        return text


_STATUS = {0: "UNSET", 1: "OK", 2: "ERROR", "STATUS_CODE_OK": "OK", "STATUS_CODE_ERROR": "ERROR"}


def _spans_of(request: Mapping[str, Any]) -> list[SpanRecord]:
    spans: list[SpanRecord] = []
    resource_spans = request["resourceSpans"]
    if not isinstance(resource_spans, list):
        raise ValueError("resourceSpans is not a list")
    for rs in resource_spans:
        resource = _attributes((rs.get("resource") or {}).get("attributes"))
        for ss in rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans") or []:
            for sp in ss.get("spans") or []:
                status = (sp.get("status") or {}).get("code", 0)
                parent = _hex_id(sp.get("parentSpanId"), 16) or None
                spans.append(
                    SpanRecord(
                        trace_id=_hex_id(sp["traceId"], 32),
                        span_id=_hex_id(sp["spanId"], 16),
                        parent_span_id=parent,
                        name=str(sp["name"]),
                        start_ns=int(sp.get("startTimeUnixNano") or 0),
                        end_ns=int(sp.get("endTimeUnixNano") or 0),
                        attributes=_attributes(sp.get("attributes")),
                        events=tuple(
                            (str(ev.get("name", "")), _attributes(ev.get("attributes")))
                            for ev in sp.get("events") or ()
                        ),
                        status_code=_STATUS.get(status, "UNSET"),
                        resource=resource,
                    )
                )
    return spans


def parse_otlp_lines(lines: Iterable[str]) -> tuple[list[SpanRecord], list[LineError]]:
    """Parse OTLP-JSON lines; returns the spans read and the lines that were not."""
    spans: list[SpanRecord] = []
    errors: list[LineError] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            request = json.loads(line)
        except json.JSONDecodeError as exc:
            errors.append(LineError(number, f"not valid JSON ({exc.msg} at column {exc.colno})"))
            continue
        if not isinstance(request, Mapping) or "resourceSpans" not in request:
            if isinstance(request, Mapping) and (
                "resourceMetrics" in request or "resourceLogs" in request
            ):
                continue  # metrics or logs in the same file: not ours to read
            errors.append(LineError(number, "not an OTLP trace export (no resourceSpans)"))
            continue
        try:
            spans.extend(_spans_of(request))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            errors.append(LineError(number, f"malformed span data ({type(exc).__name__}: {exc})"))
    return spans, errors


def read_otlp_json(path: str | Path) -> tuple[list[SpanRecord], list[LineError]]:
    """Read a file of OTLP-JSON lines (see :func:`parse_otlp_lines`)."""
    with open(path, encoding="utf-8", errors="replace") as handle:
        return parse_otlp_lines(handle)
