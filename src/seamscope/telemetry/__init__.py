"""seamscope's telemetry: the OpenTelemetry observer of the decision core.

* :mod:`seamscope.telemetry.conventions`: every name (public contract).
* :class:`OTelObserver`: spans, span events, metrics and structlog events
  for every decision, including the offload ledger's realized economics.
* :class:`TelemetryConfig`: content capture, limits, the metric label cap.
* :func:`configure`: SDK providers for an application (sets globals only
  when asked); its handle's bounded ``flush()``/``shutdown()`` return a
  :class:`FlushResult`.

The offload ledger itself is pure accounting: :class:`seamscope.decisions.OffloadLedger`.

The public names are imported on first use (PEP 562), so importing
:mod:`seamscope.telemetry.conventions` alone (the CLI's explain does, and
``python -m seamscope.telemetry.conventions``) does not load the
OpenTelemetry SDK, structlog and the observer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from seamscope.decisions._lazy import lazy_exports

if TYPE_CHECKING:
    from seamscope.telemetry._config import TelemetryConfig
    from seamscope.telemetry._configure import TelemetryHandle, configure
    from seamscope.telemetry._export import ExporterStatus, FlushResult
    from seamscope.telemetry._logging import add_trace_context
    from seamscope.telemetry._observer import OTelObserver

__all__ = [
    "ExporterStatus",
    "FlushResult",
    "OTelObserver",
    "TelemetryConfig",
    "TelemetryHandle",
    "add_trace_context",
    "configure",
]

# public name -> the private module that defines it
_HOME = {
    "ExporterStatus": "_export",
    "FlushResult": "_export",
    "OTelObserver": "_observer",
    "TelemetryConfig": "_config",
    "TelemetryHandle": "_configure",
    "add_trace_context": "_logging",
    "configure": "_configure",
}


__getattr__, __dir__ = lazy_exports(
    __name__, {n: f"{__name__}.{m}" for n, m in _HOME.items()}, __all__
)
