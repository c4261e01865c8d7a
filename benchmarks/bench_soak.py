"""Soak: many iterations over many conversations with telemetry on; memory must stay flat.

Usage::

    .venv/bin/python benchmarks/bench_soak.py                      # 1 000 000 x 100 000
    .venv/bin/python benchmarks/bench_soak.py --iterations 200000 --seconds 1800
    .venv/bin/python benchmarks/bench_soak.py --quick              # a smoke run

One iteration is one turn of one conversation through the framework-free
``DecisionLayer``: the peer benchmark's three stages over twelve tools, the
PRE seam (three policies), a ``chat`` span whose usage is reported to the
ledger, the POST seam over one emitted call, and one offload gate call
that fires (so the ledger follows a new offload in every iteration). The
conversations are taken round-robin (iteration i is conversation
``i mod --conversations``), none is ever ended: the ledger's bounds are what
keeps memory flat. The emitted tool's name cycles through ``--tool-names``
names (a model inventing tools), so the metric attribute cap folds the tail
into ``other``.

Telemetry as users run it: a ``BatchSpanProcessor`` with the real OTLP/HTTP
span exporter and a ``PeriodicExportingMetricReader`` with the real OTLP/HTTP
metric exporter, both posting to a loopback sink that discards (see
``_harness.py``); metrics are collected, encoded and posted every
``--collect-every`` iterations.

Every ``--checkpoint`` iterations it prints the resident set size (from
``/proc/self/statm``), the conversations the ledger follows, the live offloads
of the conversation just used, and the data points of the last metric
collection. Flat means: after warm-up (``--warmup``, 20 000 iterations: the
ledger is full at 10 000 conversations, and from then on every iteration
evicts one and adds one; the invented tool names have all been seen), the RSS
never exceeds its value at the end of warm-up by more than 50 MB. A warm-up
shorter than one pass over the conversations is the stricter test: anything
kept per conversation without a bound would grow through the rest of the
first pass. With ``--seconds``, the run stops at
that budget and says how far it got.

What bounds what (``seamscope.decisions._ledger.OffloadLedger``): the ledger
follows at most ``max_conversations`` (10 000) conversations; a new one past
that settles and evicts the least recently active (a settlement span with
trigger ``evicted``). Each conversation holds at most
``max_offloads_per_conversation`` (256) live offloads (the oldest is settled
first), and an offload settles when its conversation has been idle for
``idle_turns`` (50) rounds. The ledger keeps its latest 1 000 settlements.
Metric attribute values past the cap fold into ``other``.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from typing import Any

from _harness import Providers, Sink
from _scenario import AGENT, HAIKU, LC_TOOLS, PALETTE, lc_layer

from seamscope.decisions import Message, ModelUsage, ToolCall
from seamscope.loop import RECALL_TOOL

__all__ = ["main"]

FLAT_MB = 50.0
_PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_mb() -> float:
    with open("/proc/self/statm", encoding="ascii") as handle:
        return int(handle.read().split()[1]) * _PAGE / 1e6


class Soak:
    def __init__(self, sink: Sink, conversations: int, tool_names: int) -> None:
        self.providers = Providers.otlp(sink)
        self.layer = lc_layer(self.providers, [*PALETTE, "delete_rows", RECALL_TOOL])
        self.conversations = conversations
        self.tool_names = tool_names
        self.offered = (*LC_TOOLS, RECALL_TOOL)
        self.messages = [
            Message("system", "You are an analyst."),
            Message("user", "How did Q3 sales go? Pull the sales block."),
        ]
        self.usage = ModelUsage(input_tokens=1_200, output_tokens=40)

    def iteration(self, i: int) -> Any:
        conversation = f"soak-{i % self.conversations}"
        emitted = ToolCall(f"call_{i}", "run_block", {"block": "sales_q3", "limit": 5})
        invented = ToolCall(f"call_{i}b", f"tool_{i % self.tool_names}", {})
        reply = Message("assistant", "", (emitted, invented))
        with self.layer.turn(conversation, self.messages, role=AGENT) as turn:
            with turn.iteration() as it:
                it.select_tools(self.offered)
                pre = it.pre_model()
                with it.chat(pre.model.model_name) as call:
                    call.report(self.usage)
                post = it.post_model(reply)
                return it.offload(post.calls[0], 20_000.0)

    def check(self) -> None:
        gate = self.iteration(0)
        assert gate.fire and self.layer.router.default_model.model_name != HAIKU


def points(providers: Providers) -> int:
    """Data points of one metric collection (encoded and posted like every other)."""
    providers.metrics.capturing = True  # type: ignore[union-attr]
    try:
        providers.collect()
    finally:
        providers.metrics.capturing = False  # type: ignore[union-attr]
    data, providers.metrics.kept = providers.metrics.kept, None  # type: ignore[union-attr]
    if data is None:
        return 0
    return sum(
        len(metric.data.data_points)
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
    )


def configure_logging() -> None:
    # The script is the application: structlog events below WARNING are dropped.
    import logging

    import structlog

    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        logger_factory=structlog.ReturnLoggerFactory(),
        cache_logger_on_first_use=True,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--iterations", type=int, default=1_000_000)
    parser.add_argument("--conversations", type=int, default=100_000)
    parser.add_argument("--tool-names", type=int, default=5_000, help="invented tool names")
    parser.add_argument("--checkpoint", type=int, default=50_000, help="iterations per row")
    parser.add_argument("--collect-every", type=int, default=1_000, help="iterations")
    parser.add_argument("--warmup", type=int, default=20_000, help="iterations (20000)")
    parser.add_argument("--seconds", type=float, default=None, help="stop after this long")
    parser.add_argument("--quick", action="store_true", help="a smoke run (numbers meaningless)")
    args = parser.parse_args(argv)
    if args.quick:
        args.iterations, args.conversations, args.checkpoint = 1_500, 300, 500
        args.tool_names, args.collect_every, args.warmup = 200, 250, 500
    warmup = args.warmup
    configure_logging()
    sink = Sink()
    soak = Soak(sink, args.conversations, args.tool_names)
    soak.check()
    ledger = soak.layer.ledger
    print("# seamscope soak: decisions and telemetry over many conversations")
    print()
    print(
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {os.cpu_count()} CPUs; "
        f"{args.iterations} iterations over {args.conversations} conversations (round-robin, "
        f"never ended), {args.tool_names} invented tool names, metrics collected every "
        f"{args.collect_every} iterations, warm-up {warmup} iterations"
        f"{'; --quick' if args.quick else ''}"
    )
    print()
    print(
        "| iterations | seconds | µs/iteration (last rows) | CPU µs/iteration | RSS MB "
        "| ledger conversations "
        "| settlements kept | metric points | sink MB |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    start = last = time.perf_counter()
    last_cpu = time.process_time()
    at_warmup: float | None = None
    peak_after = 0.0
    done = 0
    metric_points = 0
    gc.collect()
    for i in range(1, args.iterations + 1):
        soak.iteration(i)
        done = i
        if i % args.collect_every == 0:
            if i % args.checkpoint == 0:
                metric_points = points(soak.providers)
            else:
                soak.providers.collect()
        if i % args.checkpoint == 0 or i == args.iterations:
            now, cpu = time.perf_counter(), time.process_time()
            rss = rss_mb()
            if at_warmup is None and i >= warmup:
                at_warmup = rss
            elif at_warmup is not None:
                peak_after = max(peak_after, rss)
            rows = args.checkpoint if i % args.checkpoint == 0 else i % args.checkpoint
            print(
                f"| {i} | {now - start:.0f} | {(now - last) * 1e6 / rows:.0f} | "
                f"{(cpu - last_cpu) * 1e6 / rows:.0f} | {rss:.1f} | "
                f"{len(ledger)} | {len(ledger.settlements)} | {metric_points} | "
                f"{sink.received / 1e6:.1f} |",
                flush=True,
            )
            last, last_cpu = now, cpu
            if args.seconds is not None and now - start > args.seconds:
                break
    soak.providers.flush()
    print()
    if at_warmup is None:
        print(f"- stopped after {done} iterations, before the end of warm-up: not judged")
    else:
        growth = max(0.0, peak_after - at_warmup)
        verdict = "met" if growth <= FLAT_MB else "MISSED"
        print(
            f"- RSS after warm-up: {at_warmup:.1f} MB, highest after it {peak_after:.1f} MB "
            f"(+{growth:.1f} MB; target <= {FLAT_MB:.0f} MB): {verdict}"
        )
    print(
        f"- {done} of {args.iterations} iterations in {time.perf_counter() - start:.0f} s; the "
        f"ledger follows {len(ledger)} conversations (bound 10000: the least recently active "
        "is settled and evicted past it)"
    )
    soak.providers.shutdown()
    sink.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
