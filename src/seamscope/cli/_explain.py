"""``seamscope explain FILE``: decision trees from OTLP-JSON."""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich.console import Console

from seamscope.cli._otlp import read_otlp_json
from seamscope.cli._render import render_settlements, render_turn
from seamscope.cli._views import build_report, tool_story

__all__ = ["add_explain_parser", "run_explain"]


def add_explain_parser(sub: Any) -> None:
    p = sub.add_parser(
        "explain",
        help="print decision trees from an OTLP-JSON file",
        description=(
            "Read OTLP-JSON (one export request per line, as the OpenTelemetry file exporters "
            "write) and print the decision trace of every turn as a tree. Malformed lines are "
            "named on stderr and skipped; the good traces are still shown (exit code 1)."
        ),
    )
    p.add_argument("file", help="OTLP-JSON lines file")
    p.add_argument("--trace-id", help="only this trace (hex, or a unique prefix)")
    p.add_argument("--conversation", help="only turns of this gen_ai.conversation.id")
    p.add_argument(
        "--only-redirects",
        action="store_true",
        help="only iterations where a policy or the adopter rewrote a tool call",
    )
    p.add_argument(
        "--only-offloads",
        action="store_true",
        help="only iterations where the offload gate priced an output (at or above its threshold)",
    )
    p.add_argument(
        "--tool",
        metavar="NAME",
        help="why NAME was or was not offered, selected and run, iteration by iteration",
    )
    p.add_argument("--format", choices=("text", "json"), default="text", help="output format")
    p.add_argument("--svg", metavar="FILE", help="also save the printed trees as an SVG picture")


def _keep_iteration(it: dict[str, Any], args: argparse.Namespace) -> bool:
    if args.only_redirects and not any(
        d.get("policy") or d.get("adopter_override") for d in it.get("dispatches", [])
    ):
        return False
    priced = [g for g in it.get("offload_gates", []) if g.get("reason_code") != "below_threshold"]
    return not (args.only_offloads and not priced)


def run_explain(args: argparse.Namespace, console: Console, err: Console) -> int:
    try:
        spans, errors = read_otlp_json(args.file)
    except FileNotFoundError:
        err.print(f"[red]error:[/red] {args.file}: no such file")
        return 2
    except (IsADirectoryError, PermissionError, UnicodeError) as exc:
        err.print(f"[red]error:[/red] {args.file}: {exc}")
        return 2
    for e in errors:
        err.print(f"[red]error:[/red] {args.file}:{e.line}: {e.message}")
    if errors and not spans:
        err.print(f"[red]error:[/red] {args.file}: no readable span")
        return 2
    report = build_report(spans)
    turns = report["turns"]
    if args.trace_id:
        wanted = args.trace_id.lower()
        turns = [t for t in turns if t["trace_id"].startswith(wanted)]
    if args.conversation:
        turns = [t for t in turns if t.get("conversation_id") == args.conversation]
    selected = []
    for turn in turns:
        its = [it for it in turn["iterations"] if _keep_iteration(it, args)]
        if its:
            selected.append({**turn, "iterations": its})
    settlements = report["settlements"]
    if args.conversation:
        settlements = [s for s in settlements if s.get("conversation_id") == args.conversation]

    if args.format == "json":
        out: dict[str, Any] = {"turns": selected, "settlements": settlements}
        if args.tool:
            out["tool"] = {
                "name": args.tool,
                "story": [
                    {
                        "trace_id": t["trace_id"],
                        "turn": t["turn"],
                        "iteration": it["index"],
                        "story": tool_story(it, args.tool),
                    }
                    for t in selected
                    for it in t["iterations"]
                ],
            }
        if errors:
            out["errors"] = [{"line": e.line, "message": e.message} for e in errors]
        console.print_json(json.dumps(out, default=str))
    else:
        if not selected:
            console.print("no matching turns")
        for turn in selected:
            console.print(render_turn(turn, tool=args.tool))
            console.print()
        if settlements and not (args.only_redirects or args.tool or args.trace_id):
            console.print(render_settlements(settlements))
    return 1 if errors else 0
