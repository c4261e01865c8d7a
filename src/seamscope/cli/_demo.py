"""``seamscope demo``: the scripted scenarios, through the reference loop and LangChain.

The turns of a run and their conversations are planned in ``_plan``: the
reference loop's conversation (``_scenario``), then, when the ``langchain``
extra is installed, the LangChain one (``_langchain_scenario``); without it
the summary says in one line how to add those turns.

Every flag is checked before anything is written: flags that do nothing
alone are refused, the OTLP endpoint is parsed (``host:4318`` and
``.../v1/traces`` are accepted) and probed, and the metrics port is tried,
so a refused run leaves no empty output files behind. The trees are printed
by ``explain`` reading the OTLP-JSON back, so the demo shows exactly what
``seamscope explain`` will show for its file.

Files written: ``--output`` (default ``seamscope-trace.jsonl``) and, beside
it, the structlog events as ``<stem>.log.jsonl`` and the priors its last
step calibrates as ``<stem>.priors.toml`` (see ``_learn``). With ``--output -`` the
OTLP-JSON goes to standard output once the run is done, the trees and the
summary go to standard error, and no log file is written.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import random
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from seamscope.cli._explain import Options, Outcome, explain
from seamscope.cli._render import LEGEND
from seamscope.explain import number

if TYPE_CHECKING:
    from seamscope.cli._export import CountingExporter, Endpoint

__all__ = ["DEFAULT_OUTPUT", "add_demo_parser", "log_path_for", "run_demo"]

DEFAULT_OUTPUT = "seamscope-trace.jsonl"
_PROGRESS_EVERY_S = 10.0  # at least one progress line this often when stderr is not a terminal


def _seeded_ids(seed: int) -> Any:
    """Deterministic trace and span ids, so a seeded demo prints the same trees.

    (Built here so that ``explain`` does not import the SDK to register
    the demo's arguments.)
    """
    from opentelemetry.sdk.trace.id_generator import IdGenerator

    class SeededIdGenerator(IdGenerator):
        def __init__(self) -> None:
            self._random = random.Random(seed)
            self._lock = threading.Lock()

        def generate_span_id(self) -> int:
            with self._lock:
                return self._random.getrandbits(64) or 1

        def generate_trace_id(self) -> int:
            with self._lock:
                return self._random.getrandbits(128) or 1

    return SeededIdGenerator()


def log_path_for(output: Path) -> Path:
    """Where the demo writes its structlog events for an ``--output`` file."""
    return output.with_name(output.stem + ".log.jsonl")


def add_demo_parser(sub: Any) -> None:
    p = sub.add_parser(
        "demo",
        help="run the scripted scenarios and print their decision trace",
        description=(
            "Run scripted, deterministic conversations (no network, no server): one through "
            "the reference ReAct loop and, with the langchain extra, one through LangChain's "
            "create_agent with its tool selector and context editing watched by seamscope. "
            "Writes OTLP-JSON to --output and prints, per turn, the decision trace as a tree, "
            "then predicted versus realized economics of each offload and compaction."
        ),
        epilog=(
            "exit codes: 0 success; 1 cannot write the output or the SVG, the metrics port is "
            "taken, or the output did not read back; 2 usage error (bad arguments, flags that "
            "do nothing alone, an endpoint that is not a URL, --svg naming a folder); "
            "130 interrupted (Ctrl-C: the spans of the turns finished so far are in --output)"
        ),
    )
    p.add_argument(
        "--turns",
        type=int,
        metavar="N",
        help="turns to run (default 7: a 4-turn reference-loop conversation, then a 3-turn "
        "LangChain one; 4 without the langchain extra; more turns start new conversations)",
    )
    p.add_argument("--seed", type=int, default=7, metavar="S", help="seed for ids (default 7)")
    p.add_argument(
        "--output",
        default=DEFAULT_OUTPUT,
        metavar="FILE",
        help=f"OTLP-JSON file to write afresh, its structlog lines beside it in FILE.log.jsonl "
        f"(default {DEFAULT_OUTPUT}); - for standard output (no log file)",
    )
    p.add_argument(
        "--otlp-endpoint",
        metavar="URL",
        help="also send spans over OTLP/HTTP: host:4318, http://host:4318 or .../v1/traces "
        "(default: none, nothing leaves the machine)",
    )
    p.add_argument(
        "--otlp-metrics",
        action="store_true",
        help="with --otlp-endpoint, also push metrics over OTLP/HTTP (e.g. to a collector; "
        "default off)",
    )
    p.add_argument(
        "--metrics-port",
        type=int,
        metavar="PORT",
        help="serve Prometheus metrics on 127.0.0.1:PORT while running, 0 for any free port "
        "(default: none)",
    )
    p.add_argument(
        "--linger",
        type=float,
        metavar="SECONDS",
        help="with --metrics-port, keep serving metrics this long after the run (default 0)",
    )
    p.add_argument(
        "--pace",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="seconds to wait between turns (a live feed for dashboards; default 0)",
    )
    p.add_argument(
        "--service-name",
        default="seamscope-demo",
        metavar="NAME",
        help="OTel service.name (default seamscope-demo)",
    )
    p.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="print only the summary (default off; an --svg picture still holds the trees)",
    )
    p.add_argument(
        "--svg", metavar="FILE", help="also save the trees as an SVG picture (default: none)"
    )


def _check(args: argparse.Namespace) -> str | None:
    """Why the flags cannot run, or None."""
    if args.turns is not None and args.turns < 1:
        return "--turns must be >= 1"
    if args.pace < 0 or (args.linger is not None and args.linger < 0):
        return "--pace and --linger must be >= 0"
    if args.metrics_port is not None and not 0 <= args.metrics_port <= 65535:
        return "--metrics-port must be 0..65535"
    if args.linger is not None and args.metrics_port is None:
        return "--linger keeps the metrics endpoint up: it needs --metrics-port"
    if args.otlp_metrics and not args.otlp_endpoint:
        return "--otlp-metrics pushes metrics to the OTLP endpoint: it needs --otlp-endpoint"
    return None


def _port_taken(port: int) -> str | None:
    """Why 127.0.0.1:port cannot be served (tried before any file is written)."""
    if port == 0:
        return None
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError as exc:
            return (exc.strerror or str(exc)).lower()
    return None


def _configure_logging(handle: Any) -> None:
    """Send structlog events to ``handle`` as JSON lines.

    The previous structlog configuration is restored by :func:`run_demo`
    (``main()`` may be called from a process that has its own).
    """
    import structlog

    from seamscope.telemetry import add_trace_context

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


class _Otlp:
    """The run's OTLP export: what was sent, and the one line that says so."""

    def __init__(self, endpoint: Endpoint, metrics: bool, err: Console, quiet: bool) -> None:
        from seamscope.cli._export import QuietSdk, probe

        self.endpoint = endpoint
        self.metrics = metrics
        self.unreachable = probe(endpoint)
        self.exporter: CountingExporter | None = None
        self.sdk = QuietSdk()
        self._err = err
        self._quiet = quiet
        if self.unreachable and not quiet:
            err.print(
                f"warning: OTLP endpoint {endpoint.base} is unreachable ({self.unreachable}); "
                "running without it",
                markup=False,
            )

    def processors(self) -> tuple[Any, ...]:
        if self.unreachable:
            return ()
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        from seamscope.cli._export import EXPORT_TIMEOUT_S, CountingExporter

        inner = OTLPSpanExporter(
            endpoint=self.endpoint.traces, headers={}, timeout=EXPORT_TIMEOUT_S
        )
        self.exporter = CountingExporter(inner, self._failed)
        return (BatchSpanProcessor(self.exporter),)

    def environ(self) -> dict[str, str]:
        """What configure() reads to push metrics (and only metrics) to the endpoint."""
        if self.unreachable or not self.metrics:
            return {}
        return {"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": self.endpoint.metrics}

    def _failed(self) -> None:
        from seamscope.cli._export import reason

        if not self._quiet:
            self._err.print(
                f"warning: OTLP export to {self.endpoint.traces} failed "
                f"({reason(self.sdk.messages, 'spans')}); not sending more",
                markup=False,
            )

    def summary(self, spans_at: str) -> str:
        from seamscope.cli._export import reason

        if self.unreachable:
            return (
                f"otlp: nothing sent, {self.endpoint.base} is unreachable ({self.unreachable}); "
                f"the spans are in {spans_at}"
            )
        exporter = self.exporter
        assert exporter is not None
        line = f"otlp: {exporter.sent} spans sent to {self.endpoint.traces}"
        if exporter.failed:
            line += f", {exporter.dropped} not sent ({reason(self.sdk.messages, 'spans')})"
        if self.metrics:
            failed = self.sdk.failed("metrics")
            line += (
                f"; metrics push failed ({failed})"
                if failed
                else f"; metrics pushed to {self.endpoint.metrics}"
            )
        return line


@contextlib.contextmanager
def _timeout_env(seconds: float) -> Iterator[None]:
    """The SDK's metric exporter reads its timeout from the environment when built."""
    name = "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT"
    if name in os.environ or "OTEL_EXPORTER_OTLP_TIMEOUT" in os.environ:
        yield
        return
    os.environ[name] = f"{seconds:g}"
    try:
        yield
    finally:
        os.environ.pop(name, None)


def run_demo(
    args: argparse.Namespace, console: Console, err: Console, trees: Console | None = None
) -> int:
    """Run the demo; with ``--quiet``, ``trees`` (a recording console, for
    ``--svg``) receives the trees and the summary that ``console`` does not show."""
    import structlog

    from seamscope.cli._export import parse_endpoint

    problem = _check(args)
    endpoint = None
    if problem is None and args.otlp_endpoint:
        try:
            endpoint = parse_endpoint(args.otlp_endpoint)
        except ValueError as exc:
            problem = f"--otlp-endpoint {exc}"
    if problem is not None:
        err.print(f"error: {problem}", markup=False)
        return 2
    if args.metrics_port is not None and (taken := _port_taken(args.metrics_port)):
        err.print(f"error: cannot serve metrics on port {args.metrics_port}: {taken}", markup=False)
        return 1

    to_stdout = args.output == "-"
    if to_stdout:
        fd, name = tempfile.mkstemp(prefix="seamscope-demo-", suffix=".jsonl")
        os.close(fd)
        output, log_path = Path(name), None
    else:
        output = Path(args.output)
        log_path = log_path_for(output)
    created = [p for p in (output, log_path) if p is not None and not p.exists()]
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text("", encoding="utf-8")
        log_file = open(log_path or os.devnull, "w", encoding="utf-8")  # noqa: SIM115
    except OSError as exc:
        err.print(f"error: cannot write {output}: {exc.strerror or exc}", markup=False)
        return 1
    previous_logging = structlog.get_config()
    was_configured = structlog.is_configured()
    seamscope_logger = logging.getLogger("seamscope")
    previous_level = seamscope_logger.level
    _configure_logging(log_file)
    seamscope_logger.setLevel(logging.ERROR)
    otlp = _Otlp(endpoint, args.otlp_metrics, err, args.quiet) if endpoint else None
    try:
        with otlp.sdk if otlp else contextlib.nullcontext():
            code = _configured(args, output, log_path, otlp, console, err, created, trees)
        if code == 0 and to_stdout:
            with output.open(encoding="utf-8") as spans:
                shutil.copyfileobj(spans, sys.stdout)
            sys.stdout.flush()
        return code
    finally:
        log_file.close()
        structlog.configure(**previous_logging)
        if not was_configured:  # the library's silent default again
            structlog.reset_defaults()
        seamscope_logger.setLevel(previous_level)
        if to_stdout:
            output.unlink(missing_ok=True)


def _configured(
    args: argparse.Namespace,
    output: Path,
    log_path: Path | None,
    otlp: _Otlp | None,
    console: Console,
    err: Console,
    created: list[Path],
    trees: Console | None = None,
) -> int:
    from seamscope.cli._export import EXPORT_TIMEOUT_S
    from seamscope.telemetry import configure

    registry = None
    if args.metrics_port is not None:
        from prometheus_client import CollectorRegistry

        registry = CollectorRegistry()
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_EXPORTER_OTLP")}
    try:
        with _timeout_env(EXPORT_TIMEOUT_S):
            handle = configure(
                service_name=args.service_name,
                otlp_metrics=bool(otlp and otlp.environ()),
                trace_file=output,
                prometheus_port=args.metrics_port,
                prometheus_registry=registry,
                id_generator=_seeded_ids(args.seed),
                extra_span_processors=otlp.processors() if otlp else (),
                set_global=False,
                register_atexit=False,
                environ={**environ, **(otlp.environ() if otlp else {})},
            )
    except OSError as exc:
        err.print(
            f"error: cannot serve metrics on port {args.metrics_port}: {exc.strerror or exc}",
            markup=False,
        )
        for path in created:
            path.unlink(missing_ok=True)
        return 1
    try:
        return _run(args, handle, output, log_path, otlp, console, err, trees)
    finally:
        handle.shutdown()


class _Progress:
    """Turns done, on stderr: a live bar on a terminal, a line now and then elsewhere."""

    def __init__(self, err: Console, total: int, enabled: bool) -> None:
        self._err = err
        self._total = total
        self._bar: Any = None
        self._task: Any = None
        self._enabled = enabled
        self._last = time.monotonic()
        self._step = 0
        if enabled and err.is_terminal:
            from rich.progress import Progress

            self._bar = Progress(console=err, transient=True)
            self._bar.start()
            self._task = self._bar.add_task("running turns", total=total)

    def advance(self, done: int) -> None:
        if not self._enabled:
            return
        if self._bar is not None:
            self._bar.advance(self._task)
            return
        step = done * 10 // self._total
        now = time.monotonic()
        if done < self._total and (step > self._step or now - self._last >= _PROGRESS_EVERY_S):
            self._err.print(f"demo: {done}/{self._total} turns", markup=False)
            self._step, self._last = step, now

    def stop(self) -> None:
        if self._bar is not None:
            self._bar.stop()


def _run(
    args: argparse.Namespace,
    handle: Any,
    output: Path,
    log_path: Path | None,
    otlp: _Otlp | None,
    console: Console,
    err: Console,
    trees: Console | None = None,
) -> int:
    from seamscope.cli._plan import langchain_part, plan, reference_part
    from seamscope.cli._scenario import POLICIES
    from seamscope.telemetry import TelemetryConfig

    config = TelemetryConfig.create(known_labels=[p.name for p in POLICIES])
    parts = [reference_part(handle, config, args.seed)]
    langchain = langchain_part(handle, config)
    skipped = langchain if isinstance(langchain, str) else None
    if not isinstance(langchain, str):
        parts.append(langchain)
    turns = args.turns if args.turns is not None else sum(p.turns for p in parts)
    metrics_url = None
    if handle.prometheus_address:
        host, port = handle.prometheus_address
        metrics_url = f"http://{host}:{port}/metrics"
        if not args.quiet:
            err.print(f"serving Prometheus metrics on {metrics_url}", markup=False)

    if not args.quiet:
        console.print(_writes(output, log_path), markup=False, highlight=False, soft_wrap=True)
    long_run = turns > 8 or (args.pace > 0 and turns > 1)
    progress = _Progress(err, turns, long_run and not args.quiet)
    try:
        for index, turn in enumerate(plan(parts, turns, args.seed)):
            turn.part.run(turn.conversation, turn.position)
            if turn.last:
                turn.part.end(turn.conversation)
            progress.advance(index + 1)
            if args.pace and index < turns - 1:
                time.sleep(args.pace)
    finally:
        progress.stop()
    handle.flush()

    # --quiet shows only the summary; with --svg the picture still holds the trees
    shown_on = trees if args.quiet and trees is not None else console
    full = shown_on is not console or not args.quiet
    shown = Options(turns=full, settlements=full)

    def reopen() -> Any:
        return output.open(encoding="utf-8", errors="replace")

    if full:
        for line in STAGED:
            shown_on.print(line, markup=False, highlight=False, soft_wrap=True)
        shown_on.print(LEGEND, style="dim", markup=False, highlight=False)
    with reopen() as spans:
        outcome = explain(str(output), spans, shown, shown_on, err, reopen)
    spans_at = "standard output" if log_path is None else str(output)
    if not args.quiet and outcome.code == 0:  # then the summary, last
        from seamscope.cli._learn import print_learn_steps, priors_path_for

        priors = None if log_path is None else priors_path_for(output)
        print_learn_steps(console, output, spans_at if log_path else "FILE", priors)
    for line in _summary(turns, outcome, spans_at, log_path, metrics_url, otlp, skipped):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
        if shown_on is not console:
            shown_on.print(line, markup=False, highlight=False, soft_wrap=True)
    if outcome.code != 0:
        err.print(f"error: {output} did not read back whole", markup=False)
        return 1
    if metrics_url and args.linger:
        _linger(args.linger, err, args.quiet)
    return 0


STAGED = (
    "staged on purpose, to show how seamscope records them (neither is a bug): the policy "
    "'vip_customer' reads a field the demo's context lacks (KeyError: counted as no match), "
    "and the intent classifier times out on the board-report turn (ClassifierTimeout: its "
    "stage abstains, [degraded]); the other stages go on.",
)
"""What the demo stages, said before its trees."""


def _writes(output: Path, log_path: Path | None) -> str:
    """The files the demo writes, said before it runs."""
    from seamscope.cli._learn import priors_path_for

    if log_path is None:
        return "demo: spans to standard output; nothing written to disk"
    return (
        f"demo: writes {output} (spans), {log_path} (logs) and {priors_path_for(output)} "
        "(priors from calibrate), replacing them if they exist"
    )


def _signed(value: float) -> str:
    return f"{'+' if value >= 0 else '−'}${abs(value):.4f}"


def _summary(
    turns: int,
    outcome: Outcome,
    spans_at: str,
    log_path: Path | None,
    metrics_url: str | None,
    otlp: _Otlp | None,
    skipped: str | None,
) -> list[str]:
    from seamscope.cli._plan import LANGCHAIN_HINT

    predicted = sum(number(s["predicted_net_saving_usd"]) or 0 for s in outcome.settlements)
    realized = sum(number(s["realized_net_saving_usd"]) or 0 for s in outcome.settlements)
    lines = [
        f"{turns} turns · {outcome.turns_total} traces · offloads and compactions predicted "
        f"{_signed(predicted)}, realized {_signed(realized)}"
    ]
    if outcome.settlements and abs(predicted - realized) >= 0.0001:
        lines.append(
            "  predicted: what each gate expected at its priors (H turns carried, recall "
            "chance p); realized: what the turns then did (fewer turns, more recalls, the "
            "cache): the table above has each; calibrate learns H and p from it"
        )
    if skipped:
        lines.append(f"LangChain turns not run ({skipped}): {LANGCHAIN_HINT} adds them")
    if log_path is None:
        lines.append("spans: standard output   logs: not written")
    else:
        lines.append(
            f"spans: {spans_at}   logs: {log_path}   explain: seamscope explain {spans_at}"
        )
    if metrics_url:
        lines.append(f"metrics: {metrics_url}")
    if otlp is not None:
        lines.append(otlp.summary(spans_at))
    return lines


def _linger(seconds: float, err: Console, quiet: bool) -> None:
    done = threading.Event()

    def stop(signum: int, frame: Any) -> None:
        done.set()

    previous = {}
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            previous[sig] = signal.signal(sig, stop)
        except ValueError:  # not the main thread
            pass
    if not quiet:
        err.print(f"serving metrics for {seconds:g} s more (Ctrl-C to stop)", markup=False)
    try:
        done.wait(seconds)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
