"""``seamscope whatif FILE...``: re-price recorded gate decisions under a changed config.

Every recorded gate call is decided again under the changed configuration
(``--set``, ``--priors``) and every conversation re-settled on its recorded
course (:mod:`seamscope.replay`), without re-running the agent. Per conversation and
in total it prints what was realized, what the change would have given, and
the difference, with the exact part (offloads that fire either way: their
recalls are known) kept apart from the expected part (offloads that would
newly fire: their recall is not known).

``--format json`` writes JSON Lines: one object per conversation, then one
``{"total": ...}``; amounts are exact decimal strings (USD).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from decimal import Decimal
from typing import Any, TextIO

from rich.console import Console

from seamscope.cli._render import money
from seamscope.replay import CourseReader, Overrides, Replay, Totals, parse_overrides, whatif

__all__ = [
    "UnreadableInput",
    "add_jaeger_arguments",
    "add_whatif_parser",
    "describe",
    "duplicates_note",
    "jaeger_source",
    "opened_inputs",
    "plural",
    "priors_lines",
    "run_whatif",
]

_EPILOG = (
    "--set keys: threshold_tokens, stub_tokens, horizon, recall_probability, "
    "recall_input_tokens, recall_output_tokens (every gate call); gate_evictions=true, "
    "gate_offloader=true (let the gate decide each Deep Agents eviction, each Strands "
    "ContextOffloader offload); tool.NAME.KEY (calls of "
    "tool NAME: wins over --priors and the global keys); price.MODEL.input / .output / "
    ".cache_read / .cache_write (USD per 1M tokens; prices the counterfactual only, on top of the "
    "rates the spans recorded). "
    "A key not set keeps the value each gate span recorded. "
    "exit codes: 0 success; 1 some lines or spans were skipped (the rest was re-priced); "
    "2 usage error (a bad --set or --priors, FILE missing, neither FILE nor --jaeger or both, "
    "no gate call or compaction in the input); with --jaeger, 1 also when Jaeger cannot be "
    "read"
)


def add_whatif_parser(sub: Any) -> None:
    p = sub.add_parser(
        "whatif",
        help="re-price recorded gate decisions under a changed config",
        description=(
            "Read OTLP-JSON files (as explain does), decide every recorded offload-gate call "
            "again under a changed configuration, and re-settle each conversation on its "
            "recorded course: realized, counterfactual and the difference, per conversation "
            "and in total. Exact: offloads that fire either way (their recalls are known). "
            "Expected: offloads that would newly fire (recall unknown: p x one recall hop, "
            "range from never to once recalled)."
        ),
        epilog=_EPILOG,
    )
    p.add_argument("files", nargs="*", metavar="FILE", help="OTLP-JSON lines files (- for stdin)")
    add_jaeger_arguments(p)
    p.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="change one setting (repeatable; default: none, the recorded configuration)",
    )
    p.add_argument(
        "--priors",
        metavar="FILE",
        help="a priors file from seamscope calibrate: its calibrated (tool, model) pairs set "
        "horizon and recall_probability (default: none)",
    )
    p.add_argument(
        "--format", choices=("text", "json"), default="text", help="output format (default text)"
    )


def _money(value: Decimal) -> str:
    return money(value, True)


def plural(n: int, noun: str) -> str:
    """``1 compaction``, ``2 compactions``, ``2 entries``."""
    if n == 1:
        return f"{n} {noun}"
    return f"{n} {noun[:-1]}ies" if noun.endswith("y") else f"{n} {noun}s"


def _pairs(entries: list[dict[str, Any]], shown: int = 5) -> str:
    named = ", ".join(f"{e['tool']} · {e['model']} ({e['offloads']})" for e in entries[:shown])
    return named + (f", and {len(entries) - shown} more" if len(entries) > shown else "")


def _exact(value: Decimal) -> str:
    return str(value.normalize()) if value else "0"


def _json(r: Replay) -> dict[str, Any]:
    realized, exact = r.realized_usd, r.counterfactual_exact_usd
    expected = r.counterfactual_expected_usd
    low, high = r.counterfactual_low_usd, r.counterfactual_high_usd
    return {
        "conversation_id": r.conversation_id,
        "gate_calls": r.gate_calls,
        "compactions": r.compactions,
        "recorded_fires": r.recorded_fires,
        "counterfactual_fires": r.counterfactual_fires,
        "newly_fired": [n.gate.tool for n in r.newly_fired],
        "no_longer_fired": [g.offload_id for g in r.no_longer_fired],
        "evictions_gated": r.evictions_gated,
        "evictions_kept": [e.compaction_id for e in r.evictions_kept],
        "offloader_gated": r.offloader_gated,
        "offloader_kept": [e.compaction_id for e in r.offloader_kept],
        "realized_usd": _exact(realized),
        "counterfactual_exact_usd": _exact(exact),
        "counterfactual_expected_usd": _exact(expected),
        "counterfactual_expected_range_usd": [_exact(low), _exact(high)],
        "difference_exact_usd": _exact(exact - realized),
        "difference_expected_usd": _exact(expected),
        **_totals_json(realized, exact, expected, low, high),
        "carried": "inferred" if r.inferred_carry else "recorded",
        "mismatched": r.mismatches(),
    }


def _totals_json(
    realized: Decimal, exact: Decimal, expected: Decimal, low: Decimal, high: Decimal
) -> dict[str, Any]:
    """The counterfactual's total (exact + expected), its range and the difference."""
    return {
        "counterfactual_usd": _exact(exact + expected),
        "counterfactual_range_usd": [_exact(exact + low), _exact(exact + high)],
        "difference_usd": _exact(exact + expected - realized),
    }


def _line(r: Replay) -> str:
    fires = f"fires {r.recorded_fires} → {r.counterfactual_fires}"
    changes = []
    if r.no_longer_fired:
        changes.append("−" + ", ".join(str(g.offload_id) for g in r.no_longer_fired))
    if r.newly_fired:
        changes.append("+" + ", ".join(f"{n.gate.tool or '?'}" for n in r.newly_fired))
    kept = [*r.evictions_kept, *r.offloader_kept]
    if kept:
        changes.append("kept " + ", ".join(e.compaction_id for e in kept))
    if changes:
        fires += f" ({'; '.join(changes)})"
    counterfactual = _counterfactual(
        r.counterfactual_exact_usd,
        r.counterfactual_expected_usd if r.newly_fired else None,
        r.counterfactual_low_usd,
        r.counterfactual_high_usd,
    )
    total = r.counterfactual_exact_usd + r.counterfactual_expected_usd
    return (
        f"{r.conversation_id}: realized {_money(r.realized_usd)} → counterfactual "
        f"{counterfactual} · difference {_money(total - r.realized_usd)} · {fires}"
    )


def _counterfactual(exact: Decimal, expected: Decimal | None, low: Decimal, high: Decimal) -> str:
    """The counterfactual's total first; with newly fired offloads, its range and its
    two parts (exact: known recalls; expected: the new offloads' unknown recall)."""
    if expected is None:
        return f"{_money(exact)} (exact)"
    return (
        f"{_money(exact + expected)} [{_money(exact + low)}, {_money(exact + high)}] "
        f"(exact {_money(exact)} + expected {_money(expected)})"
    )


def add_jaeger_arguments(p: Any) -> None:
    """``--jaeger URL --service S --since T --until T --page-size N`` (whatif, calibrate)."""
    from seamscope.cli._jaeger import DEFAULT_PAGE

    p.add_argument(
        "--jaeger",
        metavar="URL",
        help="read the traces from Jaeger's query API (http://host:16686) instead of files",
    )
    p.add_argument("--service", metavar="NAME", help="with --jaeger: the service.name to read")
    p.add_argument(
        "--since",
        default="1h",
        metavar="TIME",
        help="with --jaeger: traces that started at or after TIME: ISO 8601, now, or a "
        "duration back from now such as 30m, 6h, 7d (default 1h)",
    )
    p.add_argument(
        "--until",
        default="now",
        metavar="TIME",
        help="with --jaeger: traces that started at or before TIME (default now)",
    )
    p.add_argument(
        "--page-size",
        type=int,
        default=DEFAULT_PAGE,
        metavar="N",
        help=f"with --jaeger: traces per request; a full page splits its time window "
        f"(default {DEFAULT_PAGE})",
    )


class UnreadableInput(Exception):
    """A named input file that cannot be opened: the message names it."""


@contextlib.contextmanager
def opened_inputs(names: Sequence[str]) -> Iterator[list[tuple[str, TextIO]]]:
    """(source name, handle) of each named trace file, ``-`` for standard input,
    all closed on leaving (standard input stays open). Raises
    :class:`UnreadableInput` for the first file that cannot be opened."""
    with contextlib.ExitStack() as stack:
        handles: list[tuple[str, TextIO]] = []
        for name in names:
            if name == "-":
                handles.append(("<stdin>", sys.stdin))
                continue
            try:
                handle = open(name, encoding="utf-8", errors="replace")  # noqa: SIM115
            except OSError as exc:
                raise UnreadableInput(f"{name}: {exc.strerror or exc}") from exc
            stack.callback(handle.close)
            handles.append((name, handle))
        yield handles


def jaeger_source(args: argparse.Namespace) -> tuple[Any, str | None]:
    """The query to read (a callable feeding a reader), or why the flags cannot run."""
    from seamscope.cli._jaeger import parse_time, requests

    if args.jaeger is None:
        if not args.files:
            return None, "give FILE... or --jaeger URL --service NAME"
        if args.service is not None:
            return None, "--service goes with --jaeger"
        return None, None
    if args.files:
        return None, "give FILE... or --jaeger, not both"
    if not args.service:
        return None, "--jaeger needs --service NAME"
    if args.page_size < 1:
        return None, "--page-size must be >= 1"
    try:
        since, until = parse_time(args.since), parse_time(args.until)
    except ValueError as exc:
        return None, f"--since/--until: {exc}"
    if since > until:
        return None, "--since is after --until"

    def read(reader: CourseReader) -> None:
        source = f"{args.jaeger} service {args.service}"
        for request in requests(args.jaeger, args.service, since, until, page=args.page_size):
            reader.feed(request, source)

    return read, None


def describe(overrides: Overrides) -> str:
    """The changed configuration, in words."""
    parts = [f"{k}={v}" for k, v in overrides.gate.items()]
    parts += [f"tool.{t}.{k}={v}" for t, kv in overrides.tools.items() for k, v in kv.items()]
    parts += [f"price.{m}.{k}={v}" for m, kv in overrides.prices.items() for k, v in kv.items()]
    if overrides.gate_evictions:
        parts.append("gate_evictions=true")
    if overrides.gate_offloader:
        parts.append("gate_offloader=true")
    if overrides.priors is not None:
        parts.append(f"priors {overrides.priors.version}")
    return ", ".join(parts) or "the recorded configuration"


def priors_lines(overrides: Overrides) -> list[str]:
    """What the priors file did, in words (none without --priors)."""
    use = overrides.priors_use()
    if use is None:
        return []
    applied = use["applied"]
    calls = sum(e["gate_calls"] for e in applied)
    text = (
        f"priors {use['version']}: {plural(use['entries'], 'entry')}; applied "
        f"{plural(len(applied), 'pair')} to {plural(calls, 'gate call')}"
    )
    lines = [text]
    few, absent = use["skipped_fewer_offloads"], use["skipped_not_in_input"]
    if few:
        lines.append(
            f"  skipped {plural(len(few), 'pair')} with fewer than {use['min_offloads']} "
            f"offloads (the file's min_offloads: the gate keeps its own priors for them; "
            f"calibrate --min-offloads N sets it): {_pairs(few)}"
        )
    if absent:
        lines.append(
            f"  skipped {plural(len(absent), 'pair')} with no gate call in the input: "
            f"{_pairs(absent)}"
        )
    return lines


def _reprice(
    sources: list[tuple[str, TextIO]],
    overrides: Overrides,
    emit: Callable[[str], None],
    fmt: str,
    query: Callable[[CourseReader], None] | None,
) -> tuple[Totals, CourseReader]:
    """Re-price ``sources``, writing each conversation's line as it closes."""

    def each(r: Replay) -> None:
        emit(json.dumps(_json(r)) if fmt == "json" else _line(r))

    return whatif(sources, overrides, each, query=query)


def _total_json(t: Totals, overrides: Overrides, reader: CourseReader) -> dict[str, Any]:
    return {
        "total": {
            "config": overrides.as_json(),
            "conversations": t.conversations,
            "gate_calls": t.gate_calls,
            "compactions": t.compactions,
            "recorded_fires": t.recorded_fires,
            "counterfactual_fires": t.counterfactual_fires,
            "newly_fired": t.newly_fired,
            "no_longer_fired": t.no_longer_fired,
            "evictions_gated": t.evictions_gated,
            "evictions_kept": t.evictions_kept,
            "offloader_gated": t.offloader_gated,
            "offloader_kept": t.offloader_kept,
            "realized_usd": _exact(t.realized),
            "counterfactual_exact_usd": _exact(t.exact),
            "counterfactual_expected_usd": _exact(t.expected),
            "counterfactual_expected_range_usd": [_exact(t.low), _exact(t.high)],
            "difference_exact_usd": _exact(t.exact - t.realized),
            "difference_expected_usd": _exact(t.expected),
            **_totals_json(t.realized, t.exact, t.expected, t.low, t.high),
            "mismatched_settlements": t.mismatched,
            "conversations_with_inferred_carry": t.inferred,
            "lines": reader.lines,
            "skipped": reader.problem_count,
            "duplicates_dropped": reader.duplicates,
        }
    }


def duplicates_note(count: int) -> list[str]:
    """The note on spans read more than once (explain's words), if any."""
    if not count:
        return []
    return [
        f"note: {count} duplicate span{'s' if count != 1 else ''} dropped (same trace id and "
        "span id read more than once)"
    ]


def _total_lines(t: Totals, overrides: Overrides) -> list[str]:
    lines = [
        f"total ({plural(t.conversations, 'conversation')}, {plural(t.gate_calls, 'gate call')}, "
        f"{plural(t.compactions, 'compaction')}; under {describe(overrides)}): realized "
        f"{_money(t.realized)} → counterfactual "
        f"{_counterfactual(t.exact, t.expected if t.newly_fired else None, t.low, t.high)}",
        f"difference: {_money(t.exact + t.expected - t.realized)} · fires "
        f"{t.recorded_fires} → {t.counterfactual_fires} ({t.no_longer_fired} no longer, "
        f"{t.newly_fired} newly)",
    ]
    if overrides.gate_evictions:
        lines.append(
            f"gating Deep Agents' evictions: {t.evictions_kept} of "
            f"{plural(t.evictions_gated, 'eviction')} priced as a loss, kept in the prompt"
        )
    if overrides.gate_offloader:
        lines.append(
            f"gating Strands' ContextOffloader: {t.offloader_kept} of "
            f"{plural(t.offloader_gated, 'offload')} priced as a loss, kept in the prompt"
        )
    if t.mismatched:
        lines.append(
            f"note: {plural(t.mismatched, 'settlement')} re-settled under the recorded "
            f"configuration {'differs from its settle span' if t.mismatched == 1 else 'differ from their settle spans'} "
            "(recorded with other prices, or a course the trace does not show whole)"
        )
    if t.inferred:
        lines.append(
            f"note: {plural(t.inferred, 'conversation')} "
            f"{'has' if t.inferred == 1 else 'have'} no seamscope.offload.carried on its chat "
            "spans: every chat span was taken to carry every live offload (the ledger's default)"
        )
    return lines


def run_whatif(args: argparse.Namespace, console: Console, err: Console) -> int:
    from seamscope.decisions import Priors

    def usage(message: str) -> int:
        err.print(f"error: {message}", markup=False, highlight=False)
        return 2

    query, problem = jaeger_source(args)
    if problem is not None:
        return usage(problem)
    try:
        priors = None if args.priors is None else Priors.load(args.priors)
        overrides = parse_overrides(args.sets, priors)
    except ValueError as exc:
        return usage(str(exc))
    from seamscope.cli._jaeger import JaegerError

    out = console.file

    def emit(text: str) -> None:
        out.write(text + "\n")

    try:
        with opened_inputs(args.files) as handles:
            totals, reader = _reprice(handles, overrides, emit, args.format, query)
    except (UnreadableInput, ValueError) as exc:  # a price.* key without a price to change
        return usage(str(exc))
    except JaegerError as exc:
        err.print(f"error: {exc}", markup=False, highlight=False)
        return 1
    for source, line, message in reader.problems:
        err.print(f"error: {source}:{line}: {message}", markup=False, highlight=False)
    if not totals.gate_calls and not totals.compactions:
        where = ", ".join(args.files) or f"{args.jaeger} service {args.service}"
        return usage(f"{where}: no offload-gate call or compaction with a conversation id")
    if args.format == "json":
        emit(json.dumps(_total_json(totals, overrides, reader)))
    else:
        lines = _total_lines(totals, overrides) + priors_lines(overrides)
        for text in lines + duplicates_note(reader.duplicates):
            emit(text)
    return 1 if reader.problem_count else 0
