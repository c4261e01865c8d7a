"""The ``seamscope`` command line.

Commands:

* ``seamscope demo``: run the scripted scenarios (the reference loop's and, with
  the ``langchain`` extra, a LangChain agent's), write OTLP-JSON, print trees.
* ``seamscope explain FILE``: read OTLP-JSON back and print the same trees.
* ``seamscope whatif FILE...``: re-price the recorded gate decisions under a
  changed configuration, on each conversation's recorded course.
* ``seamscope calibrate FILE...``: per (tool, model) recall probability and
  remaining turns from realized settlements, written as a priors file.

Exit codes:

* 0: success. ``explain`` also exits 0 when the filters match nothing ("no
  matching turns") and when it merged repeated spans.
* 1: the input was partly unreadable (``explain``: malformed lines or spans
  were skipped and named on stderr, the rest was printed) or a runtime
  failure (``demo``: cannot write the output or the SVG, the metrics port is
  taken, its own output did not read back; ``explain``: cannot write the
  SVG).
* ``whatif`` / ``calibrate``: 0 success; 1 some lines or spans were skipped,
  or Jaeger could not be read; 2 usage error (a bad ``--set``, priors file or
  flag, no input or both kinds, nothing to re-price or learn from).
* 2: usage error: bad arguments (a ``--trace-id`` that is not hex, flags that
  do nothing alone such as ``demo --linger`` without ``--metrics-port`` or
  ``--otlp-metrics`` without ``--otlp-endpoint``, an OTLP endpoint that is not
  a URL, ``--svg`` naming a folder); ``explain`` only: FILE not found or
  unreadable, empty, or without one readable span; a ``--trace-id`` that
  matches no trace or more than one; a ``--tool`` no span names; a log file
  instead of a trace (the message names the trace file to open).
* 130: interrupted (Ctrl-C): one line on stderr; what was written so far is
  whole (``demo``: the spans of the finished turns; ``explain``: the trees
  printed so far).
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console

from seamscope import __version__

__all__ = ["EXIT_INTERRUPTED", "main", "run"]

EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report a Ctrl-C


def _console(stream: object, *, record: bool = False, soft_wrap: bool = False) -> Console:
    width = None if getattr(stream, "isatty", lambda: False)() else 200
    return Console(
        file=stream,  # type: ignore[arg-type]
        width=width,
        highlight=False,
        soft_wrap=soft_wrap,
        record=record,
    )


def _parser() -> argparse.ArgumentParser:
    from seamscope.cli._calibrate import add_calibrate_parser
    from seamscope.cli._demo import add_demo_parser
    from seamscope.cli._explain import add_explain_parser
    from seamscope.cli._whatif import add_whatif_parser

    parser = argparse.ArgumentParser(
        prog="seamscope",
        description=(
            "The decision layer of a tool-using agent loop, observable with OpenTelemetry."
        ),
        epilog=(
            "exit codes: 0 success; 1 partly unreadable input or runtime failure; 2 usage "
            "error; 130 interrupted (Ctrl-C). Each command's --help has its own."
        ),
    )
    parser.add_argument("--version", action="version", version=f"seamscope {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    add_demo_parser(sub)
    add_explain_parser(sub)
    add_whatif_parser(sub)
    add_calibrate_parser(sub)
    return parser


def _save_svg(console: Console, path: str, command: str, err: Console) -> bool:
    """Save what ``console`` recorded as an SVG; a one-line error when it cannot."""
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        console.save_svg(str(target), title=f"seamscope {command}")
    except OSError as exc:
        err.print(f"error: cannot write the SVG {path}: {exc.strerror or exc}", markup=False)
        return False
    return True


def _silence(stream: object) -> None:
    """Point a closed pipe's file descriptor at /dev/null, so that the
    interpreter's final flush does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())  # type: ignore[attr-defined]
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI with ``argv`` (default: ``sys.argv[1:]``); returns the exit code."""
    parser = _parser()
    try:
        args, extra = parser.parse_known_args(list(sys.argv[1:] if argv is None else argv))
        if extra:  # the command's own usage, not the top-level one
            commands = next(
                a for a in parser._actions if isinstance(a, argparse._SubParsersAction)
            ).choices
            commands.get(args.command, parser).error(f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as exc:  # argparse exits 2 on usage errors, 0 on --help
        return int(exc.code or 0)
    # messages, one per line: never broken at the 200 columns of a pipe (a long path stays whole)
    err = _console(sys.stderr, soft_wrap=True)
    svg = getattr(args, "svg", None)
    if svg and Path(svg).is_dir():
        err.print(f"error: --svg {svg} is a folder; name the file to write", markup=False)
        return 2
    # demo --output - writes the spans to standard output: the trees go to stderr
    human = sys.stderr if getattr(args, "output", None) == "-" else sys.stdout
    quiet_demo = args.command == "demo" and args.quiet
    console = _console(human, record=bool(svg) and not quiet_demo)
    # demo --quiet --svg: the picture holds the trees the terminal does not show
    trees = _console(io.StringIO(), record=True) if svg and quiet_demo else None
    if args.command not in ("demo", "explain", "whatif", "calibrate"):
        parser.print_help(sys.stderr)
        return 2
    try:
        if args.command == "demo":
            from seamscope.cli._demo import run_demo

            code = run_demo(args, console, err, trees)
        elif args.command == "whatif":
            from seamscope.cli._whatif import run_whatif

            code = run_whatif(args, console, err)
        elif args.command == "calibrate":
            from seamscope.cli._calibrate import run_calibrate

            code = run_calibrate(args, console, err)
        else:
            from seamscope.cli._explain import run_explain

            code = run_explain(args, console, err)
    except BrokenPipeError:
        # `seamscope explain big.jsonl | head`: stop quietly, as head asked
        _silence(human)
        return 0
    except KeyboardInterrupt:
        done = ""
        if args.command == "demo" and args.output != "-":
            done = f": the spans of the turns finished so far are in {args.output}"
        err.print(f"interrupted{done}", markup=False, highlight=False)
        return EXIT_INTERRUPTED
    if svg and code != 2 and not _save_svg(trees or console, svg, args.command, err):
        return 1
    return code


def run() -> None:
    """Console-script entry point."""
    sys.exit(main())
