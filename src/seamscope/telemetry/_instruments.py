"""Every instrument seamscope records, created in one place from conventions.

Metric attributes are bounded: :class:`LabelCap` keeps the first N distinct
values seen per attribute (plus the configured known ones) and folds the
tail into ``other``. Ids and free text never become metric attributes.
"""

from __future__ import annotations

import threading
from typing import Any

from opentelemetry import metrics

from seamscope import __version__
from seamscope.telemetry import conventions as c

__all__ = ["Instruments", "LabelCap"]


class LabelCap:
    """Folds the tail of an attribute's values into ``other`` (thread-safe)."""

    __slots__ = ("_cap", "_known", "_lock", "_seen")

    def __init__(self, cap: int, known: frozenset[str] = frozenset()) -> None:
        self._cap = cap
        self._known = known
        self._seen: dict[str, set[str]] = {}
        self._lock = threading.Lock()

    def __call__(self, key: str, value: str | None) -> str:
        if value is None:
            return "none"
        if value in self._known:
            return value
        seen = self._seen.get(key)
        if seen is not None and value in seen:
            return value
        with self._lock:
            seen = self._seen.setdefault(key, set())
            if value in seen:
                return value
            if len(seen) >= self._cap:
                return c.OTHER
            seen.add(value)
            return value


def _counter(meter: metrics.Meter, spec: c.MetricSpec) -> metrics.Counter:
    return meter.create_counter(spec.name, unit=spec.unit, description=spec.description)


def _histogram(meter: metrics.Meter, spec: c.MetricSpec) -> metrics.Histogram:
    return meter.create_histogram(
        spec.name,
        unit=spec.unit,
        description=spec.description,
        explicit_bucket_boundaries_advisory=list(c.DECISION_DURATION_BUCKETS),
    )


class Instruments:
    """The instruments of one meter provider.

    ``enabled`` is False when the provider is the no-op API's, so callers can
    skip building measurements nobody records.
    """

    __slots__ = (
        "decision_duration",
        "enabled",
        "model_input_tokens",
        "offload_decisions",
        "offload_predicted_net_saving",
        "offload_realized_costs",
        "offload_realized_savings",
        "offload_recalls",
        "offload_settled",
        "policy_evaluations",
        "policy_wins",
        "redirects",
        "selection_tools",
        "stage_outcomes",
    )

    def __init__(self, meter_provider: metrics.MeterProvider | None = None) -> None:
        provider = meter_provider or metrics.get_meter_provider()
        meter = provider.get_meter("seamscope", __version__)
        self.enabled = not isinstance(meter, metrics.NoOpMeter)
        self.policy_evaluations = _counter(meter, c.METRIC_POLICY_EVALUATIONS)
        self.policy_wins = _counter(meter, c.METRIC_POLICY_WINS)
        self.redirects = _counter(meter, c.METRIC_REDIRECTS)
        self.stage_outcomes = _counter(meter, c.METRIC_STAGE_OUTCOMES)
        self.selection_tools = _counter(meter, c.METRIC_SELECTION_TOOLS)
        self.offload_decisions = _counter(meter, c.METRIC_OFFLOAD_DECISIONS)
        self.offload_predicted_net_saving = _counter(meter, c.METRIC_OFFLOAD_PREDICTED_NET_SAVING)
        self.offload_realized_savings = _counter(meter, c.METRIC_OFFLOAD_REALIZED_SAVINGS)
        self.offload_realized_costs = _counter(meter, c.METRIC_OFFLOAD_REALIZED_COSTS)
        self.offload_recalls = _counter(meter, c.METRIC_OFFLOAD_RECALLS)
        self.offload_settled = _counter(meter, c.METRIC_OFFLOAD_SETTLED)
        self.model_input_tokens = _counter(meter, c.METRIC_MODEL_INPUT_TOKENS)
        self.decision_duration = _histogram(meter, c.METRIC_DECISION_DURATION)


def flag(value: Any) -> str:
    """A metric attribute for a boolean: ``"true"``/``"false"``."""
    return "true" if value else "false"
