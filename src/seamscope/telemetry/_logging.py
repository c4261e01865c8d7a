"""structlog events for decisions, each carrying the current trace and span id.

The library never calls ``structlog.configure()``. Until the application
configures structlog, its events go to the stdlib logger ``seamscope``
(which has a ``NullHandler``), so it prints nothing until the application
configures logging (``logging.basicConfig()``); once structlog is configured,
they follow that configuration (``structlog.get_logger("seamscope")``). It binds
``trace_id``/``span_id`` itself, so the ids are there whatever the
application's configuration.
:func:`add_trace_context` is a processor applications can add to their own
chain so their other log lines carry the ids too.

:class:`RateLimit` keeps a repeated failure (an exporter whose collector is
down fails every batch) to one event per interval, with the number of
events it held back.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable, MutableMapping
from typing import Any

import structlog
from opentelemetry import trace

from seamscope.telemetry.conventions import LOG_TELEMETRY_ERROR

__all__ = ["RateLimit", "add_trace_context", "log_event", "telemetry_error", "trace_ids"]

# structlog's defaults ending in the stdlib logger: silent (NullHandler) until
# the application configures logging; a structlog configuration takes over
_STDLIB = logging.getLogger("seamscope")
_quiet = structlog.wrap_logger(_STDLIB)
_configured = structlog.get_logger("seamscope")
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
        if structlog.is_configured():
            _logger: Any = _configured
        elif _STDLIB.isEnabledFor(_LEVELS[level]):
            _logger = _quiet
        else:
            return
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


class RateLimit:
    """At most one event per ``interval_s`` for each key; counts the rest.

    :meth:`admit` returns None while a key is held back, else how many of
    its events were held back since the last one admitted (0 the first time).
    Thread-safe; ``clock`` is injectable for tests.
    """

    def __init__(
        self, interval_s: float = 60.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.interval_s = interval_s
        self._clock = clock
        self._lock = threading.Lock()
        self._last: dict[Hashable, float] = {}
        self._held: dict[Hashable, int] = {}

    def admit(self, key: Hashable) -> int | None:
        now = self._clock()
        with self._lock:
            last = self._last.get(key)
            if last is not None and now - last < self.interval_s:
                self._held[key] = self._held.get(key, 0) + 1
                return None
            self._last[key] = now
            return self._held.pop(key, 0)
