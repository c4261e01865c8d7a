"""The in-process duration histogram and USD sums export the SDK's points.

configure() keeps the decision-duration histogram and the USD counters in
process when its Prometheus reader is the meter provider's only reader and
exemplars are off (``HistogramTotals``/``SumTotals`` aggregated here, merged
into each collection by ``BridgedPrometheusMetricReader``). Each comparison
records the same amounts, with the same collections in between, into that
path and into the SDK's synchronous instrument on an otherwise identical
provider, and compares what a reader gets: every field of every point (float
sums bit for bit) and the whole Prometheus exposition.
"""

from __future__ import annotations

import logging
import math
import threading
from typing import Any

import pytest
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import AlwaysOffExemplarFilter, MeterProvider
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    HistogramDataPoint,
    InMemoryMetricReader,
    MetricsData,
    ResourceMetrics,
    ScopeMetrics,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from prometheus_client import CollectorRegistry, generate_latest

from seamscope import __version__
from seamscope.telemetry import conventions as c
from seamscope.telemetry._bridge import BridgedPrometheusMetricReader, HistogramTotals, SumTotals
from seamscope.telemetry._instruments import FLOAT_SUMS, Instruments

from . import _support as s

STAGE = {c.ATTR_DECISION_KIND: "stage"}
GATE = {c.ATTR_DECISION_KIND: "offload_gate"}
# amounts whose float sum depends on where the collections split them
AMOUNTS = [0.1, 0.2, 0.3, 1e-9, 0.7, 2.5e-4, 0.05, 12.0, 0.0, 3e-6, 0.45, 0.004]


def sdk_instruments(reader: Any) -> tuple[MeterProvider, Instruments]:
    """The SDK's synchronous instruments, as Instruments builds them, on a provider
    like configure()'s (same resource, exemplars off) but not bridged."""
    provider = MeterProvider(
        resource=Resource.create({"service.name": "seamscope"}),
        metric_readers=[reader],
        exemplar_filter=AlwaysOffExemplarFilter(),
    )
    instruments = Instruments(provider)
    assert not instruments.histogram_in_process
    assert not instruments.sums_in_process
    return provider, instruments


def histogram_points(data: MetricsData | None) -> list[HistogramDataPoint]:
    assert data is not None
    (points,) = [
        list(metric.data.data_points)
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for metric in sm.metrics
        if metric.name == c.METRIC_DECISION_DURATION.name
    ]
    return sorted(points, key=lambda p: sorted(p.attributes.items()))


def fields(point: HistogramDataPoint) -> tuple[Any, ...]:
    return (
        dict(point.attributes),
        point.count,
        point.sum,
        tuple(point.bucket_counts),
        tuple(point.explicit_bounds),
        point.min,
        point.max,
        list(point.exemplars),
    )


def test_configure_keeps_the_histogram_in_process_only_for_prometheus_alone(
    handles: Any,
) -> None:
    scraped = handles(prometheus_port=0, prometheus_registry=CollectorRegistry(), environ={})
    instruments = scraped.observer.instruments
    assert instruments.histogram_in_process and instruments.sums_in_process
    assert isinstance(instruments.decision_duration, HistogramTotals)
    usd = [
        instruments.offload_predicted_net_saving,
        instruments.offload_realized_savings,
        instruments.offload_realized_costs,
    ]
    assert {i.name for i in usd} == FLOAT_SUMS
    assert all(isinstance(i, SumTotals) for i in usd)
    # exemplars asked for: a synchronous histogram carries them, so the SDK's
    sampled = handles(
        prometheus_port=0,
        prometheus_registry=CollectorRegistry(),
        environ={"OTEL_METRICS_EXEMPLAR_FILTER": "trace_based"},
    )
    assert not sampled.observer.instruments.histogram_in_process
    assert not sampled.observer.instruments.sums_in_process
    # no Prometheus reader: nothing would export the in-process points
    assert not handles(environ={}).observer.instruments.histogram_in_process
    assert not handles(environ={}).observer.instruments.sums_in_process


def test_points_are_the_sdk_points_across_collections() -> None:
    """Same amounts, same collections: every field equal, sums bit for bit."""
    memory = InMemoryMetricReader()
    provider, instruments = sdk_instruments(memory)
    synchronous = instruments.decision_duration
    totals = HistogramTotals(c.METRIC_DECISION_DURATION, c.DECISION_DURATION_BUCKETS)
    naive: dict[str, float] = {}
    for i, amount in enumerate(AMOUNTS):
        labels = STAGE if i % 3 else GATE
        synchronous.record(amount, labels)
        totals.record(amount, labels)
        naive[labels[c.ATTR_DECISION_KIND]] = naive.get(labels[c.ATTR_DECISION_KIND], 0) + amount
        if i % 4 == 3:  # a collection closes an interval of the sums
            expected = histogram_points(memory.get_metrics_data())
            metric = totals.metric(0)
            assert metric is not None
            got = sorted(metric.data.data_points, key=lambda p: sorted(p.attributes.items()))
            assert [fields(p) for p in got] == [fields(p) for p in expected]
            assert metric.data.aggregation_temporality is AggregationTemporality.CUMULATIVE
            assert (metric.unit, metric.description) == (
                c.METRIC_DECISION_DURATION.unit,
                c.METRIC_DECISION_DURATION.description,
            )
    # the comparison can fail: a running sum differs from the SDK's folded sums here
    final = {p.attributes[c.ATTR_DECISION_KIND]: p.sum for p in expected}
    assert final != naive
    assert sum(p.count for p in expected) == len(AMOUNTS)
    provider.shutdown()


GPT = {c.ATTR_GEN_AI_REQUEST_MODEL: "gpt-4o"}


@pytest.mark.parametrize(
    ("attribute", "method", "labels", "expected_line"),
    [
        (
            "decision_duration",
            "record",
            (STAGE, GATE),
            f'{c.METRIC_DECISION_DURATION.prometheus}_count{{otel_scope_name="seamscope",'
            'otel_scope_schema_url="",',
        ),
        (
            "offload_realized_savings",
            "add",
            (GPT, GPT),
            f'{c.METRIC_OFFLOAD_REALIZED_SAVINGS.prometheus}{{gen_ai_request_model="gpt-4o",'
            'otel_scope_name="seamscope",',
        ),
    ],
    ids=["histogram", "usd-sum"],
)
def test_prometheus_exposition_is_the_same(
    handles: Any,
    attribute: str,
    method: str,
    labels: tuple[dict[str, str], dict[str, str]],
    expected_line: str,
) -> None:
    """Scraped between measurements and at the end: byte for byte the SDK path's text."""
    registry = CollectorRegistry()
    handle = handles(prometheus_port=0, prometheus_registry=registry, environ={})
    mine = getattr(handle.observer.instruments, attribute)
    reference = CollectorRegistry()
    provider, instruments = sdk_instruments(PrometheusMetricReader(registry=reference))
    theirs = getattr(instruments, attribute)
    scrapes = []
    for i, amount in enumerate(AMOUNTS):
        getattr(mine, method)(amount, labels[i % 2])
        getattr(theirs, method)(amount, labels[i % 2])
        if i % 5 == 4:
            scrapes.append((generate_latest(registry), generate_latest(reference)))
    scrapes.append((generate_latest(registry), generate_latest(reference)))
    for ours, sdk in scrapes:
        assert ours == sdk
    assert expected_line in scrapes[-1][0].decode()
    provider.shutdown()


def test_the_observer_records_into_it_and_the_scrape_shows_it(handles: Any) -> None:
    registry = CollectorRegistry()
    handle = handles(prometheus_port=0, prometheus_registry=registry, environ={})
    s.run(tracer_provider=TracerProvider(), observer=handle.observer)
    text = generate_latest(registry).decode()
    counts = {
        line.split('seamscope_decision_kind="')[1].split('"')[0]: float(line.split()[-1])
        for line in text.splitlines()
        if line.startswith(f"{c.METRIC_DECISION_DURATION.prometheus}_count")
    }
    assert counts["stage"] == 6.0 * counts["select_tools"] > 0
    assert {"select_tools", "stage", "pre_model", "post_model", "dispatch"} <= set(counts)
    # the counters are still there, in the same scope
    assert "seamscope_stage_outcomes_total{" in text


def test_a_collection_with_only_the_histogram(handles: Any) -> None:
    """When the SDK itself collected nothing, the histogram alone is exported."""
    registry = CollectorRegistry()
    handle = handles(prometheus_port=0, prometheus_registry=registry, environ={})
    assert c.METRIC_DECISION_DURATION.prometheus not in generate_latest(registry).decode()
    handle.observer.instruments.decision_duration.record(0.002, GATE)
    text = generate_latest(registry).decode()
    assert (
        f'{c.METRIC_DECISION_DURATION.prometheus}_count{{otel_scope_name="seamscope",'
        f'otel_scope_schema_url="",otel_scope_version="{__version__}",'
        f'seamscope_decision_kind="offload_gate"}} 1.0'
    ) in text
    assert "target_info{" in text


def test_bad_amounts_are_dropped_with_the_sdk_warning(caplog: pytest.LogCaptureFixture) -> None:
    totals = HistogramTotals(c.METRIC_DECISION_DURATION, c.DECISION_DURATION_BUCKETS)
    with caplog.at_level(logging.WARNING, logger="seamscope.telemetry"):
        for bad in (math.nan, math.inf, -math.inf, -0.5):
            totals.record(bad, GATE)
    assert totals.metric(0) is None
    assert len(caplog.records) == 4
    totals.record(0.0, GATE)
    metric = totals.metric(0)
    assert metric is not None
    (point,) = metric.data.data_points
    assert (point.count, point.sum, point.min, point.max) == (1, 0.0, 0.0, 0.0)


def test_boundaries_are_checked() -> None:
    with pytest.raises(ValueError, match="increasing"):
        HistogramTotals(c.METRIC_DECISION_DURATION, [0.1, 0.1])
    with pytest.raises(ValueError, match="finite"):
        HistogramTotals(c.METRIC_DECISION_DURATION, [0.1, math.inf])


def test_records_from_many_threads_while_scraped() -> None:
    registry = CollectorRegistry()
    totals = HistogramTotals(c.METRIC_DECISION_DURATION, c.DECISION_DURATION_BUCKETS)
    reader = BridgedPrometheusMetricReader(
        [totals],
        scope=InstrumentationScope("seamscope", __version__),
        resource=Resource.create({}),
        registry=registry,
    )
    provider = MeterProvider(metric_readers=[reader])
    threads, records = 6, 3_000
    stop = threading.Event()

    def scrape() -> None:
        while not stop.is_set():
            generate_latest(registry)

    def work(n: int) -> None:
        labels = STAGE if n % 2 else GATE
        for i in range(records):
            totals.record(1e-4 * (i % 50), labels)

    scraper = threading.Thread(target=scrape)
    scraper.start()
    workers = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    stop.set()
    scraper.join()
    text = generate_latest(registry).decode()
    counts = [
        float(line.split()[-1])
        for line in text.splitlines()
        if line.startswith(f"{c.METRIC_DECISION_DURATION.prometheus}_count")
    ]
    assert sum(counts) == threads * records
    provider.shutdown()


def sum_points(data: MetricsData | None, name: str) -> list[Any]:
    assert data is not None
    (metric,) = [
        m
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
        if m.name == name
    ]
    points = sorted(metric.data.data_points, key=lambda p: sorted(p.attributes.items()))
    return [
        (
            dict(p.attributes),
            type(p.value).__name__,
            p.value,
            list(p.exemplars),
            metric.data.is_monotonic,
            metric.data.aggregation_temporality,
            metric.unit,
            metric.description,
        )
        for p in points
    ]


def test_usd_sums_are_the_sdk_sums_across_collections() -> None:
    memory = InMemoryMetricReader()
    provider, instruments = sdk_instruments(memory)
    synchronous = instruments.offload_realized_savings
    spec = next(s for s in c.METRICS if s.name == c.METRIC_OFFLOAD_REALIZED_SAVINGS.name)
    totals = SumTotals(spec)
    gpt = {c.ATTR_GEN_AI_REQUEST_MODEL: "gpt-4o"}
    opus = {c.ATTR_GEN_AI_REQUEST_MODEL: "claude-opus-4-6"}
    naive: dict[str, float] = {}
    compared = 0
    for i, amount in enumerate(AMOUNTS):
        labels = gpt if i % 3 else opus
        synchronous.add(amount, labels)
        totals.add(amount, labels)
        model = labels[c.ATTR_GEN_AI_REQUEST_MODEL]
        naive[model] = naive.get(model, 0) + amount
        if i % 4 == 3:
            expected = sum_points(memory.get_metrics_data(), spec.name)
            metric = totals.metric(0)
            assert metric is not None
            got = sum_points(
                MetricsData(
                    resource_metrics=[
                        ResourceMetrics(
                            Resource.create({}),
                            [ScopeMetrics(InstrumentationScope("seamscope"), [metric], "")],
                            "",
                        )
                    ]
                ),
                spec.name,
            )
            assert got == expected
            compared += 1
    assert compared == 3
    # the comparison can fail: a running sum differs from the SDK's folded totals here
    assert {p[0][c.ATTR_GEN_AI_REQUEST_MODEL]: p[2] for p in expected} != naive
    provider.shutdown()


def test_bad_usd_amounts_are_dropped_with_the_sdk_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    spec = next(s for s in c.METRICS if s.name == c.METRIC_OFFLOAD_PREDICTED_NET_SAVING.name)
    totals = SumTotals(spec)
    with caplog.at_level(logging.WARNING, logger="seamscope.telemetry"):
        for bad in (math.nan, math.inf, -0.01):
            totals.add(bad, GATE)
    assert totals.metric(0) is None
    assert len(caplog.records) == 3
