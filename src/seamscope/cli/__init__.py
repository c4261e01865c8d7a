"""The ``seamscope`` command line.

Commands:

* ``seamscope demo``: run the scripted scenario, write OTLP-JSON, print trees.
* ``seamscope explain FILE``: read OTLP-JSON back and print the same trees.

Exit codes:

* 0: success;
* 1: the input was partly unreadable (``explain``: malformed lines were
  skipped and named on stderr; the good traces were still printed) or a
  runtime failure (``demo``: cannot write the output, the metrics port is
  taken);
* 2: usage error (bad arguments, file not found, no readable line at all).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from rich.console import Console

from seamscope import __version__

__all__ = ["main", "run"]


def _console(stream: object, *, record: bool = False) -> Console:
    width = None if getattr(stream, "isatty", lambda: False)() else 200
    return Console(
        file=stream,  # type: ignore[arg-type]
        width=width,
        highlight=False,
        soft_wrap=False,
        record=record,
    )


def _parser() -> argparse.ArgumentParser:
    from seamscope.cli._demo import add_demo_parser
    from seamscope.cli._explain import add_explain_parser

    parser = argparse.ArgumentParser(
        prog="seamscope",
        description=(
            "The decision layer of a tool-using agent loop, observable with OpenTelemetry."
        ),
        epilog="exit codes: 0 success; 1 partly unreadable input or runtime failure; 2 usage error",
    )
    parser.add_argument("--version", action="version", version=f"seamscope {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    add_demo_parser(sub)
    add_explain_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI with ``argv`` (default: ``sys.argv[1:]``); returns the exit code."""
    parser = _parser()
    try:
        args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exc:  # argparse exits 2 on usage errors, 0 on --help
        return int(exc.code or 0)
    svg = getattr(args, "svg", None)
    console = _console(sys.stdout, record=bool(svg))
    err = _console(sys.stderr)
    if args.command == "demo":
        from seamscope.cli._demo import run_demo

        code = run_demo(args, console, err)
    elif args.command == "explain":
        from seamscope.cli._explain import run_explain

        code = run_explain(args, console, err)
    else:
        parser.print_help(sys.stderr)
        return 2
    if svg and code != 2:
        # --svg: what the command printed, as a picture
        console.save_svg(svg, title=f"seamscope {args.command}")
    return code


def run() -> None:
    """Console-script entry point."""
    sys.exit(main())
