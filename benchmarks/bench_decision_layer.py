"""Per-iteration cost of the decision layer, with and without telemetry.

Usage::

    .venv/bin/python benchmarks/bench_decision_layer.py [--iterations N] [--repeats R]

One iteration is what a ReAct loop asks the decision layer for on every
turn of the model: the six-stage selection pipeline, the PRE seam over three
policies, the POST seam over two emitted tool calls and one offload-gate
call. With telemetry that is 13 spans (iteration, select_tools, six stages,
pre_model, post_model, two dispatches, offload_gate), their seven policy
events, 33 metric measurements (20 counts, one USD sum, 12 durations in the
histogram) and the decision log events.

The configurations are measured in the same run, interleaved, each over
several repeats (the median repeat is reported; a ratio is the median of the
per-repeat ratios, with the lowest and highest; the blocks of (b)/(a), (c)/(d)
and (d)/(d0) run back to back in each repeat):

(a) bare: the core with the default ``NoopObserver``;
(b) the telemetry observer on the no-op OpenTelemetry API
    (``trace.NoOpTracerProvider`` / ``metrics.NoOpMeterProvider``);
(c) the telemetry observer on the SDK providers exactly as
    ``seamscope.telemetry.configure()`` builds them for an application
    scraped by Prometheus (``prometheus_port=0``, a private registry): a
    ``MeterProvider`` with a ``PrometheusMetricReader`` and configure()'s
    exemplar filter (``always_off`` when no OTLP metrics push is configured:
    nothing would export an exemplar), so the counts are in-process totals
    and the duration histogram and USD sums are aggregated in process and
    exported by configure()'s Prometheus reader;
    spans go through a ``BatchSpanProcessor`` with a null exporter (passed
    as ``extra_span_processors``);
(c') for reference, the observer on an SDK ``MeterProvider`` built with the
    SDK's defaults (in-memory reader, ``trace_based`` exemplars, hence
    synchronous counters with exemplars), spans as in (c);
(d) the floor: the cheapest way to get what (c) produces. Each iteration
    makes the same decisions as (a), then creates the same spans, with the
    same attributes and events and the same nesting, directly with the SDK
    tracer (same processor and exporter): attributes passed whole at span
    start from a prepared plan, no metrics, no logs, no per-hook work;
(d0) the spans of (d) alone, without the decisions, for reference: (d)/(d0)
    is what any implementation, even one whose telemetry cost nothing beyond
    the raw spans, would score against the spans alone.

Counting instructions instead of time (no noise from the host): run one
configuration untimed under callgrind, with 0 and with N iterations, and
take the difference over N::

    valgrind --tool=callgrind --callgrind-out-file=/dev/null \
        .venv/bin/python benchmarks/bench_decision_layer.py --run-only c --iterations 1000

Targets: (c)/(d) <= 1.3 and (b)/(a) <= 1.5. Benchmarks are not tests: the
script prints a table and exits 0 whatever the ratios (``--strict`` makes a
missed target exit 1).

The script is the application here, so it configures structlog (the library
never does): events below WARNING are dropped. The scenario emits no warning,
so logging costs the level check of one INFO event (the gate fires).

Why the floor includes the decisions: every configuration measures the
decision layer, and (c) makes the decisions (the spans carry their reasons),
so nothing that produces (c)'s output can cost less than the decisions plus
the spans. Against the spans alone (d0), the decisions by themselves already
put a zero-overhead implementation at (d)/(d0) (about 1.4 here), above 1.3.

Measuring the decisions and the spans in one iteration matters: the
sum of (a) and (d0), each timed in its own tight loop, is smaller than one
loop doing both (each loop alone keeps its own code and data hot), so
(c)/((a)+(d0)) overstates the overhead; the script prints it, and
(c)/(d0) and (d)/(d0), the ratios to the spans alone, for reference.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import structlog
from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

from seamscope.decisions import (
    AllowlistStage,
    ForcedChoiceStage,
    GateCall,
    IntentRoutingStage,
    IntentVerdict,
    LazyRoutingStage,
    Message,
    ModelConfig,
    NoopObserver,
    OffloadGate,
    PolicyStage,
    PricingTable,
    RolePaletteStage,
    SafetyLevel,
    Seam,
    SeamRouter,
    SelectionContext,
    SelectionPipeline,
    ToolCall,
    ToolCallPolicy,
    ToolCatalog,
    ToolSpec,
    build_dispatch_context,
)
from seamscope.telemetry import OTelObserver, TelemetryConfig, TelemetryHandle, configure

TARGET_SDK_OVER_FLOOR = 1.3
TARGET_NOOP_OVER_BARE = 1.5

CONVERSATION = "bench-conv"
AGENT = "bench-agent"
DEFAULT_MODEL = "claude-opus-4-6"
HAIKU = "claude-haiku-4-5"
PRICING = PricingTable(
    {HAIKU: {"input": 1, "output": 5}, DEFAULT_MODEL: {"input": 5, "output": 25}},
    use_genai_prices=False,
)
TOOLS = (
    "run_block",
    "fetch_data",
    "search_docs",
    "delete_rows",
    "deploy",
    "hydrate_context",
    "summarize",
    "plot_chart",
)
CATALOG = ToolCatalog(
    [
        ToolSpec("run_block", SafetyLevel.WRITE, trigger_keywords=("sql",)),
        ToolSpec("fetch_data", SafetyLevel.READ, trigger_keywords=("sales",)),
        ToolSpec("search_docs", SafetyLevel.READ, trigger_keywords=("docs",)),
        ToolSpec("delete_rows", SafetyLevel.DESTRUCTIVE, trigger_keywords=("delete",)),
        ToolSpec("deploy", SafetyLevel.WRITE, trigger_keywords=("deploy",)),
        ToolSpec("hydrate_context", SafetyLevel.READ),
        ToolSpec("summarize", SafetyLevel.READ),
        ToolSpec("plot_chart", SafetyLevel.READ, trigger_keywords=("chart",)),
    ]
)
MESSAGES = (
    Message("system", "You are an analyst."),
    Message("user", "show me last month's sales by brand as a chart"),
)
EMITTED = (
    ToolCall("call_1", "run_block", {"sql": "select brand, sum(amount) from sales"}),
    ToolCall("call_2", "plot_chart", {"kind": "bar"}),
)
ASSISTANT = Message("assistant", "", EMITTED)
GATE_OUTPUT_TOKENS = 20_000.0


def _true(ctx: Any) -> bool:
    return True


def _false(ctx: Any) -> bool:
    return False


def policies() -> list[ToolCallPolicy]:
    """PRE: skipped, not_matched, matched. POST: run_block redirected, plot_chart untouched."""
    return [
        ToolCallPolicy(
            name="run_block_to_fetch",
            match=_true,
            when_tool="run_block",
            redirect_to="fetch_data",
            args_transform=lambda args, ctx: {**args, "source": "warehouse"},
        ),
        ToolCallPolicy(
            name="docs_lookup",
            match=_false,
            redirect_to="search_docs",
            model=ModelConfig("claude-sonnet-4-5"),
        ),
        ToolCallPolicy(name="sales_data_read", match=_true, model=ModelConfig(HAIKU)),
    ]


def stages() -> list[Any]:
    return [
        ForcedChoiceStage(resolver=lambda ctx: None),
        IntentRoutingStage(
            verdict=IntentVerdict("action", ["run_block", "fetch_data", "plot_chart"]),
            trigger_keywords=CATALOG.trigger_keywords(),
        ),
        LazyRoutingStage(),
        RolePaletteStage(
            resolver=lambda role: [
                "run_block",
                "fetch_data",
                "plot_chart",
                "delete_rows",
                "summarize",
            ],
            role="analyst",
        ),
        PolicyStage(catalog=CATALOG, max_safety_level=SafetyLevel.WRITE),
        AllowlistStage(always_include=["hydrate_context"], catalog=CATALOG),
    ]


class NullSpanExporter(SpanExporter):
    """Accepts every batch and does nothing with it."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


@dataclass
class Layer:
    """The decision components of one configuration and its per-iteration callable."""

    name: str
    observer: Any
    pipeline: SelectionPipeline = field(init=False)
    router: SeamRouter = field(init=False)
    gate: OffloadGate = field(init=False)

    def __post_init__(self) -> None:
        self.pipeline = SelectionPipeline(stages(), catalog=CATALOG, observer=self.observer)
        self.router = SeamRouter(policies(), default_model=DEFAULT_MODEL, observer=self.observer)
        self.gate = OffloadGate(pricing=PRICING, observer=self.observer, id_factory=lambda: "off")

    def decide(self, index: int) -> Any:
        ctx = SelectionContext(
            messages=MESSAGES,
            iteration=index,
            role="analyst",
            conversation_id=CONVERSATION,
            agent_name=AGENT,
        )
        selection = self.pipeline.run(TOOLS, ctx)
        common: dict[str, Any] = {
            "resolved_tool_names": selection.selected,
            "forced_tool_choice": selection.forced_tool,
            "iteration": index,
            "role": "analyst",
            "conversation_id": CONVERSATION,
            "agent_name": AGENT,
        }
        pre = self.router.pre_model(build_dispatch_context(Seam.PRE_MODEL, MESSAGES, **common))
        post_ctx = build_dispatch_context(
            Seam.POST_MODEL, MESSAGES, emitted_message=ASSISTANT, **common
        )
        post = self.router.post_model(post_ctx, EMITTED)
        gate = self.gate.evaluate(
            GATE_OUTPUT_TOKENS,
            pre.model.model_name,
            GateCall(CONVERSATION, AGENT, post.calls[0].name, post.calls[0].id),
        )
        return selection, pre, post, gate

    def iteration(self, index: int) -> Any:
        observer = self.observer
        if isinstance(observer, OTelObserver):
            with observer.iteration(index, conversation_id=CONVERSATION, agent_name=AGENT):
                return self.decide(index)
        return self.decide(index)


# -- the floor: the same spans straight from the SDK ----------------------------


@dataclass
class SpanNode:
    name: str
    attributes: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]]
    children: list[SpanNode] = field(default_factory=list)


def capture_plan() -> tuple[SpanNode, int]:
    """Run one telemetry iteration into memory; return its span tree and span count."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    layer = Layer(
        "plan",
        OTelObserver(
            tracer_provider=provider,
            meter_provider=metrics.NoOpMeterProvider(),
            config=TelemetryConfig.create(),
        ),
    )
    layer.iteration(0)
    spans = sorted(exporter.get_finished_spans(), key=lambda s: s.start_time or 0)
    nodes = {
        s.context.span_id: SpanNode(
            s.name,
            dict(s.attributes or {}),
            [(e.name, dict(e.attributes or {})) for e in s.events],
        )
        for s in spans
    }
    roots = []
    for s in spans:
        parent = s.parent.span_id if s.parent is not None else None
        if parent in nodes:
            nodes[parent].children.append(nodes[s.context.span_id])
        else:
            roots.append(nodes[s.context.span_id])
    provider.shutdown()
    if len(roots) != 1:
        raise RuntimeError(f"expected one root span, got {len(roots)}")
    return roots[0], len(spans)


def floor_iteration(tracer: trace.Tracer, root: SpanNode) -> Callable[[int], None]:
    attach = otel_context.attach
    detach = otel_context.detach
    in_context = trace.set_span_in_context

    def emit(node: SpanNode) -> None:
        span = tracer.start_span(node.name, attributes=node.attributes)
        token = attach(in_context(span))
        for name, attrs in node.events:
            span.add_event(name, attrs)
        for child in node.children:
            emit(child)
        detach(token)
        span.end()

    def run(index: int) -> None:
        emit(root)

    return run


def decisions_then_spans(
    decide: Callable[[int], Any], spans: Callable[[int], None]
) -> Callable[[int], None]:
    """The floor: the decisions, then their spans straight from the SDK."""

    def run(index: int) -> None:
        decide(index)
        spans(index)

    return run


# -- timing -------------------------------------------------------------------------


@dataclass
class Config:
    key: str
    label: str
    run: Callable[[int], Any]
    flush: Callable[[], Any] = lambda: None
    samples: list[float] = field(default_factory=list)

    @property
    def median_us(self) -> float:
        return statistics.median(self.samples) * 1e6

    @property
    def min_us(self) -> float:
        return min(self.samples) * 1e6


def paired(num: Config, den: Config) -> tuple[float, float, float]:
    """Median, lowest and highest of the per-repeat ratios num/den.

    Within a repeat the configurations run one after another (the targets'
    pairs back to back), so a slow drift of the machine hits both sides of a
    ratio alike.
    """
    ratios = [n / d for n, d in zip(num.samples, den.samples, strict=True)]
    return statistics.median(ratios), min(ratios), max(ratios)


def spread(ratio: tuple[float, float, float]) -> str:
    return f"{ratio[0]:.2f} [{ratio[1]:.2f}-{ratio[2]:.2f}]"


def time_block(run: Callable[[int], Any], iterations: int) -> float:
    """Seconds per iteration over one block, with the garbage collector off."""
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        start = time.perf_counter()
        for i in range(iterations):
            run(i)
        elapsed = time.perf_counter() - start
    finally:
        if gc_was_enabled:
            gc.enable()
    return elapsed / iterations


def build_configs() -> tuple[list[Config], int, list[Any], TelemetryHandle]:
    closers: list[Any] = []

    bare = Layer("bare", NoopObserver())

    noop = Layer(
        "noop-api",
        OTelObserver(
            tracer_provider=trace.NoOpTracerProvider(),
            meter_provider=metrics.NoOpMeterProvider(),
            config=TelemetryConfig.create(),
        ),
    )

    # (c): the providers exactly as configure() builds them for an application
    # scraped by Prometheus, spans batched to a null exporter.
    handle = configure(
        prometheus_port=0,
        prometheus_registry=CollectorRegistry(),
        extra_span_processors=(BatchSpanProcessor(NullSpanExporter()),),
        config=TelemetryConfig.create(),
        set_global=False,
        register_atexit=False,
        environ={},
    )
    sdk = Layer("sdk", handle.observer)
    closers.append(handle)

    # (c'): an SDK MeterProvider built with the SDK's defaults (trace_based
    # exemplars, hence synchronous counters), read in memory.
    default_tracer_provider = TracerProvider()
    default_tracer_provider.add_span_processor(BatchSpanProcessor(NullSpanExporter()))
    default_meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    sdk_defaults = Layer(
        "sdk-defaults",
        OTelObserver(
            tracer_provider=default_tracer_provider,
            meter_provider=default_meter_provider,
            config=TelemetryConfig.create(),
        ),
    )
    closers += [default_tracer_provider, default_meter_provider]

    plan, span_count = capture_plan()
    floor_provider = TracerProvider()
    floor_provider.add_span_processor(BatchSpanProcessor(NullSpanExporter()))
    closers.append(floor_provider)
    floor = floor_iteration(floor_provider.get_tracer("bench-floor"), plan)

    # timed in this order, so each ratio's blocks are adjacent: (b)/(a), (c)/(d), (d)/(d0)
    configs = [
        Config("a", "(a) bare: NoopObserver", bare.iteration),
        Config("b", "(b) OTelObserver on the no-op API", noop.iteration),
        Config(
            "c",
            "(c) OTelObserver on the SDK as configure() builds it (batch, null exporter)",
            sdk.iteration,
            handle.tracer_provider.force_flush,
        ),
        Config(
            "d",
            "(d) floor: the decisions of (a), then the same spans direct on the SDK",
            decisions_then_spans(bare.iteration, floor),
            floor_provider.force_flush,
        ),
        Config(
            "d0",
            "(d0) the spans of (d) alone, no decisions (reference)",
            floor,
            floor_provider.force_flush,
        ),
        Config(
            "c'",
            "(c') OTelObserver, SDK MeterProvider with SDK defaults (trace_based exemplars)",
            sdk_defaults.iteration,
            default_tracer_provider.force_flush,
        ),
    ]
    return configs, span_count, closers, handle


def describe_metrics(handle: TelemetryHandle) -> str:
    """How configure() built the meter provider of (c) (SDK internals read for display only)."""
    provider = handle.meter_provider
    readers = ", ".join(type(r).__name__ for r in getattr(provider, "_metric_readers", ()))
    exemplars = getattr(getattr(provider, "_sdk_config", None), "exemplar_filter", None)
    counts = (
        "in-process totals (observable counters)"
        if handle.observer.instruments.counters_in_process
        else "synchronous counters"
    )
    histogram = (
        "in process (exported by the reader)"
        if handle.observer.instruments.histogram_in_process
        and handle.observer.instruments.sums_in_process
        else "synchronous"
    )
    return (
        f"MeterProvider as configure(prometheus_port=0) builds it: {readers or 'no reader'}, "
        f"exemplar filter {type(exemplars).__name__}; counts as {counts}, "
        f"duration histogram and USD sums {histogram}"
    )


def configure_logging() -> None:
    # The application's choice, never the library's: drop events below WARNING.
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        logger_factory=structlog.ReturnLoggerFactory(),
        cache_logger_on_first_use=True,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=1000, help="iterations per block")
    parser.add_argument("--repeats", type=int, default=15, help="timed blocks per configuration")
    parser.add_argument("--warmup", type=int, default=300, help="untimed iterations first")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument(
        "--run-only",
        metavar="KEY",
        choices=("a", "b", "c", "c'", "d", "d0"),
        help="only run --iterations iterations of one configuration, untimed, and exit "
        "(for an instruction counter such as valgrind --tool=callgrind)",
    )
    args = parser.parse_args(argv)

    configure_logging()
    configs, span_count, closers, handle = build_configs()
    if args.run_only:
        (config,) = [cfg for cfg in configs if cfg.key == args.run_only]
        gc.disable()
        for i in range(args.iterations):
            config.run(i)
        for closer in closers:
            closer.shutdown()
        return 0
    for config in configs:
        for i in range(args.warmup):
            config.run(i)
        config.flush()
    for _ in range(args.repeats):
        for config in configs:  # interleaved, so drift hits every configuration alike
            config.samples.append(time_block(config.run, args.iterations))
            config.flush()

    by_key = {config.key: config for config in configs}
    bare_us, sdk_us, floor_us, spans_us = (by_key[k].median_us for k in ("a", "c", "d", "d0"))
    noop = paired(by_key["b"], by_key["a"])
    sdk = paired(by_key["c"], by_key["d"])
    defaults = paired(by_key["c'"], by_key["d"])
    spans = paired(by_key["c"], by_key["d0"])
    bound = paired(by_key["d"], by_key["d0"])
    noop_ratio, sdk_ratio = noop[0], sdk[0]
    rows = [
        (by_key["a"], "1.00 (base of b)", "", ""),
        (
            by_key["b"],
            f"{spread(noop)} × (a)",
            f"<= {TARGET_NOOP_OVER_BARE}",
            "pass" if noop_ratio <= TARGET_NOOP_OVER_BARE else "FAIL",
        ),
        (
            by_key["c"],
            f"{spread(sdk)} × (d)",
            f"<= {TARGET_SDK_OVER_FLOOR}",
            "pass" if sdk_ratio <= TARGET_SDK_OVER_FLOOR else "FAIL",
        ),
        (by_key["c'"], f"{spread(defaults)} × (d)", "(reference)", ""),
        (by_key["d"], "1.00 (base of c)", "", ""),
        (
            by_key["d0"],
            f"(d) = {spread(bound)} × (d0); (c) = {spread(spans)} × (d0)",
            "(reference)",
            "",
        ),
    ]

    print("## seamscope decision layer: cost per iteration")
    print()
    print(
        f"machine: {platform.platform()}, Python {platform.python_version()} "
        f"({platform.python_implementation()}), {os.cpu_count()} CPUs, "
        f"{platform.processor() or platform.machine()}"
    )
    print(
        f"one iteration: 6 stages + PRE seam (3 policies) + POST seam (2 calls) + 1 gate call "
        f"= {span_count} spans; {args.iterations} iterations × {args.repeats} repeats "
        f"(median repeat; min in brackets), gc off while timing; ratios: median of the "
        f"per-repeat ratios [lowest-highest]; (b)/(a), (c)/(d), (d)/(d0) from adjacent blocks"
    )
    print(f"(c) metrics: {describe_metrics(handle)}")
    print()
    print("| configuration | µs/iteration | ratio | target | result |")
    print("|---|---:|---|---|---|")
    for config, ratio, target, result in rows:
        print(
            f"| {config.label} | {config.median_us:.1f} [{config.min_us:.1f}] | {ratio} | "
            f"{target} | {result} |"
        )
    print()
    print(
        f"(c) - (d) = {sdk_us - floor_us:.1f} µs per iteration: what telemetry adds to the "
        f"decisions and their raw spans"
    )
    print(
        f"(d)/(d0) = {bound[0]:.2f}: against the spans alone, the decisions by themselves put "
        f"an implementation whose telemetry costs nothing beyond its raw spans at this ratio; "
        f"(c)/(d0) = {spans[0]:.2f}"
    )
    print(
        f"(c)/((a)+(d0)) = {sdk_us / (bare_us + spans_us):.2f} (to the sum of two separate loops: "
        f"(a)+(d0) = {bare_us + spans_us:.1f} µs, (d) = {floor_us:.1f} µs in one loop)"
    )

    for closer in closers:
        closer.shutdown()
    missed = noop_ratio > TARGET_NOOP_OVER_BARE or sdk_ratio > TARGET_SDK_OVER_FLOOR
    return 1 if (args.strict and missed) else 0


if __name__ == "__main__":
    sys.exit(main())
