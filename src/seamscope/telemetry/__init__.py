"""seamscope's telemetry: the OpenTelemetry observer of the decision core.

* :mod:`seamscope.telemetry.conventions`: every name (public contract).
* :class:`OTelObserver`: spans, span events, metrics and structlog events.
* :class:`TelemetryConfig`: content capture, limits, the metric label cap.
* :func:`configure`: SDK providers for an application (sets globals only
  when asked).
* :class:`OffloadLedger`: predicted versus realized offload economics.
"""

from seamscope.telemetry._config import TelemetryConfig
from seamscope.telemetry._configure import TelemetryHandle, configure
from seamscope.telemetry._logging import add_trace_context
from seamscope.telemetry._observer import OTelObserver
from seamscope.telemetry.ledger import CarriedStub, OffloadLedger, Settlement

__all__ = [
    "CarriedStub",
    "OTelObserver",
    "OffloadLedger",
    "Settlement",
    "TelemetryConfig",
    "TelemetryHandle",
    "add_trace_context",
    "configure",
]
