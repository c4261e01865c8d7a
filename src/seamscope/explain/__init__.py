"""Reading seamscope's decisions back from OTLP-JSON: the engine of ``seamscope explain``.

Two steps, each usable alone:

* reading: :class:`Collector` reads a file of OTLP-JSON export requests (one
  ``{"resourceSpans": [...]}`` per line, as the OpenTelemetry file exporters
  write) and hands each trace, once complete, to a callback as a list of
  :class:`SpanRecord`; memory follows the largest trace, not the file. A
  malformed line or span is a :class:`Problem` given to ``report`` and
  skipped; traces that received spans after they were finished are listed in
  ``Collector.late`` and read again by :func:`reread`;
* views: :func:`assemble` makes one trace's records a :class:`TraceTree`
  (duplicates merged, cycles named), :func:`turn_view` the plain-dict view of
  its turn (iterations and their decisions, as ``explain --format json``
  writes it), :func:`settlements` / :func:`shadow_settlements` its ledger's
  settlements, :func:`span_rows` its spans as rows, :func:`tool_story` /
  :func:`middleware_story` one tool's or one middleware's story in an
  iteration.

Only the telemetry contract (:mod:`seamscope.telemetry.conventions`) is read,
so any exporter's OTLP-JSON of seamscope spans can be explained. The text
trees and tables are the CLI's (:mod:`seamscope.cli`).
"""

from __future__ import annotations

from seamscope.explain._otlp import LOG_LINE, Problem, SpanRecord, id_needles, text_needles
from seamscope.explain._traces import (
    SPILL_MEMORY_BYTES,
    Collector,
    FinishedTraces,
    TraceInfo,
    reread,
)
from seamscope.explain._views import (
    TraceTree,
    assemble,
    merge,
    middleware_story,
    number,
    settlements,
    shadow_settlements,
    span_rows,
    tool_story,
    turn_view,
)

__all__ = [
    "LOG_LINE",
    "SPILL_MEMORY_BYTES",
    "Collector",
    "FinishedTraces",
    "Problem",
    "SpanRecord",
    "TraceInfo",
    "TraceTree",
    "assemble",
    "id_needles",
    "merge",
    "middleware_story",
    "number",
    "reread",
    "settlements",
    "shadow_settlements",
    "span_rows",
    "text_needles",
    "tool_story",
    "turn_view",
]
