"""The demo's OTLP/HTTP export: endpoints as users paste them, failures as one line.

* :func:`parse_endpoint` takes ``host:4318``, ``http://host:4318/`` or the
  full ``http://host:4318/v1/traces`` and returns the base URL the signal
  paths are appended to (not ``/v1/traces/v1/traces``).
* :func:`probe` opens one TCP connection first, so an endpoint that is down
  is reported before the run instead of after a retry per batch.
* :class:`CountingExporter` wraps the SDK's exporter: it counts the spans
  sent, and after the first failed batch it stops sending (the demo's spans
  are in its OTLP-JSON file anyway) and calls back once, with the reason.
* :class:`QuietSdk` keeps the SDK's own log records (retry warnings, export
  errors) off the terminal while the demo runs, and keeps the last one as
  the reason to print. It touches the ``opentelemetry`` loggers only, and
  only between ``__enter__`` and ``__exit__``.
"""

from __future__ import annotations

import logging
import re
import socket
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

__all__ = [
    "EXPORT_TIMEOUT_S",
    "CountingExporter",
    "Endpoint",
    "QuietSdk",
    "parse_endpoint",
    "probe",
    "reason",
]

EXPORT_TIMEOUT_S = 2.0
"""Seconds one OTLP export (with the SDK's retries) may take."""

_SIGNAL_PATHS = ("/v1/traces", "/v1/metrics", "/v1/logs")
_ERRNO = re.compile(r"\[Errno -?\d+\] ([^'\")\]]+)")
_STATUS = re.compile(r"export (\w+) batch code: (\d{3}), reason: (.*)")
_TRANSIENT = re.compile(r"Transient error (.*) encountered while exporting (\w+) batch")
_KIND = re.compile(r"export(?:ing)? (\w+) batch")


@dataclass(frozen=True, slots=True)
class Endpoint:
    """An OTLP/HTTP receiver: its base URL, and the host and port to probe."""

    base: str
    host: str
    port: int

    @property
    def traces(self) -> str:
        return f"{self.base}/v1/traces"

    @property
    def metrics(self) -> str:
        return f"{self.base}/v1/metrics"


def parse_endpoint(text: str) -> Endpoint:
    """The endpoint a user meant; ValueError (with the reason) when it is not a URL."""
    raw = text.strip()
    if "://" not in raw:
        raw = f"http://{raw}"
    parts = urlsplit(raw)
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"{text!r}: OTLP/HTTP needs an http:// or https:// URL")
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"{text!r}: the port is not a number from 1 to 65535") from None
    if not parts.hostname:
        raise ValueError(f"{text!r}: no host name")
    path = parts.path.rstrip("/")
    for signal in _SIGNAL_PATHS:
        if path.endswith(signal):
            path = path[: -len(signal)]
            break
    default = 443 if parts.scheme == "https" else 80
    return Endpoint(f"{parts.scheme}://{parts.netloc}{path}", parts.hostname, port or default)


def probe(endpoint: Endpoint, timeout: float = 1.0) -> str | None:
    """None when a TCP connection to the endpoint opens, else why not."""
    try:
        socket.create_connection((endpoint.host, endpoint.port), timeout=timeout).close()
    except TimeoutError:
        return f"no answer within {timeout:g} s"
    except OSError as exc:
        return (exc.strerror or str(exc)).lower()
    return None


def _short(text: str) -> str:
    found = _ERRNO.search(text)
    if found:
        return found.group(1).strip().lower()
    return text if len(text) <= 120 else text[:119] + "…"


def reason(messages: Sequence[str], kind: str) -> str:
    """Why the SDK could not export ``kind`` (``spans``, ``metrics``), from its log messages."""
    for message in reversed(messages):
        status = _STATUS.search(message)
        if status and status.group(1) == kind:
            return f"HTTP {status.group(2)} {status.group(3).strip()}"
    for message in reversed(messages):
        transient = _TRANSIENT.search(message)
        if transient and transient.group(2) == kind:
            return _short(transient.group(1))
    for message in reversed(messages):
        found = _KIND.search(message)
        if found and found.group(1) == kind:
            return _short(message)
    return "export failed"


class CountingExporter(SpanExporter):
    """Counts what ``inner`` sent; stops after the first failure (see module doc)."""

    def __init__(self, inner: SpanExporter, on_failure: Callable[[], None]) -> None:
        self._inner = inner
        self._on_failure = on_failure
        self._lock = threading.Lock()
        self.sent = 0
        self.dropped = 0
        self.failed = False

    def export(self, spans: Sequence[Any]) -> SpanExportResult:
        if self.failed:
            with self._lock:
                self.dropped += len(spans)
            return SpanExportResult.FAILURE
        try:
            result = self._inner.export(spans)
        except Exception:
            result = SpanExportResult.FAILURE
        with self._lock:
            if result is SpanExportResult.SUCCESS:
                self.sent += len(spans)
                return result
            self.dropped += len(spans)
            first = not self.failed
            self.failed = True
        if first:
            self._on_failure()
        return result

    def shutdown(self) -> None:
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


class _Keep(logging.Handler):
    """Keeps the last few messages of the records it is given."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except Exception:
            message = str(record.msg)
        self.messages = [*self.messages[-49:], message]


class QuietSdk:
    """Hold the SDK's log records while the demo runs (see module doc)."""

    def __init__(self) -> None:
        self._logger = logging.getLogger("opentelemetry")
        self._handler = _Keep()
        self._saved: tuple[bool, list[logging.Handler]] | None = None

    @property
    def messages(self) -> list[str]:
        """The last warnings and errors the SDK logged (at most 50)."""
        return self._handler.messages

    def failed(self, kind: str) -> str | None:
        """Why exporting ``kind`` failed, if the SDK said it did."""
        failures = [m for m in self.messages if m.startswith("Failed to export")]
        if not any((k := _KIND.search(m)) and k.group(1) == kind for m in failures):
            return None
        return reason(self.messages, kind)

    def __enter__(self) -> QuietSdk:
        self._saved = (self._logger.propagate, list(self._logger.handlers))
        for handler in self._saved[1]:
            self._logger.removeHandler(handler)
        self._logger.addHandler(self._handler)
        self._logger.propagate = False
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._logger.removeHandler(self._handler)
        if self._saved is not None:
            propagate, handlers = self._saved
            for handler in handlers:
                self._logger.addHandler(handler)
            self._logger.propagate = propagate
