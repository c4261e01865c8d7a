"""Every instrument seamscope records, created in one place from conventions.

The instruments are the SDK's own synchronous counters and one histogram,
made by two small factories from the :data:`~seamscope.telemetry.conventions.METRICS`
specs (name, UCUM unit, description; explicit buckets for the histogram).
seamscope keeps no aggregation of its own: cost is kept down by recording
less (one duration per decision kind per iteration, one add per distinct
attribute set per decision), never by replacing the SDK's aggregation.

Metric attributes are bounded: :class:`LabelCap` keeps at most N distinct
values per attribute and folds the rest into ``other``. Configured names
(policies, stages) are kept first, but count against the same cap, so no
configuration can grow a series set past it. Ids and free text never
become metric attributes.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping

from opentelemetry import metrics

from seamscope import __version__
from seamscope.telemetry import conventions as c

__all__ = ["Instruments", "LabelCap", "flag"]


class LabelCap:
    """Folds the tail of an attribute's values into ``other`` (thread-safe).

    At most ``cap`` distinct values per attribute key pass through. Configured
    values are reserved first: ``known`` for every key (``TelemetryConfig.
    known_labels``), ``by_key`` for one key each (the policy names under
    ``seamscope.policy.name``, the stage names under ``seamscope.stage.name``).
    The first ``cap`` of a key's configured values, in sorted order, always
    pass; other values of that key take the slots left. ``None`` is ``none``.
    """

    __slots__ = ("_cap", "_known", "_lock", "_seen", "_shared")

    def __init__(
        self,
        cap: int,
        known: Iterable[str] = (),
        by_key: Mapping[str, Iterable[str]] | None = None,
    ) -> None:
        self._cap = cap
        shared = set(known)
        self._shared = frozenset(sorted(shared)[:cap])
        self._known = {
            key: frozenset(sorted(shared | set(values))[:cap])
            for key, values in (by_key or {}).items()
        }
        self._seen: dict[str, set[str]] = {}
        self._lock = threading.Lock()

    def __call__(self, key: str, value: str | None) -> str:
        if value is None:
            return "none"
        known = self._known.get(key, self._shared)
        if value in known:
            return value
        seen = self._seen.get(key)
        if seen is not None and value in seen:
            return value
        with self._lock:
            seen = self._seen.setdefault(key, set())
            if value in seen:
                return value
            if len(seen) + len(known) >= self._cap:
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
    """The instruments of one meter provider (plain SDK instruments).

    ``enabled`` is False when the provider is the no-op API's, so callers can
    skip building measurements nobody records.
    """

    __slots__ = (
        "decision_duration",
        "enabled",
        "middleware_cost",
        "middleware_decisions",
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
        self.middleware_decisions = _counter(meter, c.METRIC_MIDDLEWARE_DECISIONS)
        self.middleware_cost = _counter(meter, c.METRIC_MIDDLEWARE_COST)
        self.decision_duration = _histogram(meter, c.METRIC_DECISION_DURATION)


def flag(value: object) -> str:
    """A metric attribute for a boolean: ``"true"``/``"false"``."""
    return "true" if value else "false"
