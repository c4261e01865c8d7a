"""1,000 policies x 500 tools: the decision core per iteration, alone and with telemetry.

Usage::

    .venv/bin/python benchmarks/bench_policies.py [--policies P] [--tools T]
        [--repeats R] [--iterations K]
    .venv/bin/python benchmarks/bench_policies.py --callgrind      # instructions, needs valgrind
    .venv/bin/python benchmarks/bench_policies.py --run-only noop|telemetry --iterations N

One iteration is one ``turn.iteration()`` of the framework-free
``DecisionLayer``: six selection stages over T offered tools, the PRE seam,
the POST seam over two emitted calls, one offload gate call that fires. The
winning policy is the last of P, so every policy is evaluated at the PRE
seam and for each emitted call (3P evaluations per iteration).

Two configurations, interleaved in blocks of K iterations, R blocks each,
garbage collector off:

* ``noop``: decisions alone (``NoopObserver``, no-op providers);
* ``telemetry``: the SDK's ``TracerProvider`` with a ``BatchSpanProcessor``
  (its exporter takes every batch and drops it) and a ``MeterProvider``
  with an ``InMemoryMetricReader`` that is collected after every block.

Reported: the median block per iteration, and telemetry's overhead as the
median of per-block differences, in wall time and in the process's CPU time
(all threads; on a shared host other processes inflate wall time, not CPU
time). ``--callgrind`` runs each configuration
under callgrind twice (after the same warm-up, with 0 and N timed
iterations) and divides the difference in instructions by N, which cancels
start-up; the host's load does not move it.

Nothing leaves the process. Exits 0 whatever the numbers say.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

import structlog
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from seamscope.adapters import DecisionLayer
from seamscope.decisions import (
    AllowlistStage,
    ForcedChoiceStage,
    IntentRoutingStage,
    IntentVerdict,
    LazyRoutingStage,
    Message,
    ModelConfig,
    NoopObserver,
    PolicyStage,
    PricingTable,
    RolePaletteStage,
    SafetyLevel,
    ToolCall,
    ToolCallPolicy,
    ToolCatalog,
    ToolSpec,
)

__all__ = ["PolicyLoop", "main"]

OPUS = "claude-opus-4-6"
HAIKU = "claude-haiku-4-5"
SONNET = "claude-sonnet-4-5"
AGENT = "analyst"
CONVERSATION = "bench-conv"
TARGET_MS = 1.0  # ms of decisions, and ms more of telemetry, per iteration at 1000 x 500
WARMUP = 3
PRICING = PricingTable(
    {HAIKU: {"input": 1, "output": 5}, OPUS: {"input": 5, "output": 25}},
    use_genai_prices=False,
)
MESSAGES = (
    Message("system", "You are an analyst."),
    Message("user", "show me last month's sales by brand as a chart"),
)


class DroppingExporter(SpanExporter):
    """Takes every batch and drops it (counting the spans)."""

    def __init__(self) -> None:
        self.spans = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans += len(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


def _false(ctx: Any) -> bool:
    return False


def _true(ctx: Any) -> bool:
    return True


class PolicyLoop:
    """P policies (the last wins), T tools, six stages; one turn held open."""

    def __init__(self, policies: int, tools: int, telemetry: bool) -> None:
        names = ["run_block", "fetch_data", "plot_chart", "hydrate_context"]
        names += [f"tool_{i:03d}" for i in range(max(0, tools - len(names)))]
        self.names = tuple(names)
        specs = []
        for i, name in enumerate(self.names):
            safety = SafetyLevel.DESTRUCTIVE if i >= 4 and i % 7 == 0 else SafetyLevel.READ
            keywords = (f"kw{i % 5}",) if i >= 4 and i % 3 == 0 else ()
            specs.append(ToolSpec(name, safety, trigger_keywords=keywords))
        catalog = ToolCatalog(specs)
        palette = list(self.names[: max(4, tools // 2)])
        stages = [
            ForcedChoiceStage(resolver=lambda ctx: None),
            IntentRoutingStage(
                verdict=IntentVerdict("action", ["kw0", "kw1"]),
                trigger_keywords=catalog.trigger_keywords(),
            ),
            LazyRoutingStage(),
            RolePaletteStage(resolver=lambda role: palette, role=AGENT),
            PolicyStage(catalog=catalog, max_safety_level=SafetyLevel.WRITE),
            AllowlistStage(always_include=["hydrate_context"], catalog=catalog),
        ]
        rules = [
            ToolCallPolicy(
                f"policy_{i:04d}", match=_false, model=ModelConfig(SONNET), redirect_to="plot_chart"
            )
            for i in range(policies - 1)
        ]
        rules.append(
            ToolCallPolicy(
                "sales_data_read",
                match=_true,
                model=ModelConfig(HAIKU),
                when_tool="run_block",
                redirect_to="fetch_data",
                guard=_true,
                args_transform=lambda args, ctx: {**args, "source": "warehouse"},
            )
        )
        self.exporter = DroppingExporter()
        self.reader: InMemoryMetricReader | None = None
        self.tracer_provider: TracerProvider | None = None
        extra: dict[str, Any]
        if telemetry:
            self.tracer_provider = TracerProvider()
            self.tracer_provider.add_span_processor(BatchSpanProcessor(self.exporter))
            self.reader = InMemoryMetricReader()
            extra = {
                "tracer_provider": self.tracer_provider,
                "meter_provider": MeterProvider(metric_readers=[self.reader]),
            }
        else:
            extra = {
                "observer": NoopObserver(),
                "tracer_provider": trace.NoOpTracerProvider(),
                "meter_provider": metrics.NoOpMeterProvider(),
            }
        self.layer = DecisionLayer(
            default_model=OPUS,
            policies=rules,
            stages=stages,
            catalog=catalog,
            agent_name=AGENT,
            pricing=PRICING,
            **extra,
        )
        self.messages = list(MESSAGES)
        self.reply = Message(
            "assistant",
            "",
            (
                ToolCall("call_1", "run_block", {"sql": "select brand, sum(amount) from sales"}),
                ToolCall("call_2", "plot_chart", {"kind": "bar"}),
            ),
        )
        self._cm: Any = None
        self._turn: Any = None

    def enter(self) -> None:
        self._cm = self.layer.turn(CONVERSATION, self.messages, role=AGENT)
        self._turn = self._cm.__enter__()

    def exit(self) -> None:
        self._cm.__exit__(None, None, None)
        self._cm = self._turn = None
        self.layer.end_conversation(CONVERSATION)

    def iteration(self) -> Any:
        with self._turn.iteration() as it:
            selection = it.select_tools(self.names)
            pre = it.pre_model()
            post = it.post_model(self.reply)
            gate = it.offload(post.calls[0], 20_000.0)
        return selection, pre, post, gate

    def collect(self) -> None:
        """Collect the metric reader (what a periodic reader does on its schedule)."""
        if self.reader is not None:
            self.reader.get_metrics_data()

    def check(self) -> None:
        """The decisions the benchmark relies on (the same in both configurations)."""
        self.enter()
        try:
            selection, pre, post, gate = self.iteration()
        finally:
            self.exit()
        assert pre.model.model_name == HAIKU, pre.model
        assert post.calls[0].name == "fetch_data", post.calls
        assert len(selection.offered) == len(self.names) and gate.fire


def block(loop: PolicyLoop, iterations: int) -> tuple[float, float]:
    """Wall and CPU seconds (the process's, all its threads: the batch
    processor's worker too) for ``iterations`` iterations in one open turn
    (gc off)."""
    loop.enter()
    gc.disable()
    try:
        start, cpu = time.perf_counter(), time.process_time()
        for _ in range(iterations):
            loop.iteration()
        elapsed, used = time.perf_counter() - start, time.process_time() - cpu
    finally:
        gc.enable()
        loop.exit()
    loop.collect()
    return elapsed, used


def run_only(mode: str, policies: int, tools: int, iterations: int) -> None:
    loop = PolicyLoop(policies, tools, telemetry=mode == "telemetry")
    loop.check()
    block(loop, WARMUP)
    block(loop, iterations)
    if loop.tracer_provider is not None:
        loop.tracer_provider.force_flush()
        loop.tracer_provider.shutdown()


def _instructions(mode: str, policies: int, tools: int, iterations: int) -> int:
    cmd = [
        "valgrind",
        "--tool=callgrind",
        "--callgrind-out-file=/dev/null",
        sys.executable,
        __file__,
        "--run-only",
        mode,
        "--iterations",
        str(iterations),
        "--policies",
        str(policies),
        "--tools",
        str(tools),
    ]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stderr
    found = re.search(r"Collected\s*:\s*(\d+)", out)
    if found is None:
        raise RuntimeError(f"no instruction count in callgrind's output:\n{out[-2000:]}")
    return int(found.group(1))


def callgrind(policies: int, tools: int, iterations: int) -> None:
    per: dict[str, float] = {}
    for mode in ("noop", "telemetry"):
        low = _instructions(mode, policies, tools, 0)
        high = _instructions(mode, policies, tools, iterations)
        per[mode] = (high - low) / iterations
        print(f"{mode:>9}: {per[mode] / 1e6:8.2f} M instructions per iteration")
    print(f"telemetry: +{(per['telemetry'] - per['noop']) / 1e6:.2f} M instructions per iteration")


def timed(policies: int, tools: int, repeats: int, iterations: int) -> None:
    noop = PolicyLoop(policies, tools, telemetry=False)
    tel = PolicyLoop(policies, tools, telemetry=True)
    for loop in (noop, tel):
        loop.check()
        block(loop, WARMUP)
    alone: list[tuple[float, float]] = []
    overhead: list[tuple[float, float]] = []
    for _ in range(repeats):
        a = [t / iterations for t in block(noop, iterations)]
        b = [t / iterations for t in block(tel, iterations)]
        alone.append((a[0], a[1]))
        overhead.append((b[0] - a[0], b[1] - a[1]))
    assert tel.tracer_provider is not None
    tel.tracer_provider.force_flush()
    spans = tel.exporter.spans
    print(f"{policies} policies x {tools} tools, {repeats} blocks of {iterations} iterations")
    print("                      wall ms   CPU ms per iteration (median block)")
    for label, values in (("decisions alone", alone), ("telemetry on top", overhead)):
        wall = statistics.median(v[0] for v in values) * 1e3
        cpu = statistics.median(v[1] for v in values) * 1e3
        print(f"{label:<20} {wall:8.3f} {cpu:8.3f}   (target <= {TARGET_MS} ms)")
    per = spans / (1 + WARMUP + repeats * iterations)
    print(f"spans exported        {spans} ({per:.1f} per iteration)")
    tel.tracer_provider.shutdown()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policies", type=int, default=1000)
    parser.add_argument("--tools", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--iterations", type=int, default=50)
    parser.add_argument("--run-only", choices=("noop", "telemetry"))
    parser.add_argument("--callgrind", action="store_true")
    args = parser.parse_args(argv)
    # the script is the application: structlog events below WARNING are dropped
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        logger_factory=structlog.ReturnLoggerFactory(),
    )
    if args.run_only:
        run_only(args.run_only, args.policies, args.tools, args.iterations)
    elif args.callgrind:
        callgrind(args.policies, args.tools, max(1, args.iterations // 5))
    else:
        timed(args.policies, args.tools, args.repeats, args.iterations)
    return 0


if __name__ == "__main__":
    sys.exit(main())
