"""structlog events for decisions, each carrying the current trace and span id.

The library never calls ``structlog.configure()``: it logs through
``structlog.get_logger("seamscope")`` and binds ``trace_id``/``span_id``
itself, so the ids are there whatever the application's configuration.
:func:`add_trace_context` is a processor applications can add to their own
chain so their other log lines carry the ids too.
"""

from __future__ import annotations

import logging
from collections.abc import MutableMapping
from typing import Any

import structlog
from opentelemetry import trace

from seamscope.telemetry.conventions import LOG_TELEMETRY_ERROR

__all__ = ["add_trace_context", "log_event", "telemetry_error", "trace_ids"]

_logger = structlog.get_logger("seamscope")
# structlog's method names -> the stdlib levels its filtering loggers compare with
_LEVELS = {name.lower(): n for name, n in logging.getLevelNamesMapping().items()}


def trace_ids() -> dict[str, str]:
    """``trace_id``/``span_id`` (lower-case hex) of the current span, if valid."""
    ctx = trace.get_current_span().get_span_context()
    if not ctx.is_valid:
        return {}
    return {"trace_id": format(ctx.trace_id, "032x"), "span_id": format(ctx.span_id, "016x")}


def add_trace_context(
    logger: Any, method_name: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """structlog processor: add the current trace/span ids when absent."""
    if "trace_id" not in event_dict:
        event_dict.update(trace_ids())
    return event_dict


def log_event(level: str, event: str, **fields: Any) -> None:
    """Emit one seamscope log event at ``level`` with the trace context bound.

    Never raises: a logging pipeline that fails (a closed file, a processor
    that raises) must not cost a span or a decision.
    """
    try:
        # a filtering logger (structlog's default kind) that drops this level:
        # skip reading the span context for nothing
        enabled = getattr(_logger, "is_enabled_for", None)
        if enabled is not None and not enabled(_LEVELS[level]):
            return
        fields.update(trace_ids())
        getattr(_logger, level)(event, **fields)
    except Exception:
        pass


def telemetry_error(hook: str, exc: BaseException | None, **fields: Any) -> None:
    """Log that seamscope's own telemetry failed at ``hook``; the loop went on.

    One ``seamscope.telemetry.error`` shape for every part of the package:
    ``hook`` and ``error_type`` (the exception's qualified class name).
    """
    log_event(
        "error",
        LOG_TELEMETRY_ERROR,
        hook=hook,
        error_type=None if exc is None else type(exc).__qualname__,
        **fields,
    )
