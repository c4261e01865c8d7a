"""seamscope next to its peers, on the same scripted agent loops, as users run them, in one run.

Usage::

    .venv/bin/pip install -e '.[dev,bench]'      # the peers are in the bench extra
    .venv/bin/python benchmarks/bench_peers.py [--quick] [--repeats N] [--invokes K]
        [--parts lc,sym,core,oa,pai] [--callgrind] [--json PATH]
    .venv/bin/python benchmarks/bench_peers.py --run-only KEY[,KEY...] [--iterations N]

Export as users run it. Every configuration that records telemetry gets
providers of its own, built alike for seamscope and every peer: a
``BatchSpanProcessor`` with the real ``OTLPSpanExporter`` (protobuf over
HTTP) and a ``PeriodicExportingMetricReader`` with the real
``OTLPMetricExporter``, both posting to a loopback HTTP sink in a thread of
this process that reads each request and discards it. Metrics are collected,
encoded and posted every 10 invokes (every 100 iterations in part 3), a
schedule counted in invokes so an instruction count does not depend on
speed. symfonic's own layer builds its own ``TracerProvider``: it is given
the same exporter. The Agents SDK's own tracing (not OpenTelemetry) runs
its own ``BatchTraceProcessor`` and ``BackendSpanExporter`` (JSON over HTTP),
pointed at the sink. The peers keep their defaults (they record content).

The loops (``_scenario.py``): one user turn, two model calls and one tool
call, twelve tools offered, an 8 000-character (2 000-token) tool output.
Under seamscope three stages narrow the tools, the sales policy wins the PRE
seam (the cheaper model) and redirects ``run_block`` to ``fetch_data``
through a guard, the offload gate prices the output (and fires), and every
invoke ends its conversation (which settles the offload).

Part 1, LangChain v1 ``create_agent`` with a scripted ``BaseChatModel``:
(a) none; (a') a pass-through middleware (what LangChain charges for any
middleware); (b) ``SeamscopeMiddleware``; (c) OpenInference's
``LangChainInstrumentor``; (d) OpenLLMetry's ``LangchainInstrumentor``;
(e) (b) + (c). Instrumentors are switched on for a block and off after it
(OpenLLMetry's ``uninstrument()`` leaves wrappers in place: the script puts
the originals back and checks it). Part 2, symfonic-core's
``SymfonicAgent.run``: off, symfonic's own OTel layer, seamscope's
``instrument_symfonic``, both; and a (gate) scenario whose history holds a
100 000-character output that symfonic's offload gate prices. Part 3, the
decision core through ``DecisionLayer``: one iteration (six stages over T
tools, PRE seam, POST seam over two calls, one gate call) for P policies, the
winner last (3P evaluations). Part 4, the OpenAI Agents SDK's ``Runner.run``
driving the SDK's own ``OpenAIResponsesModel`` on an ``AsyncOpenAI`` client
over an in-process ``httpx.MockTransport`` that answers from a script (so
the SDK opens its response span as in real use): (a) none, (a') none with only
the tools seamscope selects (what its narrowing saves), (a'') a pass-through
adapter of seamscope's shape (the agent holding every tool and the recall
tool, pass-through hooks and filters, each call sent the tools seamscope
selects: what the SDK charges for that shape), (b) the SDK's
own tracing, (c) OpenInference's ``OpenAIAgentsInstrumentor``, (d)
``SeamscopeRunner``, (e) (c) + (d), (f) OpenLLMetry's
``OpenAIAgentsInstrumentor`` (opentelemetry-instrumentation-openai-agents).
Part 5, pydantic-ai's ``Agent.run`` with ``FunctionModel`` s: (a) none,
(a') a pass-through capability with seamscope's hooks (what pydantic-ai
charges for them), (b) its own ``Instrumentation`` capability, (c) OpenInference's span
processor on (b), (d) ``SeamscopeCapability``, (e) (d) beside (b).

Wall time: each configuration in blocks of K invokes with the garbage
collector off, the configurations of a part interleaved, R blocks each; an
overhead is the median of the per-block differences to (a), a ratio the
median of the per-block ratios. Instructions (``--callgrind``, valgrind
installed): each part's configurations run once more under
``valgrind --tool=callgrind --dump-before=getsid`` in one process per part;
the script marks a window of N invokes per configuration (after three
warm-up invokes and a flush; ending with a flush, so the window holds the
encoding of its own spans and N/10 metric collections) and reads the
instructions of each window alone: start-up excluded, no host noise. The
targets are judged on instruction ratios when they were counted.

The nine decision facts are checked by value on the spans of one invoke
(``_facts.py``): the exact tools offered and selected, which stage dropped
which tools with a reason naming them, the winning policy and model, the
passed-over policy, the redirect's emitted, target and final tools, the
guard's and palette's verdicts, and the gate's four priced terms against the
seed's formula at the model's rates.

Targets: seamscope's overhead <= 0.8x OpenInference's on LangChain and on
the Agents SDK; <= 0.8x pydantic-ai's own ``Instrumentation``; <= 0.5x
symfonic's own layer; at 1000 policies x 500 tools <= 1 ms of decisions and
<= 1 ms more of telemetry per iteration. The script prints them and exits 0
whatever they say.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import structlog
from _facts import FACTS, facts_of
from _harness import (
    Case,
    Sink,
    mark,
    measure,
    metric_counts,
    overhead,
    overhead_ratio,
    ratio,
    read_window,
    span_bytes,
)
from _scenario import MARKER

try:
    import importlib.util

    for _module in (
        "langchain.agents",
        "openinference.instrumentation.langchain",
        "opentelemetry.instrumentation.langchain",
        "symfonic.agent",
        "agents",
        "openinference.instrumentation.openai_agents",
        "opentelemetry.instrumentation.openai_agents",
        "pydantic_ai",
        "openinference.instrumentation.pydantic_ai",
    ):
        if importlib.util.find_spec(_module) is None:
            raise ImportError(f"No module named {_module!r}")
except ImportError as exc:  # pragma: no cover - depends on the environment
    print(
        f"bench_peers needs the bench extra ({exc}): .venv/bin/pip install -e '.[dev,bench]'",
        file=sys.stderr,
    )
    sys.exit(3)

PARTS = ("lc", "sym", "core", "oa", "pai")
TARGET_PEER = 0.8  # seamscope overhead / OpenInference's (LangChain, Agents SDK) / pydantic-ai's
TARGET_SYM = 0.5  # seamscope overhead / symfonic's own layer's
TARGET_CORE_US = 1000.0  # µs of decisions, and µs more of telemetry, at 1000 x 500
WARMUP_RUN_ONLY = 3
GRID_POLICIES = (1, 10, 100, 1000)
GRID_TOOLS = (10, 100, 500)
CALLGRIND_CORE = "core-1000x500"

# (part, label, numerator key, denominator key, target or None)
COMPARISONS: tuple[tuple[str, str, str, str, float | None], ...] = (
    ("lc", "LangChain: seamscope (b) / OpenInference (c)", "lc-b", "lc-c", TARGET_PEER),
    ("lc", "LangChain: seamscope (b) / OpenLLMetry (d)", "lc-b", "lc-d", None),
    ("lc", "LangChain: seamscope + OpenInference (e) / OpenInference (c)", "lc-e", "lc-c", None),
    ("sym", "symfonic: seamscope / its own layer", "sym-seamscope", "sym-own", TARGET_SYM),
    (
        "sym",
        "symfonic (gate): seamscope / its own layer",
        "sym-gate-seamscope",
        "sym-gate-own",
        TARGET_SYM,
    ),
    ("oa", "Agents SDK: seamscope (d) / OpenInference (c)", "oa-d", "oa-c", TARGET_PEER),
    ("oa", "Agents SDK: seamscope (d) / OpenLLMetry (f)", "oa-d", "oa-f", None),
    ("oa", "Agents SDK: seamscope (d) / the SDK's own tracing (b)", "oa-d", "oa-b-own", None),
    ("oa", "Agents SDK: seamscope + OpenInference (e) / OpenInference (c)", "oa-e", "oa-c", None),
    ("pai", "pydantic-ai: seamscope (d) / its Instrumentation (b)", "pai-d", "pai-b", TARGET_PEER),
    ("pai", "pydantic-ai: seamscope (d) / OpenInference (c)", "pai-d", "pai-c", None),
)
BASES = {"lc": "lc-a", "sym": "sym-off", "sym-gate": "sym-gate-off", "oa": "oa-a", "pai": "pai-a"}


def base_key(key: str) -> str:
    if key.startswith("sym-gate-"):
        return BASES["sym-gate"]
    return BASES[key.split("-")[0]]


# -- what one invoke records ---------------------------------------------------------------


@dataclass
class Recorded:
    spans: int = 0
    traces: int = 0
    attributes: int = 0
    events: int = 0
    dropped: int = 0  # attributes and events the SDK dropped past its limits
    otlp_bytes: int = 0  # the spans' OTLP protobuf (the SDK's own JSON payload for oa-b-own)
    metric_points: int = 0  # data points in one metric collection
    metric_bytes: int = 0
    content: bool = False
    facts: dict[str, bool | None] = field(default_factory=dict)

    @property
    def fact_count(self) -> int:
        return sum(bool(v) for v in self.facts.values())


def _strings(span: Any) -> list[str]:
    values = list((span.attributes or {}).values())
    for event in span.events:
        values.extend((event.attributes or {}).values())
    return [v for v in values if isinstance(v, str)]


def record(case: Case, spans: list[Any], batches: list[Any]) -> Recorded:
    if case.kind == "own" and hasattr(case, "capture_own"):
        items = [item.export() for item in case.capture_own()]
        payload = json.dumps({"data": [i for i in items if i]}, default=str)
        spans_of = [i for i in items if i and i.get("object") == "trace.span"]
        traces = [i for i in items if i and i.get("object") == "trace"]
        return Recorded(
            spans=len(spans_of),
            traces=len(traces),
            otlp_bytes=len(payload),
            content=MARKER in payload,
            facts=dict.fromkeys(FACTS, False),
        )
    if not case.kind and spans:
        raise RuntimeError(f"{case.key} is uninstrumented but recorded spans")
    points, size = metric_counts(batches) if case.kind else (0, 0)
    return Recorded(
        spans=len(spans),
        traces=len({s.context.trace_id for s in spans if s.context is not None}),
        attributes=sum(len(s.attributes or {}) for s in spans),
        events=sum(len(s.events) for s in spans),
        dropped=sum(s.dropped_attributes + s.dropped_events for s in spans),
        otlp_bytes=span_bytes(spans),
        metric_points=points,
        metric_bytes=size,
        content=any(MARKER in v for s in spans for v in _strings(s)),
        facts=facts_of(spans, case.expected),
    )


# -- the cases of each part ----------------------------------------------------------------


def build(part: str, sink: Sink, loop: asyncio.AbstractEventLoop, quick: bool) -> list[Case]:
    if part == "lc":
        from _lc import langchain_cases

        return langchain_cases(sink)
    if part == "sym":
        from _lc import symfonic_cases

        cases, closers = symfonic_cases(sink, loop)
        CLOSERS.extend(closers)
        return cases
    if part == "oa":
        from _frameworks import openai_agents_cases

        return openai_agents_cases(sink, loop)
    if part == "pai":
        from _frameworks import pydantic_ai_cases

        return pydantic_ai_cases(sink, loop)
    raise ValueError(part)


CLOSERS: list[Callable[[], Any]] = []


# -- output --------------------------------------------------------------------------------


def mark_fact(value: bool | None) -> str:
    return "n/a" if value is None else ("yes" if value else "–")


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def spread(value: tuple[float, float, float], digits: int = 2) -> str:
    return f"{value[0]:.{digits}f} [{value[1]:.{digits}f}–{value[2]:.{digits}f}]"


def print_part(title: str, cases: list[Case], out: dict[str, Any], name: str) -> None:
    by_key = {case.key: case for case in cases}
    print(f"## {title}")
    print()
    print(
        "| configuration | key | ms/invoke | overhead ms | CPU overhead ms | × base | spans "
        "| traces | span attributes | events | OTLP bytes | metric points | metric bytes "
        "| content | facts (of 9) |"
    )
    print("|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---:|")
    rows = []
    for case in cases:
        base = by_key[base_key(case.key)]
        rec = case.recorded
        extra = overhead(case, base) if case is not base else 0.0
        extra_cpu = overhead(case, base, cpu=True) if case is not base else 0.0
        times = spread(ratio(case, base)) if case is not base else "1.00"
        own = case.kind == "own" and hasattr(case, "capture_own")
        counts = (
            f"n/a | n/a | {rec.otlp_bytes} (JSON) | n/a | n/a"
            if own
            else f"{rec.attributes} | {rec.events} | {rec.otlp_bytes} | {rec.metric_points} | "
            f"{rec.metric_bytes}"
        )
        print(
            f"| {case.label} | `{case.key}` | {case.median * 1e3:.2f} | {extra * 1e3:+.2f} | "
            f"{extra_cpu * 1e3:+.2f} | {times} | {rec.spans} | {rec.traces} | {counts} | "
            f"{'yes' if rec.content else '–'} | {rec.fact_count} |"
        )
        rows.append(
            {
                "key": case.key,
                "label": case.label,
                "kind": case.kind,
                "median_ms": case.median * 1e3,
                "overhead_ms": extra * 1e3,
                "overhead_cpu_ms": extra_cpu * 1e3,
                "samples_ms": [s * 1e3 for s in case.samples],
                "cpu_samples_ms": [s * 1e3 for s in case.cpu],
                **asdict(rec),
            }
        )
    print()
    print("Decision facts, checked by value on the spans of one invoke:")
    print()
    print("| configuration | providers | " + " | ".join(FACTS) + " |")
    print("|---|---|" + "---|" * len(FACTS))
    for case in cases:
        cells = " | ".join(mark_fact(case.recorded.facts.get(f)) for f in FACTS)
        print(f"| {case.label} | {case.kind or '–'} | {cells} |")
    print()
    out[name] = rows


def print_core(grid: list[tuple[int, int, list[Case]]], out: dict[str, Any]) -> None:
    print(
        "## Part 3: the decision core, one iteration (6 stages, PRE seam, POST seam x 2 calls, "
        "1 gate call), µs"
    )
    print()
    print(
        "| policies | tools | decisions µs | + telemetry µs | telemetry µs | spans "
        "| events (dropped by the SDK) | metric points |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    rows = []
    for policies, tools, (noop, full) in grid:
        extra = overhead(full, noop) * 1e6
        rec = full.recorded
        print(
            f"| {policies} | {tools} | {noop.median * 1e6:.1f} | {full.median * 1e6:.1f} | "
            f"{extra:+.1f} | {rec.spans} | {rec.events} ({rec.dropped}) | {rec.metric_points} |"
        )
        rows.append(
            {
                "policies": policies,
                "tools": tools,
                "decisions_us": noop.median * 1e6,
                "total_us": full.median * 1e6,
                "telemetry_us": extra,
                "spans": rec.spans,
                "events": rec.events,
                "dropped": rec.dropped,
            }
        )
    print()
    out["core"] = rows


def print_instructions(counts: dict[str, float], out: dict[str, Any]) -> None:
    """Instructions per invoke from callgrind windows, and the overheads over each base."""
    print("## Instructions per invoke (callgrind windows, millions)")
    print()
    print("| key | M instructions / invoke | overhead M over its base |")
    print("|---|---:|---:|")
    for key, value in counts.items():
        base = counts.get(base_key(key)) if not key.startswith("core-") else None
        extra = f"{(value - base) / 1e6:+.2f}" if base is not None and key != base_key(key) else ""
        print(f"| `{key}` | {value / 1e6:.2f} | {extra} |")
    print()
    out["instructions"] = counts


def judge(
    cases: dict[str, Case],
    counts: dict[str, float],
    grid: list[tuple[int, int, list[Case]]],
    out: dict[str, Any],
) -> list[str]:
    """The ratios (instructions beside wall time, in one run) and the targets."""
    lines = []
    for part, label, num, den, target in COMPARISONS:
        if num not in cases or den not in cases:
            continue
        base = cases[base_key(num)]
        wall = overhead_ratio(cases[num], cases[den], base)
        cpu = overhead_ratio(cases[num], cases[den], base, cpu=True)
        instr = None
        if {num, den, base.key} <= set(counts):
            instr = (counts[num] - counts[base.key]) / (counts[den] - counts[base.key])
        decided = instr if instr is not None else wall[0]
        text = (
            f"{label} = {instr:.2f} by instructions, " if instr is not None else f"{label} = "
        ) + (
            f"{spread(wall)} by wall time ({overhead(cases[num], base) * 1e3:.2f} ms / "
            f"{overhead(cases[den], base) * 1e3:.2f} ms), {cpu[0]:.2f} by CPU time"
        )
        entry: dict[str, Any] = {
            "part": part,
            "name": label,
            "num": num,
            "den": den,
            "instructions": instr,
            "wall": wall[0],
            "cpu": cpu[0],
        }
        if target is not None and instr is None and overhead(cases[den], base) <= 0:
            text += f"; target <= {target}: not judged (the denominator's overhead is not > 0)"
            entry.update(target=target, met=None)
        elif target is not None:
            ok = decided <= target
            text += f"; target <= {target}: {verdict(ok)}"
            entry.update(target=target, met=ok)
        lines.append(text)
        out.setdefault("ratios", []).append(entry)
    for policies, tools, (noop, full) in grid:
        if (policies, tools) != (1000, 500):
            continue
        decisions, telemetry = noop.median * 1e6, overhead(full, noop) * 1e6
        for name, value in (("decisions", decisions), ("telemetry", telemetry)):
            ok = value <= TARGET_CORE_US
            lines.append(
                f"core 1000 policies x 500 tools: {name} {value:.0f} µs per iteration "
                f"(target <= {TARGET_CORE_US:.0f} µs): {verdict(ok)}"
            )
            out.setdefault("ratios", []).append(
                {
                    "part": "core",
                    "name": name,
                    "value_us": value,
                    "target": TARGET_CORE_US,
                    "met": ok,
                }
            )
    return lines


# -- instruction counts -------------------------------------------------------------------


def run_only(keys: Sequence[str], iterations: int) -> int:
    """Run configurations untimed: per key, WARMUP_RUN_ONLY invokes, a flush, a mark, then
    ``iterations`` invokes (metric collections on schedule), a flush, a mark.

    The garbage collector is off throughout (as in the timed blocks): when it runs
    depends on how threads interleave, which would make counts of one command differ.
    """
    gc_off()
    sink = Sink()
    loop = asyncio.new_event_loop()
    cases: dict[str, Case] = {}
    for part in dict.fromkeys(k.split("-")[0] for k in keys):
        if part == "core":
            for key in keys:
                if key.startswith("core-"):
                    policies, tools = (int(n) for n in key.split("-")[1].split("x"))
                    from _frameworks import core_cases

                    cases.update((c.key, c) for c in core_cases(sink, policies, tools))
        elif part in PARTS:
            cases.update((c.key, c) for c in build(part, sink, loop, quick=False))
    unknown = [key for key in keys if key not in cases]
    if unknown:
        print(f"unknown configuration {unknown[0]!r}", file=sys.stderr)
        return 2
    for key in keys:
        case = cases[key]
        case.enter()
        try:
            for i in range(WARMUP_RUN_ONLY):
                case.run(i)
            case.flush()
            case.count = 0
            mark()
            for i in range(iterations):
                case.invoke(i)
            case.flush()
            mark()
        finally:
            case.exit()
    mark()  # one more dump: the last window's is then written before exit
    return 0


def gc_off() -> None:
    import gc

    gc.disable()


def callgrind(keys: Sequence[str], iterations: int) -> dict[str, float]:
    """Instructions per invoke of each key, from one valgrind process for all of them."""
    if not keys or shutil.which("valgrind") is None:
        return {}
    with tempfile.TemporaryDirectory() as tmp:
        out_file = str(Path(tmp) / "callgrind.out")
        subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                "--dump-before=getsid",
                f"--callgrind-out-file={out_file}",
                sys.executable,
                str(Path(__file__).resolve()),
                "--run-only",
                ",".join(keys),
                "--iterations",
                str(iterations),
            ],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "PYTHONHASHSEED": "0"},
        )
        # dumps: .1 start-up, then per key a window (even) and the set-up between (odd)
        return {key: read_window(out_file, 2 * (n + 1)) / iterations for n, key in enumerate(keys)}


# -- main ------------------------------------------------------------------------------


def configure_logging() -> None:
    # The script is the application: structlog events below WARNING are dropped.
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        logger_factory=structlog.ReturnLoggerFactory(),
        cache_logger_on_first_use=True,
    )
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", category=UserWarning, module="symfonic")
    logging.getLogger("opentelemetry").setLevel(logging.ERROR)


def calibrate(cases: Sequence[Case], seconds: float) -> int:
    """Iterations per block so the slowest case's block takes about ``seconds``."""
    slowest = 0.0
    for case in cases:
        case.enter()
        try:
            case.run(0)
            start = time.perf_counter()
            case.run(1)
            slowest = max(slowest, time.perf_counter() - start)
        finally:
            case.exit()
    return max(2, int(seconds / max(slowest, 1e-6)))


def versions() -> dict[str, str]:
    from importlib import metadata

    found = {}
    for name in (
        "seamscope",
        "langchain",
        "langgraph",
        "openinference-instrumentation-langchain",
        "opentelemetry-instrumentation-langchain",
        "symfonic-core",
        "openai-agents",
        "openai",
        "openinference-instrumentation-openai-agents",
        "opentelemetry-instrumentation-openai-agents",
        "pydantic-ai-slim",
        "openinference-instrumentation-pydantic-ai",
        "opentelemetry-sdk",
        "opentelemetry-exporter-otlp-proto-http",
    ):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "?"
    return found


TITLES = {
    "lc": "Part 1: LangChain v1 create_agent, one invoke (2 model calls, 1 tool call, 12 tools)",
    "sym": "Part 2: symfonic-core SymfonicAgent.run, one run (2 model calls, 1 tool call)",
    "oa": "Part 4: OpenAI Agents SDK Runner.run with OpenAIResponsesModel over a mock "
    "transport, one run (2 model calls, 1 tool call, 12 tools)",
    "pai": "Part 5: pydantic-ai Agent.run, one run (2 model calls, 1 tool call, 12 tools)",
}
NAMES = {"lc": "langchain", "sym": "symfonic", "oa": "openai_agents", "pai": "pydantic_ai"}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes (a smoke run)")
    parser.add_argument("--repeats", type=int, default=None, help="timed blocks per configuration")
    parser.add_argument("--invokes", type=int, default=None, help="invokes per timed block")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    parser.add_argument(
        "--callgrind",
        action="store_true",
        help="also count instructions per invoke under valgrind (one process per part)",
    )
    parser.add_argument(
        "--run-only",
        metavar="KEYS",
        help="only run these configurations (comma-separated), untimed and silent, marking "
        "a callgrind window around each",
    )
    parser.add_argument(
        "--iterations", type=int, default=20, help="invokes per window (a multiple of 10)"
    )
    parser.add_argument(
        "--parts",
        default=",".join(PARTS),
        help=f"the parts to run, comma-separated (default: all of {','.join(PARTS)})",
    )
    args = parser.parse_args(argv)
    parts = [part.strip() for part in args.parts.split(",") if part.strip()]
    if not parts or not set(parts) <= set(PARTS):
        parser.error(f"--parts: choose among {','.join(PARTS)}")
    configure_logging()
    if args.run_only:
        # silent whatever a library prints (the output must not perturb a count)
        with open(os.devnull, "w") as devnull, contextlib.redirect_stdout(devnull):
            return run_only([k for k in args.run_only.split(",") if k], args.iterations)

    quick = args.quick
    repeats = args.repeats or (2 if quick else 15)
    invokes = args.invokes or (3 if quick else 20)
    warmup = 2 if quick else 10
    out: dict[str, Any] = {
        "machine": {
            "platform": platform.platform(),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
        },
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "repeats": repeats,
        "invokes_per_block": invokes,
        "versions": versions(),
        "load_average_start": os.getloadavg()[0],
    }
    started = time.perf_counter()
    print("# seamscope and its peers: per-invoke cost with real OTLP export, one run")
    print()
    print("versions: " + ", ".join(f"{n} {v}" for n, v in out["versions"].items()))
    print()
    print(
        f"{out['date']}; {platform.platform()}, Python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs; {repeats} interleaved blocks of {invokes} invokes per "
        f"configuration (median block; brackets: lowest–highest per-block ratio); gc off while "
        f"timing; 1-minute load average at the start {out['load_average_start']:.2f}"
        f"{'; --quick: numbers are not meaningful' if quick else ''}"
    )
    print()
    sink = Sink()
    loop = asyncio.new_event_loop()
    cases: dict[str, Case] = {}
    counts: dict[str, float] = {}
    grid: list[tuple[int, int, list[Case]]] = []
    for part in parts:
        if part == "core":
            from _frameworks import core_cases

            for policies in GRID_POLICIES:
                for tools in GRID_TOOLS:
                    pair = core_cases(sink, policies, tools)
                    count = calibrate(pair, 0.01 if quick else 0.15)
                    core_repeats = 1 if quick else max(3, repeats // 3)
                    measure(pair, core_repeats, count, min(count, 5), record)
                    grid.append((policies, tools, pair))
            print_core(grid, out)
            if args.callgrind:
                counts.update(callgrind([f"{CALLGRIND_CORE}-noop", CALLGRIND_CORE], 100))
            continue
        part_cases = build(part, sink, loop, quick)
        measure(part_cases, repeats, invokes, warmup, record)
        print_part(TITLES[part], part_cases, out, NAMES[part])
        cases.update((case.key, case) for case in part_cases)
        if args.callgrind:
            counts.update(callgrind([case.key for case in part_cases], args.iterations))
    for close in CLOSERS:
        close()
    if counts:
        print_instructions(counts, out)
    print("## Targets (ratios from this run)")
    print()
    for line in judge(cases, counts, grid, out):
        print(f"- {line}")
    print()
    elapsed = time.perf_counter() - started
    out["load_average_end"] = os.getloadavg()[0]
    out["seconds"] = elapsed
    out["sink_bytes"] = sink.received
    print(
        f"total time {elapsed:.0f} s; the sink received {sink.received / 1e6:.1f} MB; "
        f"1-minute load average at the end {out['load_average_end']:.2f}"
    )
    sink.close()
    loop.close()
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(out, handle, indent=2, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
