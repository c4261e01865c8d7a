"""Counts kept as in-process totals export the points synchronous counters export.

Each comparison runs the same decisions twice, into two fresh meter
providers that differ only in the counter path: ``CounterTotals`` reported
by observable counters, or synchronous SDK counters (forced by patching
:func:`totals_export_like_counters`). The points read back (in memory, from
a Prometheus registry, through a periodic OTLP-style reader) must be equal:
names, units, descriptions, kinds, monotonicity, temporality, attribute sets
and values. Histogram points are compared by count and buckets bounds (their
sums are durations). Timestamps are left out; the one that differs, a
series' start time, is pinned by its own test.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from opentelemetry import metrics
from opentelemetry.sdk.metrics import (
    AlwaysOffExemplarFilter,
    AlwaysOnExemplarFilter,
    Counter,
    MeterProvider,
    ObservableCounter,
    TraceBasedExemplarFilter,
)
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    HistogramDataPoint,
    InMemoryMetricReader,
    MetricExporter,
    MetricExportResult,
    MetricReader,
    MetricsData,
    NumberDataPoint,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.metrics.view import View
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from seamscope.decisions import OffloadGate
from seamscope.telemetry import (
    OffloadLedger,
    OTelObserver,
    TelemetryConfig,
    _configure,
    _instruments,
)
from seamscope.telemetry import conventions as c
from seamscope.telemetry._instruments import (
    FLOAT_SUMS,
    CounterTotals,
    Instruments,
    totals_export_like_counters,
)

from . import _support as s

OFF = AlwaysOffExemplarFilter


class MemoryExporter(MetricExporter):
    """A push exporter that keeps every batch (what an OTLP exporter would send)."""

    def __init__(self, temporality: dict[type, AggregationTemporality] | None = None) -> None:
        super().__init__(preferred_temporality=temporality)
        self.batches: list[MetricsData] = []

    def export(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
    ) -> MetricExportResult:
        self.batches.append(metrics_data)
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        return None


def normalized(data: MetricsData | None) -> list[tuple[Any, ...]]:
    """Every metric and point, timestamps and duration values left out, sorted."""
    out: list[tuple[Any, ...]] = []
    if data is None:
        return out
    for resource_metrics in data.resource_metrics:
        for scope_metrics in resource_metrics.scope_metrics:
            scope = (scope_metrics.scope.name, scope_metrics.scope.version)
            for metric in scope_metrics.metrics:
                points = []
                for point in metric.data.data_points:
                    attrs = tuple(sorted((point.attributes or {}).items()))
                    if isinstance(point, NumberDataPoint):
                        value: Any = (type(point.value).__name__, point.value)
                        exemplars = len(point.exemplars or ())
                    else:
                        assert isinstance(point, HistogramDataPoint)
                        value = (point.count, tuple(point.explicit_bounds))
                        exemplars = 0
                    points.append((attrs, value, exemplars))
                out.append(
                    (
                        scope,
                        metric.name,
                        metric.unit,
                        metric.description,
                        type(metric.data).__name__,
                        getattr(metric.data, "is_monotonic", None),
                        getattr(metric.data, "aggregation_temporality", None),
                        tuple(sorted(points)),
                    )
                )
    return sorted(out)


@pytest.fixture
def sync_counters(monkeypatch: pytest.MonkeyPatch) -> Callable[[], Any]:
    """Run a callable with synchronous counters forced, whatever the provider."""

    def forced(fn: Callable[[], Any]) -> Any:
        with monkeypatch.context() as patch:
            patch.setattr(_instruments, "totals_export_like_counters", lambda provider: False)
            return fn()

    return forced


def workload(meter_provider: Any, tracer_provider: Any, rounds: int = 1) -> None:
    """Decisions through every counter: two scripted turns, capped gate labels."""
    for _ in range(rounds):
        s.run(
            s.Scenario(max_iterations=2),
            tracer_provider=tracer_provider,
            meter_provider=meter_provider,
        )
    observer = OTelObserver(
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        config=TelemetryConfig.create(metric_label_cap=2),
    )
    gate = OffloadGate(pricing=s.PRICING, observer=observer)
    for i in range(6):
        gate.evaluate(20_000.0 if i % 2 else 10.0, f"model-{i % 4}")


def both_paths(
    make_reader: Callable[[], MetricReader],
    collect: Callable[[MetricReader], Any],
    sync_counters: Callable[[Callable[[], Any]], Any],
    collections: int = 3,
) -> tuple[list[Any], list[Any]]:
    """(in-process snapshots, synchronous snapshots) of the same workload."""
    results = []
    for forced in (False, True):
        reader = make_reader()
        provider = MeterProvider(metric_readers=[reader], exemplar_filter=OFF())
        tracer_provider = TracerProvider()

        def build(provider: MeterProvider = provider) -> Instruments:
            return Instruments(provider)

        instruments = sync_counters(build) if forced else build()
        assert instruments.counters_in_process is not forced

        def run(
            provider: MeterProvider = provider, tracer: TracerProvider = tracer_provider
        ) -> None:
            workload(provider, tracer)

        snapshots = []
        for _ in range(collections):
            if forced:
                sync_counters(run)
            else:
                run()
            snapshots.append(collect(reader))
        results.append(snapshots)
        provider.shutdown()
        tracer_provider.shutdown()
    return results[0], results[1]


def test_in_memory_reader_sees_the_same_points(sync_counters: Any) -> None:
    totals, synchronous = both_paths(
        InMemoryMetricReader,
        lambda reader: normalized(reader.get_metrics_data()),
        sync_counters,
    )
    assert synchronous == totals
    names = {metric[1] for metric in totals[-1]}
    unused = {c.METRIC_OFFLOAD_SETTLED.name, c.METRIC_OFFLOAD_RECALLS.name}
    assert {spec.name for spec in c.METRICS} - unused <= names
    # cumulative: every later collection repeats the series with larger counts
    first = {(m[1], p[0]): p[1] for m in totals[0] for p in m[7]}
    last = {(m[1], p[0]): p[1] for m in totals[-1] for p in m[7]}
    assert set(first) == set(last)
    assert all(last[key] > first[key] for key in first)


def test_prometheus_scrape_is_the_same(sync_counters: Any) -> None:
    from opentelemetry.exporter.prometheus import PrometheusMetricReader

    registries: list[CollectorRegistry] = []

    def make_reader() -> MetricReader:
        registries.append(CollectorRegistry())
        return PrometheusMetricReader(registry=registries[-1])

    def scrape(reader: MetricReader) -> list[Any]:
        text = generate_latest(registries[-1]).decode()
        families = []
        for family in text_string_to_metric_families(text):
            samples = sorted(
                (
                    sample.name,
                    tuple(sorted(sample.labels.items())),
                    # bucket counts and sums of durations vary run to run
                    None
                    if family.name == c.METRIC_DECISION_DURATION.prometheus
                    and not sample.name.endswith("_count")
                    else sample.value,
                )
                for sample in family.samples
            )
            families.append((family.name, family.type, family.documentation, tuple(samples)))
        return sorted(families)

    totals, synchronous = both_paths(make_reader, scrape, sync_counters)
    assert synchronous == totals
    assert any(f[0] == "seamscope_policy_evaluations" and f[1] == "counter" for f in totals[0])


def test_periodic_push_reader_exports_the_same_points(sync_counters: Any) -> None:
    exporters: list[MemoryExporter] = []

    def make_reader() -> MetricReader:
        exporters.append(MemoryExporter())
        return PeriodicExportingMetricReader(exporters[-1], export_interval_millis=3_600_000)

    def push(reader: MetricReader) -> list[Any]:
        assert reader.force_flush()
        return normalized(exporters[-1].batches[-1])

    totals, synchronous = both_paths(make_reader, push, sync_counters)
    assert synchronous == totals
    kinds = {m[1]: (m[5], m[6]) for m in totals[0]}
    assert (True, AggregationTemporality.CUMULATIVE) == kinds[c.METRIC_POLICY_EVALUATIONS.name]


def provider_with(reader: MetricReader | None = None, **kwargs: Any) -> MeterProvider:
    return MeterProvider(metric_readers=[reader] if reader else [], **kwargs)


DELTA = AggregationTemporality.DELTA
CUMULATIVE = AggregationTemporality.CUMULATIVE


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda: provider_with(InMemoryMetricReader(), exemplar_filter=OFF()), True),
        (lambda: provider_with(exemplar_filter=OFF()), True),
        (
            lambda: provider_with(
                PeriodicExportingMetricReader(MemoryExporter(), export_interval_millis=3_600_000),
                exemplar_filter=OFF(),
            ),
            True,
        ),
        # exemplars would be recorded on synchronous counters only
        (lambda: provider_with(InMemoryMetricReader()), False),
        (
            lambda: provider_with(
                InMemoryMetricReader(), exemplar_filter=TraceBasedExemplarFilter()
            ),
            False,
        ),
        (
            lambda: provider_with(InMemoryMetricReader(), exemplar_filter=AlwaysOnExemplarFilter()),
            False,
        ),
        # a view may select one instrument type and not the other
        (
            lambda: provider_with(
                InMemoryMetricReader(), exemplar_filter=OFF(), views=[View(instrument_name="x")]
            ),
            False,
        ),
        # delta points of a synchronous counter differ from an observable one's
        (
            lambda: provider_with(
                PeriodicExportingMetricReader(
                    MemoryExporter({Counter: DELTA, ObservableCounter: DELTA}),
                    export_interval_millis=3_600_000,
                ),
                exemplar_filter=OFF(),
            ),
            False,
        ),
        # "lowmemory": counters delta, observable counters cumulative
        (
            lambda: provider_with(
                PeriodicExportingMetricReader(
                    MemoryExporter({Counter: DELTA, ObservableCounter: CUMULATIVE}),
                    export_interval_millis=3_600_000,
                ),
                exemplar_filter=OFF(),
            ),
            False,
        ),
        (lambda: metrics.NoOpMeterProvider(), False),
    ],
)
def test_totals_only_where_they_export_the_same_points(
    make: Callable[[], Any], expected: bool
) -> None:
    provider = make()
    try:
        assert expected is totals_export_like_counters(provider)
        instruments = Instruments(provider)
        assert expected is instruments.counters_in_process
        assert expected is isinstance(instruments.policy_evaluations, CounterTotals)
    finally:
        if isinstance(provider, MeterProvider):
            provider.shutdown()


def in_process() -> tuple[MeterProvider, InMemoryMetricReader, Instruments]:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader], exemplar_filter=OFF())
    instruments = Instruments(provider)
    assert instruments.counters_in_process
    return provider, reader, instruments


def values(reader: InMemoryMetricReader, name: str) -> dict[tuple[Any, ...], Any]:
    for metric in normalized(reader.get_metrics_data()):
        if metric[1] == name:
            return {attrs: value[1] for attrs, value, _ in metric[7]}
    return {}


def test_usd_sums_and_the_histogram_stay_synchronous() -> None:
    provider, _, instruments = in_process()
    usd = {spec.name for spec in c.METRICS if spec.kind == "counter" and spec.unit == "{USD}"}
    assert usd == FLOAT_SUMS
    synchronous = {
        instruments.offload_predicted_net_saving,
        instruments.offload_realized_savings,
        instruments.offload_realized_costs,
        instruments.decision_duration,
    }
    assert usd | {c.METRIC_DECISION_DURATION.name} == {i.name for i in synchronous}
    assert not any(isinstance(i, CounterTotals) for i in synchronous)
    counts = [
        instruments.policy_evaluations,
        instruments.policy_wins,
        instruments.redirects,
        instruments.stage_outcomes,
        instruments.selection_tools,
        instruments.offload_decisions,
        instruments.offload_recalls,
        instruments.offload_settled,
        instruments.model_input_tokens,
    ]
    assert all(isinstance(i, CounterTotals) for i in counts)
    provider.shutdown()


def test_increments_from_many_threads_while_readers_collect() -> None:
    provider, reader, instruments = in_process()
    threads, adds = 8, 2_000
    one = {c.ATTR_SELECTION_SET: c.SelectionSet.OFFERED.value}
    two = {c.ATTR_SELECTION_SET: c.SelectionSet.SELECTED.value}
    name = c.METRIC_SELECTION_TOOLS.name
    seen: list[dict[tuple[Any, ...], Any]] = []
    done = threading.Event()

    def add() -> None:
        for i in range(adds):
            instruments.selection_tools.add(1, one)
            instruments.selection_tools.add(2, two if i % 2 else one)

    def collect() -> None:
        while not done.is_set():
            seen.append(values(reader, name))

    collector = threading.Thread(target=collect)
    collector.start()
    workers = [threading.Thread(target=add) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    done.set()
    collector.join()
    final = values(reader, name)
    key_one, key_two = (tuple(sorted(a.items())) for a in (one, two))
    assert {key_one: threads * adds * 2, key_two: threads * adds} == final
    # monotonic cumulative: no collection ever saw a total go down
    for earlier, later in zip([{}, *seen], [*seen, final], strict=True):
        assert all(later.get(k, 0) >= v for k, v in earlier.items())
    provider.shutdown()


def test_counts_are_shared_by_every_instruments_of_one_provider() -> None:
    provider, reader, instruments = in_process()
    again = Instruments(provider)
    assert again.offload_recalls is instruments.offload_recalls
    ledger = OffloadLedger(meter_provider=provider)
    labels = {c.ATTR_GEN_AI_REQUEST_MODEL: s.HAIKU}
    instruments.offload_recalls.add(1, labels)
    again.offload_recalls.add(2, labels)
    ledger._inst.offload_recalls.add(3, labels)
    assert {tuple(labels.items()): 6} == values(reader, c.METRIC_OFFLOAD_RECALLS.name)
    provider.shutdown()


def test_invalid_amounts_are_dropped_and_zero_makes_a_series() -> None:
    provider, reader, instruments = in_process()
    counter = instruments.selection_tools
    labels = {c.ATTR_SELECTION_SET: c.SelectionSet.SELECTED.value}
    for amount in (-1, math.nan, math.inf):
        counter.add(amount, labels)
    assert {} == values(reader, c.METRIC_SELECTION_TOOLS.name)
    counter.add(0, labels)
    counter.add(0)
    assert {tuple(labels.items()): 0, (): 0} == values(reader, c.METRIC_SELECTION_TOOLS.name)
    provider.shutdown()


def test_label_cap_folds_into_other_with_totals() -> None:
    provider, reader, _ = in_process()
    workload(provider, TracerProvider())
    decided = values(reader, c.METRIC_OFFLOAD_DECISIONS.name)
    models = {dict(attrs)[c.ATTR_GEN_AI_REQUEST_MODEL] for attrs in decided}
    assert {"model-0", "model-1", c.OTHER} <= models
    assert not {"model-2", "model-3"} & models
    provider.shutdown()


def test_configure_turns_exemplars_off_when_nothing_exports_them(handles: Any) -> None:
    scraped = handles(prometheus_port=0, prometheus_registry=CollectorRegistry(), environ={})
    assert scraped.observer.instruments.counters_in_process
    plain = handles(environ={})
    assert plain.observer.instruments.counters_in_process
    asked = handles(environ={"OTEL_METRICS_EXEMPLAR_FILTER": "trace_based"})
    assert not asked.observer.instruments.counters_in_process


@pytest.mark.parametrize(
    ("env", "push", "expected"),
    [
        ({}, False, AlwaysOffExemplarFilter),
        ({}, True, None),  # OTLP push: the SDK default (trace_based) keeps exemplars
        ({"OTEL_METRICS_EXEMPLAR_FILTER": "always_off"}, True, AlwaysOffExemplarFilter),
        ({"OTEL_METRICS_EXEMPLAR_FILTER": "always_on"}, False, AlwaysOnExemplarFilter),
        ({"OTEL_METRICS_EXEMPLAR_FILTER": "trace_based"}, False, TraceBasedExemplarFilter),
        ({"OTEL_METRICS_EXEMPLAR_FILTER": "bogus"}, False, None),  # left to the SDK
    ],
)
def test_exemplar_filter_default(env: dict[str, str], push: bool, expected: Any) -> None:
    chosen = _configure._exemplar_filter(env, push)
    assert (None if chosen is None else type(chosen)) is expected


def test_spans_and_points_do_not_depend_on_the_counter_path(sync_counters: Any) -> None:
    """The decisions and the spans are the same whichever path counts."""
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    def run() -> tuple[list[Any], Sequence[Any]]:
        exporter = InMemorySpanExporter()
        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
        provider = MeterProvider(metric_readers=[InMemoryMetricReader()], exemplar_filter=OFF())
        result = s.run(tracer_provider=tracer_provider, meter_provider=provider)
        spans = [
            (span.name, s.attrs(span), s.events(span), span.status.status_code)
            for span in s.ordered(exporter.get_finished_spans())
        ]
        provider.shutdown()
        return s.decisions(result), spans

    assert sync_counters(run) == run()


def test_a_series_starts_at_its_first_collection(sync_counters: Any) -> None:
    """The one field that differs: an observable counter's series starts when a
    collection first sees it, a synchronous counter's at its first add."""
    labels = {c.ATTR_GEN_AI_REQUEST_MODEL: s.HAIKU}
    starts = []
    for forced in (False, True):
        reader = InMemoryMetricReader()
        provider = MeterProvider(metric_readers=[reader], exemplar_filter=OFF())

        def build(provider: MeterProvider = provider) -> Instruments:
            return Instruments(provider)

        instruments = sync_counters(build) if forced else build()
        before_add = time.time_ns()
        instruments.offload_recalls.add(1, labels)
        after_add = time.time_ns()
        data = reader.get_metrics_data()
        assert data is not None
        (point,) = [
            p
            for m in data.resource_metrics[0].scope_metrics[0].metrics
            if m.name == c.METRIC_OFFLOAD_RECALLS.name
            for p in m.data.data_points
        ]
        starts.append((point.start_time_unix_nano, before_add, after_add))
        provider.shutdown()
    (totals_start, _, totals_added), (sync_start, sync_before, sync_added) = starts
    assert totals_start >= totals_added
    assert sync_before <= sync_start <= sync_added
