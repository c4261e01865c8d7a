"""seamscope's telemetry: the OpenTelemetry observer of the decision core.

* :mod:`seamscope.telemetry.conventions`: every name (public contract).
* :class:`OTelObserver`: spans, span events, metrics and structlog events
  for every decision, including the offload ledger's realized economics.
* :class:`TelemetryConfig`: content capture, limits, the metric label cap.
* :func:`configure`: SDK providers for an application (sets globals only
  when asked); its handle's bounded ``flush()``/``shutdown()`` return a
  :class:`FlushResult`.

The offload ledger itself is pure accounting: :class:`seamscope.decisions.OffloadLedger`.
"""

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
