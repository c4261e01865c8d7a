"""OTLP-JSON lines built by hand, for files the demo does not write."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from seamscope.telemetry import conventions as c

__all__ = [
    "any_value",
    "attributes",
    "export_line",
    "span",
    "turn",
    "write_lines",
]

_TRACE = "0af7651916cd43dd8448eb211c80319c"


def any_value(value: Any) -> dict[str, Any]:
    """A Python value as an OTLP ``AnyValue``."""
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, list | tuple):
        return {"arrayValue": {"values": [any_value(v) for v in value]}}
    return {"stringValue": str(value)}


def attributes(values: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "value": any_value(v)} for k, v in values.items()]


def span(
    span_id: str,
    name: str,
    *,
    parent: str | None = None,
    trace_id: str = _TRACE,
    start: int = 1_000,
    end: int = 2_000,
    attrs: Mapping[str, Any] | None = None,
    raw_attrs: list[Any] | None = None,
    events: list[Any] | None = None,
    status: int = 0,
) -> dict[str, Any]:
    """One span as a file exporter writes it (ids are hex strings)."""
    out: dict[str, Any] = {
        "traceId": trace_id,
        "spanId": span_id,
        "name": name,
        "kind": 1,
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(end),
        "attributes": raw_attrs if raw_attrs is not None else attributes(attrs or {}),
        "status": {"code": status} if status else {},
    }
    if parent is not None:
        out["parentSpanId"] = parent
    if events is not None:
        out["events"] = events
    return out


def export_line(spans: Iterable[dict[str, Any]], service: str = "checkout") -> str:
    """One export request holding ``spans``, as one line."""
    request = {
        "resourceSpans": [
            {
                "resource": {"attributes": attributes({"service.name": service})},
                "scopeSpans": [{"scope": {"name": "test"}, "spans": list(spans)}],
            }
        ]
    }
    return json.dumps(request, separators=(",", ":"))


def turn(
    trace_id: str = _TRACE,
    *,
    conversation: str = "conv-1",
    start: int = 1_000,
    stage: Mapping[str, Any] | None = None,
    tools: tuple[str, ...] = ("fetch_data", "run_block", "delete_rows"),
) -> list[dict[str, Any]]:
    """A one-iteration seamscope turn: root, iteration, selection with one stage, chat."""
    ids = [f"{trace_id[:12]}{n:04x}" for n in range(6)]
    base = {c.ATTR_GEN_AI_CONVERSATION_ID: conversation, c.ATTR_GEN_AI_AGENT_NAME: "analyst"}
    stage_attrs = {
        c.ATTR_STAGE_NAME: "policy",
        c.ATTR_STAGE_INDEX: 0,
        c.ATTR_STAGE_OUTCOME: "select",
        c.ATTR_STAGE_REASON: "safety ceiling 'write'",
        c.ATTR_STAGE_DEGRADED: False,
        c.ATTR_STAGE_DROPPED: ["delete_rows"],
        **(stage or {}),
    }
    return [
        span(ids[3], c.SPAN_STAGE, parent=ids[2], trace_id=trace_id, start=start + 3,
             attrs={**base, **stage_attrs}),
        span(ids[2], c.SPAN_SELECT_TOOLS, parent=ids[1], trace_id=trace_id, start=start + 2,
             attrs={**base, c.ATTR_SELECTION_OFFERED: list(tools),
                    c.ATTR_SELECTION_SELECTED: list(tools[:-1])}),
        span(ids[4], "chat m", parent=ids[1], trace_id=trace_id, start=start + 4,
             attrs={c.ATTR_GEN_AI_OPERATION_NAME: "chat", c.ATTR_GEN_AI_REQUEST_MODEL: "m",
                    c.ATTR_GEN_AI_USAGE_INPUT_TOKENS: 1200,
                    c.ATTR_GEN_AI_USAGE_OUTPUT_TOKENS: 30}),
        span(ids[1], c.SPAN_ITERATION, parent=ids[0], trace_id=trace_id, start=start + 1,
             attrs={**base, c.ATTR_ITERATION_INDEX: 0}),
        span(ids[0], "invoke_agent analyst", trace_id=trace_id, start=start,
             attrs={**base, c.ATTR_GEN_AI_OPERATION_NAME: "invoke_agent"}),
    ]  # fmt: skip


def write_lines(path: Path, lines: Iterable[str]) -> Path:
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return path
