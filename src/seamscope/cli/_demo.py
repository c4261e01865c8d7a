"""``seamscope demo``: the scripted scenario through the reference loop."""

from __future__ import annotations

import argparse
import logging
import os
import random
import signal
import threading
import time
from pathlib import Path
from typing import Any

import structlog
from opentelemetry.sdk.trace.id_generator import IdGenerator
from rich.console import Console

from seamscope.adapters import DecisionLayer, ReActAgent
from seamscope.cli._explain import Options, explain
from seamscope.cli._scenario import AGENT_NAME, DEFAULT_MODEL, build_scenario
from seamscope.cli._views import number
from seamscope.telemetry import TelemetryConfig, add_trace_context, configure

__all__ = ["add_demo_parser", "run_demo"]

DEFAULT_OUTPUT = "seamscope-trace.jsonl"


class SeededIdGenerator(IdGenerator):
    """Deterministic trace and span ids, so a seeded demo prints the same trees."""

    def __init__(self, seed: int) -> None:
        self._random = random.Random(seed)
        self._lock = threading.Lock()

    def generate_span_id(self) -> int:
        with self._lock:
            return self._random.getrandbits(64) or 1

    def generate_trace_id(self) -> int:
        with self._lock:
            return self._random.getrandbits(128) or 1


def add_demo_parser(sub: Any) -> None:
    p = sub.add_parser(
        "demo",
        help="run the scripted scenario and print its decision trace",
        description=(
            "Run a scripted, deterministic multi-turn conversation through the reference "
            "ReAct loop (no network, no server). Writes OTLP-JSON to --output and prints, "
            "per turn, the decision trace as a tree, then predicted versus realized "
            "offload economics."
        ),
    )
    p.add_argument("--turns", type=int, default=4, help="turns to run (4 per conversation)")
    p.add_argument("--seed", type=int, default=7, help="seed for ids (default 7)")
    p.add_argument(
        "--output", default=DEFAULT_OUTPUT, help=f"OTLP-JSON file to write ({DEFAULT_OUTPUT})"
    )
    p.add_argument("--otlp-endpoint", help="also send spans over OTLP/HTTP to this base URL")
    p.add_argument(
        "--otlp-metrics",
        action="store_true",
        help="with --otlp-endpoint, also push metrics over OTLP/HTTP (e.g. to a collector)",
    )
    p.add_argument(
        "--metrics-port", type=int, help="serve Prometheus metrics on 127.0.0.1:PORT while running"
    )
    p.add_argument(
        "--linger",
        type=float,
        default=0.0,
        help="seconds to keep serving metrics after the run (with --metrics-port)",
    )
    p.add_argument(
        "--pace",
        type=float,
        default=0.0,
        help="seconds to wait between turns (a live feed for dashboards; default 0)",
    )
    p.add_argument("--service-name", default="seamscope-demo", help="OTel service.name")
    p.add_argument("-q", "--quiet", action="store_true", help="print only the summary")
    p.add_argument("--svg", help="also save the printed trees as an SVG picture")


def _configure_logging(path: Path) -> Any:
    """Send structlog events to a JSON-lines file; returns the file to close.

    The previous structlog configuration is restored by :func:`run_demo`
    (``main()`` may be called from a process that has its own).
    """
    handle = path.open("w", encoding="utf-8")
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            add_trace_context,
            structlog.processors.TimeStamper(fmt="iso"),
            structlog.processors.JSONRenderer(),
        ],
        logger_factory=structlog.WriteLoggerFactory(file=handle),
        cache_logger_on_first_use=False,
    )
    logging.getLogger("seamscope").setLevel(logging.ERROR)
    return handle


def run_demo(args: argparse.Namespace, console: Console, err: Console) -> int:
    if args.turns < 1:
        err.print("[red]error:[/red] --turns must be >= 1")
        return 2
    if args.pace < 0 or args.linger < 0:
        err.print("[red]error:[/red] --pace and --linger must be >= 0")
        return 2
    if args.metrics_port is not None and not 0 <= args.metrics_port <= 65535:
        err.print("[red]error:[/red] --metrics-port must be 0..65535")
        return 2
    output = Path(args.output)
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text("", encoding="utf-8")
    except OSError as exc:
        err.print(f"[red]error:[/red] cannot write {output}: {exc.strerror}")
        return 1
    log_path = output.with_name(output.stem + ".log.jsonl")
    previous_logging = structlog.get_config()
    log_file = _configure_logging(log_path)
    try:
        return _run_configured(args, output, log_path, log_file, console, err)
    finally:
        log_file.close()
        structlog.configure(**previous_logging)


def _run_configured(
    args: argparse.Namespace,
    output: Path,
    log_path: Path,
    log_file: Any,
    console: Console,
    err: Console,
) -> int:
    registry = None
    if args.metrics_port is not None:
        from prometheus_client import CollectorRegistry

        registry = CollectorRegistry()
    try:
        handle = configure(
            service_name=args.service_name,
            otlp_endpoint=args.otlp_endpoint,
            otlp_metrics=args.otlp_metrics,
            trace_file=output,
            prometheus_port=args.metrics_port,
            prometheus_registry=registry,
            id_generator=SeededIdGenerator(args.seed),
            set_global=False,
            register_atexit=False,
            environ={k: v for k, v in os.environ.items() if not k.startswith("OTEL_EXPORTER_OTLP")},
        )
    except OSError as exc:
        err.print(f"[red]error:[/red] cannot serve metrics on port {args.metrics_port}: {exc}")
        return 1
    try:
        return _run(args, handle, output, log_path, console, err)
    finally:
        handle.shutdown()
        log_file.flush()


def _run(
    args: argparse.Namespace,
    handle: Any,
    output: Path,
    log_path: Path,
    console: Console,
    err: Console,
) -> int:
    scenario = build_scenario()
    ids = random.Random(args.seed)
    layer = DecisionLayer(
        default_model=DEFAULT_MODEL,
        policies=scenario.policies,
        role_model_resolver=scenario.role_model_resolver,
        stages=scenario.stages,
        catalog=scenario.catalog,
        agent_name=AGENT_NAME,
        provider_name="scripted",
        tracer_provider=handle.tracer_provider,
        meter_provider=handle.meter_provider,
        telemetry_config=TelemetryConfig.create(known_labels=[p.name for p in scenario.policies]),
        offload_id_factory=lambda: f"off-{ids.getrandbits(32):08x}",
    )
    agent = ReActAgent(layer, scenario.chat, scenario.tools)
    per_conversation = len(scenario.turns)
    if handle.prometheus_address:
        host, port = handle.prometheus_address
        err.print(f"serving Prometheus metrics on http://{host}:{port}/metrics")

    progress = None
    task = None
    if args.turns > 8 and not args.quiet:
        from rich.progress import Progress

        progress = Progress(console=err, transient=True)
        progress.start()
        task = progress.add_task("running turns", total=args.turns)
    history: list[Any] = []
    conversation = ""
    try:
        for index in range(args.turns):
            count, position = divmod(index, per_conversation)
            if position == 0:
                conversation = f"demo-{args.seed}" + (f"-{count + 1}" if count else "")
                history = []
            script = scenario.turns[position]
            agent.run_turn(
                conversation,
                script.user,
                messages=history,
                role=scenario.role,
                scope=scenario.scope,
            )
            if position == per_conversation - 1 or index == args.turns - 1:
                layer.end_conversation(conversation)
            if progress is not None and task is not None:
                progress.advance(task)
            if args.pace and index < args.turns - 1:
                time.sleep(args.pace)
    finally:
        if progress is not None:
            progress.stop()
    handle.flush()

    # the trees are what `seamscope explain` prints for the file just written
    def reopen() -> Any:
        return output.open(encoding="utf-8", errors="replace")

    with reopen() as spans:
        outcome = explain(str(output), spans, Options(turns=not args.quiet), console, err, reopen)
    predicted = sum(number(s["predicted_net_saving_usd"]) or 0 for s in outcome.settlements)
    realized = sum(number(s["realized_net_saving_usd"]) or 0 for s in outcome.settlements)
    console.print(
        f"{args.turns} turns · {outcome.turns_total} traces · offloads predicted "
        f"{'+' if predicted >= 0 else '−'}${abs(predicted):.4f}, realized "
        f"{'+' if realized >= 0 else '−'}${abs(realized):.4f}"
    )
    console.print(f"spans: {output}   logs: {log_path}   explain: seamscope explain {output}")
    if outcome.code != 0:
        err.print(f"[red]error:[/red] {output} did not read back whole")
        return 1
    if handle.prometheus_address and args.linger > 0:
        _linger(args.linger, err)
    return 0


def _linger(seconds: float, err: Console) -> None:
    done = threading.Event()

    def stop(signum: int, frame: Any) -> None:
        done.set()

    previous = {}
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            previous[sig] = signal.signal(sig, stop)
        except ValueError:  # not the main thread
            pass
    err.print(f"serving metrics for {seconds:g} s more (Ctrl-C to stop)")
    try:
        done.wait(seconds)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
