"""What the loop and the framework adapters use of the decision core and the
telemetry beyond their public API, in one place.

The adapters import these names from here, never from a private module of
:mod:`seamscope.decisions` or :mod:`seamscope.telemetry` (a test reads every
adapter's imports); a name added here is a name the core or the telemetry
must keep stable for the adapters.
"""

from __future__ import annotations

from seamscope.decisions import _checks as checks
from seamscope.decisions._observer import guard_observer
from seamscope.decisions._offload import evaluate_offload_gate
from seamscope.decisions._policy import build_dispatch_context
from seamscope.decisions._priors import Priors
from seamscope.decisions._seams import (
    ContainedError,
    RoleModelResolver,
    ToolCallDispatchCallback,
    contained_error,
)
from seamscope.telemetry._config import TelemetryConfig
from seamscope.telemetry._configure import TelemetryHandle, check_telemetry_options
from seamscope.telemetry._genai import GenAISpans, tool_definitions
from seamscope.telemetry._invocation import Invocation, attached, error_type, record_error
from seamscope.telemetry._invocation import held as held_scope
from seamscope.telemetry._invocation import start as start_invocation
from seamscope.telemetry._logging import log_event, telemetry_error
from seamscope.telemetry._observer import OTelObserver

__all__ = [
    "ContainedError",
    "GenAISpans",
    "Invocation",
    "attached",
    "held_scope",
    "OTelObserver",
    "Priors",
    "RoleModelResolver",
    "TelemetryConfig",
    "TelemetryHandle",
    "ToolCallDispatchCallback",
    "build_dispatch_context",
    "check_telemetry_options",
    "checks",
    "contained_error",
    "error_type",
    "evaluate_offload_gate",
    "guard_observer",
    "log_event",
    "record_error",
    "start_invocation",
    "telemetry_error",
    "tool_definitions",
]
