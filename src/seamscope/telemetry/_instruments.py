"""Every instrument seamscope records, created in one place from conventions.

The instruments are the SDK's own synchronous counters and one histogram,
made by two small factories from the :data:`~seamscope.telemetry.conventions.METRICS`
specs (name, UCUM unit, description; explicit buckets for the histogram).
seamscope keeps no aggregation of its own: cost is kept down by recording
less (one duration per decision kind per iteration, one add per distinct
attribute set per decision), never by replacing the SDK's aggregation.

Metric attributes are bounded: :class:`LabelCap` keeps at most N distinct
values per attribute and folds the rest into ``other``. The values kept are
shared by every observer on one meter provider (:func:`shared_labels`), so
the cap holds per attribute whatever the number of observers, layers or
adapters recording there: a thousand DecisionLayers with a policy each
give at most N policy names, not N per layer. Configured names (policies,
stages) are kept first, but count against the same cap, so no configuration
can grow a series set past it. Ids and free text never become metric
attributes.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable, Mapping

from opentelemetry import metrics

from seamscope import __version__
from seamscope.telemetry import conventions as c

__all__ = ["Instruments", "LabelCap", "Labels", "flag", "shared_labels"]


class Labels:
    """The metric attribute values admitted per key on one meter provider."""

    __slots__ = ("__weakref__", "lock", "values")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.values: dict[str, set[str]] = {}


_SHARED: weakref.WeakKeyDictionary[object, Labels] = weakref.WeakKeyDictionary()
_SHARED_LOCK = threading.Lock()


def shared_labels(meter_provider: object) -> Labels:
    """The :class:`Labels` of ``meter_provider``, one per provider for the
    process (held as long as the provider lives); a provider that cannot be
    weakly referenced gets its own."""
    with _SHARED_LOCK:
        try:
            labels = _SHARED.get(meter_provider)
            if labels is None:
                labels = _SHARED[meter_provider] = Labels()
            return labels
        except TypeError:
            return Labels()


class LabelCap:
    """Folds the tail of an attribute's values into ``other`` (thread-safe).

    At most ``cap`` distinct values per attribute key pass through, counted
    over every LabelCap sharing ``labels`` (all observers on one meter
    provider: see :func:`shared_labels`; each holds the shared set to its
    own ``cap``). Configured values are admitted first, in sorted order,
    while places are left: ``by_key`` for one key each (the policy names under
    ``seamscope.policy.name``, the stage names under ``seamscope.stage.name``)
    when the cap is made, ``known`` (``TelemetryConfig.known_labels``) for
    every key when the key is first seen. Other values take the places left,
    first come first kept. ``None`` is ``none``.
    """

    __slots__ = ("_cap", "_known", "_lock", "_ready", "_values")

    def __init__(
        self,
        cap: int,
        known: Iterable[str] = (),
        by_key: Mapping[str, Iterable[str]] | None = None,
        labels: Labels | None = None,
    ) -> None:
        self._cap = cap
        shared = labels if labels is not None else Labels()
        self._values = shared.values
        self._lock = shared.lock
        self._known = sorted(set(known))
        self._ready: set[str] = set()
        for key, values in (by_key or {}).items():
            self._admit(key, sorted(set(self._known) | set(values)))

    def _admit(self, key: str, values: Iterable[str]) -> None:
        """Admit ``values`` of ``key`` in order while places are left."""
        with self._lock:
            admitted = self._values.setdefault(key, set())
            for value in values:
                if len(admitted) >= self._cap:
                    break
                admitted.add(value)
            self._ready.add(key)

    def __call__(self, key: str, value: str | None) -> str:
        if value is None:
            return "none"
        if key not in self._ready:
            self._admit(key, self._known)
        admitted = self._values[key]
        if value in admitted:
            return value
        with self._lock:
            if value in admitted:
                return value
            if len(admitted) >= self._cap:
                return c.OTHER
            admitted.add(value)
            return value


def _counter(meter: metrics.Meter, spec: c.MetricSpec) -> metrics.Counter:
    return meter.create_counter(spec.name, unit=spec.unit, description=spec.description)


def _histogram(
    meter: metrics.Meter,
    spec: c.MetricSpec,
    buckets: tuple[float, ...] = c.DECISION_DURATION_BUCKETS,
) -> metrics.Histogram:
    return meter.create_histogram(
        spec.name,
        unit=spec.unit,
        description=spec.description,
        explicit_bucket_boundaries_advisory=list(buckets),
    )


class Instruments:
    """The instruments of one meter provider (plain SDK instruments).

    ``enabled`` is False when the provider is the no-op API's, so callers can
    skip building measurements nobody records.
    """

    __slots__ = (
        "decision_duration",
        "enabled",
        "labels",
        "middleware_cost",
        "middleware_decisions",
        "model_input_tokens",
        "offload_carried_turns",
        "offload_decisions",
        "offload_predicted_net_saving",
        "offload_prior_recall_probability",
        "offload_realized_costs",
        "offload_realized_savings",
        "offload_recalled_offloads",
        "offload_recalls",
        "offload_remaining_turns",
        "offload_settled",
        "offload_settled_recalls",
        "offload_shadow_costs",
        "offload_shadow_disagreements",
        "offload_shadow_savings",
        "offload_store_errors",
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
        self.labels = shared_labels(provider)
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
        self.offload_shadow_disagreements = _counter(meter, c.METRIC_OFFLOAD_SHADOW_DISAGREEMENTS)
        self.offload_shadow_savings = _counter(meter, c.METRIC_OFFLOAD_SHADOW_SAVINGS)
        self.offload_shadow_costs = _counter(meter, c.METRIC_OFFLOAD_SHADOW_COSTS)
        self.offload_remaining_turns = _histogram(
            meter, c.METRIC_OFFLOAD_REMAINING_TURNS, c.REMAINING_TURNS_BUCKETS
        )
        self.offload_recalled_offloads = _counter(meter, c.METRIC_OFFLOAD_RECALLED_OFFLOADS)
        self.offload_settled_recalls = _counter(meter, c.METRIC_OFFLOAD_SETTLED_RECALLS)
        self.offload_carried_turns = _counter(meter, c.METRIC_OFFLOAD_CARRIED_TURNS)
        self.offload_prior_recall_probability = _counter(
            meter, c.METRIC_OFFLOAD_PRIOR_RECALL_PROBABILITY
        )
        self.model_input_tokens = _counter(meter, c.METRIC_MODEL_INPUT_TOKENS)
        self.offload_store_errors = _counter(meter, c.METRIC_OFFLOAD_STORE_ERRORS)
        self.middleware_decisions = _counter(meter, c.METRIC_MIDDLEWARE_DECISIONS)
        self.middleware_cost = _counter(meter, c.METRIC_MIDDLEWARE_COST)
        self.decision_duration = _histogram(meter, c.METRIC_DECISION_DURATION)


def flag(value: object) -> str:
    """A metric attribute for a boolean: ``"true"``/``"false"``."""
    return "true" if value else "false"
