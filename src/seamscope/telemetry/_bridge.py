"""The duration histogram and USD sums kept in process for the Prometheus reader of configure().

A synchronous SDK instrument costs several microseconds per measurement (a
measurement object, attribute copy and hashing, the reader-storage lookup,
exemplar sampling), and an iteration records twelve durations and a
predicted saving. When :func:`~seamscope.telemetry.configure` builds a meter
provider whose only reader is its Prometheus reader and whose exemplars are
off, nothing in the SDK's path changes the exported points, so these are
aggregated here instead (a ``bisect`` or an addition under a lock) and the
reader adds them to each collection:

* :class:`HistogramTotals` aggregates explicit-bucket histograms per
  attribute set, cumulatively, exactly as the SDK does for one reader
  (bucket counts, count, min, max, and the sum folded per collection
  interval in the SDK's order, so the floats are bit for bit the same);
* :class:`SumTotals` does the same for the float (USD) counters: the SDK
  adds each collection interval's sum to the previous total, so the float
  totals are folded per collection in that order;
* :class:`BridgedPrometheusMetricReader` is the SDK's Prometheus reader
  with those points merged into what it collects, in the ``seamscope``
  instrumentation scope.

One field differs from the SDK's points, as for the counters' totals: the
start time of the cumulative points is the instrument's first measurement
here, the reader's first measurement of the instrument in the SDK; the
Prometheus exposition carries no start time. Any other meter provider (a
push reader, several readers, exemplars on, views) gets the SDK's
synchronous instruments.
"""

from __future__ import annotations

import itertools
import logging
import math
import threading
from bisect import bisect_left
from collections.abc import Callable, Mapping, Sequence
from time import time_ns
from typing import Any

from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    Histogram,
    HistogramDataPoint,
    Metric,
    MetricsData,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
    Sum,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from seamscope.telemetry import conventions as c

__all__ = ["BridgedPrometheusMetricReader", "HistogramTotals", "SumTotals"]

_log = logging.getLogger("seamscope.telemetry")


class _HistogramSeries:
    """One attribute set's cumulative histogram (the SDK's aggregation fields)."""

    __slots__ = ("attributes", "counts", "interval_sum", "max", "min", "total_sum")

    def __init__(self, attributes: dict[str, Any], buckets: int) -> None:
        self.attributes = attributes
        self.counts = [0] * buckets
        self.interval_sum: float = 0
        self.total_sum: float = 0
        self.min = math.inf
        self.max = -math.inf

    def add(self, index: int, amount: float) -> None:
        """One measurement in bucket ``index`` (call under the histogram's lock)."""
        self.counts[index] += 1
        self.interval_sum += amount
        if amount < self.min:
            self.min = amount
        if amount > self.max:
            self.max = amount


class _SumSeries:
    """One attribute set's cumulative sum: the open interval's sum (None while
    nothing was added in it) and the total of the closed intervals."""

    __slots__ = ("attributes", "interval_sum", "total")

    def __init__(self, attributes: dict[str, Any]) -> None:
        self.attributes = attributes
        self.interval_sum: float | None = None
        self.total: float = 0


class _InProcess:
    """What the in-process instruments share: the metric's identity, one lock,
    the series per attribute set, the SDK's checks of an amount, and the
    first measurement's time (the cumulative points' start)."""

    __slots__ = ("_lock", "_series", "_start", "description", "name", "unit")

    _verb = ""  # the SDK's words in its warnings: "Record"/"Histogram", "Add"/"Counter"
    _noun = ""

    def __init__(self, spec: c.MetricSpec) -> None:
        self.name = spec.name
        self.unit = spec.unit
        self.description = spec.description
        self._lock = threading.Lock()
        # frozenset(attribute items) -> the series of that attribute set
        self._series: dict[frozenset[tuple[str, Any]], Any] = {}
        self._start: int | None = None

    def _accepts(self, amount: float) -> bool:
        """False, with the SDK's warning, for a non-finite or negative amount."""
        if not math.isfinite(amount):
            _log.warning(
                "%s amount %s is not finite on %s %s, ignoring measurement.",
                self._verb,
                amount,
                self._noun,
                self.name,
            )
            return False
        if amount < 0:
            _log.warning(
                "%s amount must be non-negative on %s %s.", self._verb, self._noun, self.name
            )
            return False
        return True

    def _new_series(self, attributes: dict[str, Any]) -> Any:
        raise NotImplementedError

    def _find(self, attributes: Mapping[str, Any] | None) -> Any:
        """The series of ``attributes``, made on first use (call under the lock)."""
        key = frozenset(attributes.items()) if attributes else _NO_ATTRIBUTES
        series = self._series.get(key)
        if series is None:
            if self._start is None:
                self._start = time_ns()
            series = self._new_series(dict(attributes) if attributes else {})
            self._series[key] = series
        return series

    def _points(self, time_unix_nano: int) -> list[Any] | None:
        """Close the collection interval of every series and return their points."""
        with self._lock:
            if not self._series:
                return None
            start = self._start or time_unix_nano
            return [self._point(s, start, time_unix_nano) for s in self._series.values()]

    def _point(self, series: Any, start: int, time_unix_nano: int) -> Any:
        raise NotImplementedError

    def _data(self, points: list[Any]) -> Histogram | Sum:
        raise NotImplementedError

    def metric(self, time_unix_nano: int) -> Metric | None:
        """The cumulative points of every attribute set; None before any measurement."""
        points = self._points(time_unix_nano)
        if points is None:
            return None
        return Metric(
            name=self.name, description=self.description, unit=self.unit, data=self._data(points)
        )


class HistogramTotals(_InProcess):
    """An explicit-bucket histogram aggregated in process, cumulative, for one reader.

    Same ``record(amount, attributes)`` as an SDK histogram, and the same
    handling of bad amounts (a non-finite or negative amount is dropped with
    a warning). :meth:`metric` returns the cumulative points of every
    attribute set, like the SDK's collection for one reader; it is meant to
    be called by that one reader only (each call closes a collection
    interval of the sum). Thread-safe.
    """

    __slots__ = ("_bounds",)

    _verb = "Record"
    _noun = "Histogram"

    def __init__(self, spec: c.MetricSpec, boundaries: Sequence[float]) -> None:
        bounds = tuple(float(b) for b in boundaries)
        if any(not math.isfinite(b) for b in bounds) or any(
            a >= b for a, b in itertools.pairwise(bounds)
        ):
            raise ValueError(f"{spec.name}: bucket boundaries must be finite and increasing")
        super().__init__(spec)
        self._bounds = bounds

    def record(
        self, amount: float, attributes: Mapping[str, Any] | None = None, context: Any = None
    ) -> None:
        if not self._accepts(amount):
            return
        index = bisect_left(self._bounds, amount)
        with self._lock:
            self._find(attributes).add(index, amount)

    def bound(self, attributes: Mapping[str, Any]) -> Callable[[float], None]:
        """``record`` for one attribute set, for a caller that records it again and again."""
        return _BoundSeries(self, attributes).record

    def _new_series(self, attributes: dict[str, Any]) -> _HistogramSeries:
        return _HistogramSeries(attributes, len(self._bounds) + 1)

    def _point(self, series: Any, start: int, time_unix_nano: int) -> HistogramDataPoint:
        # the SDK adds an interval's sum to the previous total, in this order
        series.total_sum = series.interval_sum + series.total_sum
        series.interval_sum = 0
        return HistogramDataPoint(
            attributes=series.attributes,
            start_time_unix_nano=start,
            time_unix_nano=time_unix_nano,
            count=sum(series.counts),
            sum=series.total_sum,
            bucket_counts=tuple(series.counts),
            explicit_bounds=self._bounds,
            min=series.min,
            max=series.max,
            exemplars=[],
        )

    def _data(self, points: list[Any]) -> Histogram:
        return Histogram(
            data_points=points, aggregation_temporality=AggregationTemporality.CUMULATIVE
        )


_NO_ATTRIBUTES: frozenset[tuple[str, Any]] = frozenset()


class _BoundSeries:
    """One attribute set of a :class:`HistogramTotals`; its series is made on
    the first record, under the lock, exactly as ``record`` would make it."""

    __slots__ = ("_attributes", "_histogram", "_series")

    def __init__(self, histogram: HistogramTotals, attributes: Mapping[str, Any]) -> None:
        self._histogram = histogram
        self._attributes = dict(attributes)
        self._series: _HistogramSeries | None = None

    def record(self, amount: float) -> None:
        histogram = self._histogram
        if not 0 <= amount < math.inf:  # NaN, negative, inf: dropped there, with the warning
            histogram.record(amount, self._attributes)
            return
        index = bisect_left(histogram._bounds, amount)
        with histogram._lock:
            series = self._series
            if series is None:
                series = self._series = histogram._find(self._attributes)
            # _HistogramSeries.add, inlined: twelve of these run per decision iteration
            series.counts[index] += 1
            series.interval_sum += amount
            if amount < series.min:
                series.min = amount
            if amount > series.max:
                series.max = amount


class SumTotals(_InProcess):
    """A monotonic float counter aggregated in process, cumulative, for one reader.

    Same ``add(amount, attributes)`` as an SDK counter, and the same handling
    of bad amounts. Each :meth:`metric` call closes a collection interval: its
    sum is added to the previous total, as the SDK does, so the float totals
    are the SDK's bit for bit. Thread-safe.
    """

    __slots__ = ()

    _verb = "Add"
    _noun = "Counter"

    def add(
        self, amount: float, attributes: Mapping[str, Any] | None = None, context: Any = None
    ) -> None:
        if not self._accepts(amount):
            return
        with self._lock:
            series = self._find(attributes)
            previous = series.interval_sum
            series.interval_sum = (0 if previous is None else previous) + amount

    def bound(self, attributes: Mapping[str, Any]) -> Callable[[float], None]:
        """``add`` for one attribute set, for a caller that adds to it again and again."""
        attrs = dict(attributes)
        return lambda amount: self.add(amount, attrs)

    def _new_series(self, attributes: dict[str, Any]) -> _SumSeries:
        return _SumSeries(attributes)

    def _point(self, series: Any, start: int, time_unix_nano: int) -> NumberDataPoint:
        # the SDK adds an interval's sum (0 when none) to the previous total
        interval = series.interval_sum
        series.total = (0 if interval is None else interval) + series.total
        series.interval_sum = None
        return NumberDataPoint(
            attributes=series.attributes,
            start_time_unix_nano=start,
            time_unix_nano=time_unix_nano,
            value=series.total,
            exemplars=[],
        )

    def _data(self, points: list[Any]) -> Sum:
        return Sum(
            data_points=points,
            aggregation_temporality=AggregationTemporality.CUMULATIVE,
            is_monotonic=True,
        )


class BridgedPrometheusMetricReader(PrometheusMetricReader):
    """The SDK's Prometheus reader, with in-process instruments added to each collection.

    ``instruments`` (:class:`HistogramTotals`, :class:`SumTotals`) join the
    ``scope`` metrics of what the SDK collected (or make the whole
    collection when the SDK had nothing). Collections are serialized: each
    closes one interval of the instruments' sums.
    """

    def __init__(
        self,
        instruments: Sequence[HistogramTotals | SumTotals],
        *,
        scope: InstrumentationScope,
        resource: Resource,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.in_process = {i.name: i for i in instruments}
        self._seamscope_scope = scope
        self._seamscope_resource = resource
        self._seamscope_lock = threading.Lock()
        self._seamscope_merged = False

    # The SDK marks collect() final for its own readers' sake; this override
    # only wraps it (same collection, same _receive_metrics) to cover the one
    # case the SDK skips: a collection where nothing but the histogram has points.
    def collect(self, timeout_millis: float = 10_000) -> None:  # type: ignore[misc]
        with self._seamscope_lock:
            self._seamscope_merged = False
            super().collect(timeout_millis=timeout_millis)
            if not self._seamscope_merged:  # the SDK had nothing: the histograms alone
                data = self._merge(None)
                if data is not None:
                    super()._receive_metrics(data, timeout_millis=timeout_millis)

    def _receive_metrics(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
    ) -> None:
        self._seamscope_merged = True
        merged = self._merge(metrics_data) if metrics_data is not None else None
        super()._receive_metrics(merged or metrics_data, timeout_millis=timeout_millis, **kwargs)

    def _merge(self, data: MetricsData | None) -> MetricsData | None:
        now = time_ns()
        extra = [m for i in self.in_process.values() if (m := i.metric(now)) is not None]
        if not extra:
            return data
        scope = self._seamscope_scope
        if data is None or not data.resource_metrics:
            resource = self._seamscope_resource
            return MetricsData(
                resource_metrics=[
                    ResourceMetrics(
                        resource=resource,
                        scope_metrics=[ScopeMetrics(scope, extra, scope.schema_url or "")],
                        schema_url=resource.schema_url,
                    )
                ]
            )
        first, *rest = data.resource_metrics
        scopes = list(first.scope_metrics)
        for i, scope_metrics in enumerate(scopes):
            if scope_metrics.scope == scope:
                scopes[i] = ScopeMetrics(
                    scope, [*scope_metrics.metrics, *extra], scope_metrics.schema_url
                )
                break
        else:
            scopes.append(ScopeMetrics(scope, extra, scope.schema_url or ""))
        merged = ResourceMetrics(
            resource=first.resource, scope_metrics=scopes, schema_url=first.schema_url
        )
        return MetricsData(resource_metrics=[merged, *rest])
