"""Every instrument seamscope records, created in one place from conventions.

Metric attributes are bounded: :class:`LabelCap` keeps the first N distinct
values seen per attribute (plus the configured known ones) and folds the
tail into ``other``. Ids and free text never become metric attributes.

Counters: a synchronous SDK counter costs several microseconds per ``add``
(attribute cleaning and hashing, exemplar sampling). Where it exports the
same points (an SDK meter provider with exemplars off and cumulative
readers, see :func:`totals_export_like_counters`), the counting counters are
:class:`CounterTotals`: totals kept in process under a lock and reported by
an observable counter of the same name, unit and description. Elsewhere
they are ordinary synchronous counters. The duration histogram and the
USD counters are kept in process too (``HistogramTotals``/``SumTotals`` in
``_bridge``) when configure() built the meter provider around its Prometheus
reader and registered the instruments that reader exports
(:func:`register_in_process`); elsewhere they are the SDK's synchronous
instruments.
"""

from __future__ import annotations

import functools
import logging
import threading
import weakref
from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry import metrics

from seamscope import __version__
from seamscope.telemetry import conventions as c

__all__ = [
    "FLOAT_SUMS",
    "CounterTotals",
    "Instruments",
    "LabelCap",
    "bound",
    "register_in_process",
    "totals_export_like_counters",
]

_log = logging.getLogger("seamscope.telemetry")


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


class CounterTotals:
    """A counter kept as cumulative totals in process, exported on collection.

    Same ``add(amount, attributes)`` as a counter. The totals (one per
    attribute set) are reported by an observable counter of the same name,
    unit and description, so a reader collects a monotonic cumulative sum
    per attribute set: the points a synchronous counter gives, without the
    SDK's per-measurement work. Thread-safe: increments and the snapshot a
    collection reads are taken under one lock.

    Used only where it exports what a synchronous counter would (see
    :func:`totals_export_like_counters`). One field differs: the start time
    of a series' cumulative points is the first collection that saw it (an
    observable instrument's), where a synchronous counter gives the time of
    its first ``add``; the Prometheus exposition carries no start time.
    Attribute sets are told apart
    by equality, as dict keys are: seamscope's metric attributes are all
    strings (a caller mixing ``True`` and ``1`` for one attribute would get
    one series where the SDK keeps two).
    """

    __slots__ = ("_enabled", "_lock", "_name", "_totals")

    def __init__(self, name: str) -> None:
        self._name = name
        self._lock = threading.Lock()
        # frozenset(attribute items) -> [attributes, total]
        self._totals: dict[frozenset[tuple[str, Any]], list[Any]] = {}
        self._enabled: Any = None

    def bind(self, instrument: Any) -> None:
        """Follow the SDK instrument's enabled state (a disabled meter drops adds)."""
        self._enabled = getattr(instrument, "_is_enabled", None)

    def add(
        self, amount: int | float, attributes: Mapping[str, Any] | None = None, context: Any = None
    ) -> None:
        enabled = self._enabled
        if enabled is not None and not enabled():
            return
        if not amount >= 0 or amount == _INF:  # the SDK drops these too (NaN compares False)
            _log.warning("Add amount %r is not finite and >= 0 on counter %s.", amount, self._name)
            return
        with self._lock:
            self._entry(attributes)[1] += amount

    def bound(self, attributes: Mapping[str, Any]) -> Callable[[int | float], None]:
        """``add`` for one attribute set, for a caller that counts it again and again."""
        return _BoundTotal(self, attributes).add

    def _entry(self, attributes: Mapping[str, Any] | None) -> list[Any]:
        """The [attributes, total] of an attribute set, made at 0 (call under the lock)."""
        if not attributes:
            key = _NO_ATTRIBUTES
        else:
            try:
                key = frozenset(attributes.items())
            except TypeError:  # a list value: the SDK keys it as a tuple
                key = frozenset((k, _frozen(v)) for k, v in attributes.items())
        entry = self._totals.get(key)
        if entry is None:
            entry = self._totals[key] = [dict(attributes) if attributes else {}, 0]
        return entry

    def observe(self, options: metrics.CallbackOptions | None = None) -> list[metrics.Observation]:
        """The callback of the observable counter: one observation per attribute set."""
        with self._lock:
            snapshot = [(attrs, total) for attrs, total in self._totals.values()]
        return [metrics.Observation(total, attrs) for attrs, total in snapshot]


class _BoundTotal:
    """One attribute set of a :class:`CounterTotals`; its series is made on the
    first add, under the lock, exactly as ``add`` would make it."""

    __slots__ = ("_attributes", "_entry", "_totals")

    def __init__(self, totals: CounterTotals, attributes: Mapping[str, Any]) -> None:
        self._totals = totals
        self._attributes = dict(attributes)
        self._entry: list[Any] | None = None

    def add(self, amount: int | float) -> None:
        totals = self._totals
        enabled = totals._enabled
        if enabled is not None and not enabled():
            return
        if not amount >= 0 or amount == _INF:
            totals.add(amount, self._attributes)  # dropped there, with the warning
            return
        with totals._lock:
            entry = self._entry
            if entry is None:
                entry = self._entry = totals._entry(self._attributes)
            entry[1] += amount


def bound(instrument: Any, attributes: Mapping[str, Any]) -> Callable[[Any], None]:
    """``add`` (a counter) or ``record`` (a histogram) of ``instrument`` for one
    attribute set: the in-process instruments' own bound form, else the SDK
    instrument's method with the attributes given each time."""
    own = getattr(instrument, "bound", None)
    if own is not None:
        return own(attributes)  # type: ignore[no-any-return]
    attrs = dict(attributes)
    method = instrument.add if hasattr(instrument, "add") else instrument.record
    return functools.partial(method, attributes=attrs)


def _frozen(value: Any) -> Any:
    if isinstance(value, Mapping):
        return frozenset((k, _frozen(v)) for k, v in value.items())
    if isinstance(value, list | tuple):
        return tuple(_frozen(v) for v in value)
    return value


_INF = float("inf")
_NO_ATTRIBUTES: frozenset[tuple[str, Any]] = frozenset()


def _totals(meter: metrics.Meter, spec: c.MetricSpec) -> CounterTotals:
    totals = CounterTotals(spec.name)
    instrument = meter.create_observable_counter(
        spec.name, callbacks=[totals.observe], unit=spec.unit, description=spec.description
    )
    totals.bind(instrument)
    return totals


def _pair(table: Any, sync: type, observable: type) -> list[Any]:
    """The values a reader's per-instrument-class table holds for both kinds of counter."""
    return [v for cls, v in table.items() if issubclass(cls, sync | observable)]


def totals_export_like_counters(provider: Any) -> bool:
    """True when in-process totals export the points of synchronous counters.

    Same names, units, descriptions, kinds, temporality, attribute sets and
    values (only a series' start time differs, see :class:`CounterTotals`).

    That holds for an OpenTelemetry SDK ``MeterProvider`` whose exemplar
    filter is always-off (a synchronous counter in a sampled span carries
    exemplars, an observable one never does), with no views (a view may
    select one instrument type and not the other), and whose readers all
    collect counters and observable counters cumulatively, with the same
    aggregation and cardinality limit (the default of the in-memory,
    Prometheus and OTLP readers; an OTLP ``delta``/``lowmemory`` temporality
    preference makes this False). Anything else, or an SDK whose internals
    look different, gives False: synchronous counters are used. It is asked
    once per meter, when the first :class:`Instruments` is built on it: a
    reader added to the provider later is not looked at.
    """
    try:
        from opentelemetry.sdk.metrics import (
            AlwaysOffExemplarFilter,
            Counter,
            MeterProvider,
            ObservableCounter,
        )
        from opentelemetry.sdk.metrics.export import AggregationTemporality
        from opentelemetry.sdk.metrics.view import DefaultAggregation
    except ImportError:  # pragma: no cover - the SDK is a dependency
        return False
    if not isinstance(provider, MeterProvider):
        return False
    try:
        config = provider._sdk_config
        if not isinstance(config.exemplar_filter, AlwaysOffExemplarFilter) or config.views:
            return False
        readers = list(provider._measurement_consumer._reader_storages)
        for reader in readers:
            temporality = _pair(reader._instrument_class_temporality, Counter, ObservableCounter)
            aggregation = _pair(reader._instrument_class_aggregation, Counter, ObservableCounter)
            limits = _pair(
                getattr(reader, "_instrument_class_cardinality_limit", None) or {},
                Counter,
                ObservableCounter,
            )
            if (
                len(temporality) != 2
                or any(t is not AggregationTemporality.CUMULATIVE for t in temporality)
                or len(aggregation) != 2
                or any(type(a) is not DefaultAggregation for a in aggregation)
                or len(limits) == 1
                or len(set(limits)) > 1
            ):
                return False
        return True
    except Exception:
        return False


FLOAT_SUMS: frozenset[str] = frozenset(
    {
        c.METRIC_OFFLOAD_PREDICTED_NET_SAVING.name,
        c.METRIC_OFFLOAD_REALIZED_SAVINGS.name,
        c.METRIC_OFFLOAD_REALIZED_COSTS.name,
    }
)
"""Counters of float amounts (USD): always synchronous. A float sum depends on
the order of additions, and the SDK adds per collection interval of each
reader, which one set of in-process totals cannot reproduce bit for bit when
several readers collect. The other counters count (integers): exact either way."""


_IN_PROCESS: weakref.WeakKeyDictionary[Any, Mapping[str, Any]] = weakref.WeakKeyDictionary()


def register_in_process(meter_provider: Any, instruments: Mapping[str, Any]) -> None:
    """Record that ``meter_provider``'s only reader exports ``instruments`` (by
    metric name: the ``HistogramTotals`` and ``SumTotals`` of ``_bridge``) with
    each collection, so those metrics can be kept in process. Called by
    configure() for the provider it builds around its Prometheus reader."""
    _IN_PROCESS[meter_provider] = dict(instruments)


class _Counters:
    """The counters and the duration histogram of one meter, shared by every
    Instruments built on it."""

    __slots__ = ("by_name", "duration", "histogram_in_process", "in_process", "sums_in_process")

    def __init__(
        self, meter: metrics.Meter, in_process: bool, exported: Mapping[str, Any] | None = None
    ) -> None:
        self.in_process = in_process
        # the bridged reader's instruments, only where the counts are in process
        # (the same exemplar and reader checks hold)
        bridged = dict(exported or {}) if in_process else {}
        self.by_name: dict[str, Any] = {}
        for spec in c.METRICS:
            if spec.kind != "counter":
                continue
            if spec.name in FLOAT_SUMS and spec.name in bridged:
                self.by_name[spec.name] = bridged[spec.name]
            elif in_process and spec.name not in FLOAT_SUMS:
                self.by_name[spec.name] = _totals(meter, spec)
            else:
                self.by_name[spec.name] = _counter(meter, spec)
        self.sums_in_process = FLOAT_SUMS <= set(bridged)
        duration = bridged.get(c.METRIC_DECISION_DURATION.name)
        self.histogram_in_process = duration is not None
        self.duration: Any = duration or _histogram(meter, c.METRIC_DECISION_DURATION)


_SHARED: weakref.WeakKeyDictionary[Any, _Counters] = weakref.WeakKeyDictionary()
_SHARED_LOCK = threading.Lock()


def _counters(meter: metrics.Meter, provider: Any) -> _Counters:
    """One set of counters per meter: an observable counter registered twice
    keeps only its first callback, so totals must be shared."""
    with _SHARED_LOCK:
        try:
            counters = _SHARED.get(meter)
        except TypeError:  # a meter that cannot be weakly referenced
            return _Counters(meter, False)
        if counters is None:
            try:
                exported = _IN_PROCESS.get(provider)
            except TypeError:
                exported = None
            counters = _Counters(meter, totals_export_like_counters(provider), exported)
            _SHARED[meter] = counters
        return counters


class Instruments:
    """The instruments of one meter provider.

    ``enabled`` is False when the provider is the no-op API's, so callers can
    skip building measurements nobody records. ``counters_in_process`` is
    True when the count counters are :class:`CounterTotals` (see
    :func:`totals_export_like_counters`); ``histogram_in_process`` and
    ``sums_in_process`` when the duration histogram and the USD counters are
    kept in process for configure()'s Prometheus reader (see ``_bridge``).
    """

    __slots__ = (
        "counters_in_process",
        "decision_duration",
        "enabled",
        "histogram_in_process",
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
        "sums_in_process",
    )

    def __init__(self, meter_provider: metrics.MeterProvider | None = None) -> None:
        provider = meter_provider or metrics.get_meter_provider()
        meter = provider.get_meter("seamscope", __version__)
        self.enabled = not isinstance(meter, metrics.NoOpMeter)
        counters = _counters(meter, provider) if self.enabled else _Counters(meter, False)
        self.counters_in_process = counters.in_process
        self.histogram_in_process = counters.histogram_in_process
        self.sums_in_process = counters.sums_in_process
        by_name = counters.by_name
        self.policy_evaluations = by_name[c.METRIC_POLICY_EVALUATIONS.name]
        self.policy_wins = by_name[c.METRIC_POLICY_WINS.name]
        self.redirects = by_name[c.METRIC_REDIRECTS.name]
        self.stage_outcomes = by_name[c.METRIC_STAGE_OUTCOMES.name]
        self.selection_tools = by_name[c.METRIC_SELECTION_TOOLS.name]
        self.offload_decisions = by_name[c.METRIC_OFFLOAD_DECISIONS.name]
        self.offload_predicted_net_saving = by_name[c.METRIC_OFFLOAD_PREDICTED_NET_SAVING.name]
        self.offload_realized_savings = by_name[c.METRIC_OFFLOAD_REALIZED_SAVINGS.name]
        self.offload_realized_costs = by_name[c.METRIC_OFFLOAD_REALIZED_COSTS.name]
        self.offload_recalls = by_name[c.METRIC_OFFLOAD_RECALLS.name]
        self.offload_settled = by_name[c.METRIC_OFFLOAD_SETTLED.name]
        self.model_input_tokens = by_name[c.METRIC_MODEL_INPUT_TOKENS.name]
        self.decision_duration = counters.duration


def flag(value: Any) -> str:
    """A metric attribute for a boolean: ``"true"``/``"false"``."""
    return "true" if value else "false"
