"""Bounds that hold whatever the collector does, built from public APIs only.

* :class:`BoundedSession`: the ``requests`` session :func:`configure` gives
  the SDK's OTLP/HTTP exporters. The SDK passes the time left of an export
  as the request's ``timeout``, which ``requests`` applies to each socket
  read, so a collector that drips its answer (one byte at a time) would hold
  the export for as long as it drips, and the whole answer would be read
  into memory. Here the answer is read at most :data:`MAX_RESPONSE_BYTES`
  (an OTLP response is a few bytes; a longer one is refused as not an OTLP
  answer) and only until the export's deadline, then the connection is
  closed. Only ``requests``' public transport-adapter API is used.
* :class:`BoundedTracerProvider` and :class:`BoundedMeterProvider`: the
  SDK's providers, as handed out on the
  :class:`~seamscope.telemetry.TelemetryHandle` (and set globally by
  ``configure()``), whose ``force_flush()`` and ``shutdown()`` are the
  handle's bounded ones: ``force_flush(timeout_millis)`` returns within
  ``timeout_millis`` (default: the handle's shutdown timeout) and is True
  only when everything of its signal was exported; ``shutdown()`` is the
  handle's ``shutdown()`` (both signals, within the shutdown timeout).
* :data:`GRPC_TLS_HINT`: what a failed OTLP/gRPC export to an endpoint
  without a scheme adds to its reason.
"""

from __future__ import annotations

import io
import os
import time
from typing import Any, Protocol

import requests
import requests.adapters
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider

__all__ = [
    "GRPC_TLS_HINT",
    "MAX_RESPONSE_BYTES",
    "AnswerTooLarge",
    "AnswerTooSlow",
    "BoundedMeterProvider",
    "BoundedSession",
    "BoundedTracerProvider",
    "session_for",
]

MAX_RESPONSE_BYTES = 64 * 1024
"""The longest answer of a collector read (an OTLP response is a few bytes)."""

GRPC_TLS_HINT = (
    "TLS handshake with a plaintext server? use http://host:port for an insecure endpoint"
)
"""Added to the reason of a failed OTLP/gRPC export to an endpoint without a
scheme: the SDK then speaks TLS (``https://`` does too; ``http://`` is plaintext)."""

_READ = 16 * 1024


class AnswerTooLarge(requests.exceptions.RequestException):
    """The collector's answer is longer than :data:`MAX_RESPONSE_BYTES` (not
    retried: the same request would get the same answer)."""


class AnswerTooSlow(requests.exceptions.ReadTimeout):
    """The collector's answer did not end before the export's deadline."""


def _seconds(timeout: Any) -> float | None:
    if isinstance(timeout, tuple):
        parts = [t for t in timeout if isinstance(t, int | float)]
        return float(sum(parts)) if parts else None
    return float(timeout) if isinstance(timeout, int | float) else None


def _read_bounded(response: requests.Response, deadline: float | None) -> bytes:
    """The body of ``response`` (streamed), at most MAX_RESPONSE_BYTES, before ``deadline``."""
    raw = response.raw
    sock = getattr(getattr(raw, "connection", None), "sock", None)
    body = bytearray()
    while True:
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AnswerTooSlow(
                    f"the collector's answer did not end within the export timeout "
                    f"({len(body)} bytes read)"
                )
            if sock is not None:
                sock.settimeout(remaining)
        # decoded (a gzip answer is capped by what it expands to)
        chunk = (
            raw.read1(_READ, decode_content=True)
            if hasattr(raw, "read1")
            else raw.read(_READ, decode_content=True)
        )
        if not chunk:
            return bytes(body)
        body += chunk
        if len(body) > MAX_RESPONSE_BYTES:
            raise AnswerTooLarge(
                f"the collector's answer is over {MAX_RESPONSE_BYTES // 1024} KiB"
            )


class _BoundedAdapter(requests.adapters.HTTPAdapter):
    """Streams every answer and reads it bounded (see the module doc)."""

    def send(
        self,
        request: requests.PreparedRequest,
        stream: bool = False,
        timeout: float | tuple[float | None, float | None] | None = None,
        verify: bool | str = True,
        cert: str | tuple[str, str] | None = None,
        proxies: dict[str, str] | None = None,
    ) -> requests.Response:
        seconds = _seconds(timeout)
        deadline = None if seconds is None else time.monotonic() + seconds
        response = super().send(
            request, stream=True, timeout=timeout, verify=verify, cert=cert, proxies=proxies
        )
        if stream:
            return response
        original = response.raw
        try:
            body = _read_bounded(response, deadline)
        except BaseException:
            original.close()  # the connection is not reused
            raise
        original.release_conn()
        # requests reads the (already bounded) body from here
        response.raw = io.BytesIO(body)
        return response


class BoundedSession(requests.Session):
    """A ``requests.Session`` whose answers are read bounded in size and time."""

    def __init__(self) -> None:
        super().__init__()
        adapter = _BoundedAdapter()
        self.mount("http://", adapter)
        self.mount("https://", adapter)


def session_for(signal: str) -> BoundedSession | None:
    """The session for the OTLP/HTTP exporter of ``signal``; None (the SDK's
    own) when ``OTEL_PYTHON_EXPORTER_OTLP_HTTP_[{signal}_]CREDENTIAL_PROVIDER``
    names a credential provider's session, which the SDK then uses (its
    answers are read as ``requests`` reads them: unbounded)."""
    names = (
        "OTEL_PYTHON_EXPORTER_OTLP_HTTP_CREDENTIAL_PROVIDER",
        f"OTEL_PYTHON_EXPORTER_OTLP_HTTP_{signal.upper()}_CREDENTIAL_PROVIDER",
    )
    if any(os.environ.get(name) for name in names):
        return None
    return BoundedSession()


class _Bounds(Protocol):
    """What the providers ask of the handle that owns them."""

    def _flush(self, timeout_millis: float | None, *, signals: tuple[str, ...]) -> Any: ...

    def shutdown(self, timeout_millis: float | None = None) -> Any: ...


class BoundedTracerProvider(TracerProvider):
    """The SDK's TracerProvider; once a handle owns it, ``force_flush`` and
    ``shutdown`` are the handle's bounded ones (see the module doc)."""

    _bounds: _Bounds | None = None

    def bind(self, bounds: _Bounds) -> None:
        self._bounds = bounds

    def force_flush(self, timeout_millis: int | None = None) -> bool:
        """Export what is queued, within ``timeout_millis`` (default: the
        handle's shutdown timeout); True only when every span ended so far
        was exported and none was dropped since the previous flush."""
        bounds = self._bounds
        if bounds is None:
            return self.sdk_force_flush(30_000 if timeout_millis is None else timeout_millis)
        return bool(bounds._flush(timeout_millis, signals=("traces",)))

    def shutdown(self) -> None:
        """The handle's ``shutdown()``: both providers, within its timeout."""
        bounds = self._bounds
        if bounds is None:
            self.sdk_shutdown()
        else:
            bounds.shutdown()

    def sdk_force_flush(self, timeout_millis: int) -> bool:
        """The SDK's own (unbounded) force_flush."""
        return bool(super().force_flush(timeout_millis))

    def sdk_shutdown(self) -> None:
        """The SDK's own (unbounded) shutdown."""
        super().shutdown()


class BoundedMeterProvider(MeterProvider):
    """The SDK's MeterProvider; once a handle owns it, ``force_flush`` and
    ``shutdown`` are the handle's bounded ones (see the module doc)."""

    _bounds: _Bounds | None = None

    def bind(self, bounds: _Bounds) -> None:
        self._bounds = bounds

    def force_flush(self, timeout_millis: float | None = None) -> bool:
        """Collect and export, within ``timeout_millis`` (default: the handle's
        shutdown timeout); True only when nothing was dropped."""
        bounds = self._bounds
        if bounds is None:
            return self.sdk_force_flush(10_000 if timeout_millis is None else timeout_millis)
        return bool(bounds._flush(timeout_millis, signals=("metrics",)))

    def shutdown(self, timeout_millis: float | None = None) -> None:
        """The handle's ``shutdown()``: both providers, within its timeout
        (or ``timeout_millis``)."""
        bounds = self._bounds
        if bounds is None:
            self.sdk_shutdown(30_000 if timeout_millis is None else timeout_millis)
        else:
            bounds.shutdown(timeout_millis)

    def sdk_force_flush(self, timeout_millis: float) -> bool:
        """The SDK's own (unbounded) force_flush."""
        return bool(super().force_flush(timeout_millis))

    def sdk_shutdown(self, timeout_millis: float = 30_000) -> None:
        """The SDK's own shutdown."""
        super().shutdown(timeout_millis=timeout_millis)
