"""seamscope.telemetry."""
