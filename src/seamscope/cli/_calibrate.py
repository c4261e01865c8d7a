"""``seamscope calibrate FILE...``: the gate's priors learned from realized settlements.

For every (tool, model) pair with settled offloads in the input:

* recall probability: a Beta posterior. The prior is seeded by the gate's own
  prior ``p0`` (what its spans recorded) with a strength of ``k`` pseudo-
  offloads: Beta(k·p0, k·(1−p0)) (``p0`` kept inside [0.01, 0.99]); each
  settled offload that was recalled at least once adds one to alpha, each
  that was not adds one to beta. Reported: the posterior mean (the prior
  written to the file), its 90% equal-tailed credible interval and the count;
* horizon: the model calls that followed each offload in its conversation
  until it settled (the turns its output would have been carried: the
  gate's H; a settlement made before the conversation ended, idle, evicted
  or expired, is censored and counted on to the conversation's end);
  reported as its median (the prior written, rounded half up),
  10th and 90th percentiles and mean, beside the turns really carried (a
  recall ends the carry).

For a fleet, ``--prometheus URL [--range 30d]`` reads the same evidence from
the per-(tool, model) series the ledger exports, one PromQL query per
quantity (see :mod:`seamscope.cli._prometheus` for which are exact: the
remaining-turns distribution up to 32 turns, every count and sum; the carried
turns' median is not known there, only their mean).

The priors file (TOML, see :mod:`seamscope.decisions._priors`) lists every
pair with its evidence; the gate uses a pair only with at least
``--min-offloads`` offloads behind it. Its version, unless given, is a hash
of its numbers, so the same evidence always gives the same file.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
from typing import Any

from rich.console import Console

from seamscope.cli._jaeger import JaegerError
from seamscope.cli._prometheus import PrometheusError, read_evidence, valid_range
from seamscope.cli._whatif import (
    UnreadableInput,
    add_jaeger_arguments,
    duplicates_note,
    jaeger_source,
    opened_inputs,
    plural,
)
from seamscope.decisions import DEFAULT_MIN_OFFLOADS
from seamscope.decisions import PRIORS_FORMAT as FORMAT
from seamscope.replay import DEFAULT_PRIOR_STRENGTH, Evidence, calibrate

__all__ = [
    "DEFAULT_OUTPUT",
    "add_calibrate_parser",
    "from_prometheus",
    "priors_toml",
    "run_calibrate",
]

DEFAULT_OUTPUT = "seamscope-priors.toml"


# -- the priors file ----------------------------------------------------------------


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }"
    raise TypeError(type(value).__name__)


def priors_toml(
    rows: list[dict[str, Any]],
    *,
    min_offloads: int,
    strength: float,
    sources: list[str],
    version: str | None = None,
    source: str | None = None,
) -> tuple[str, str]:
    """The priors file for ``rows`` (see :mod:`seamscope.decisions._priors`) and its version."""
    body: list[str] = []
    for row in rows:
        used = (
            "used by the gate"
            if row["calibrated"]
            else f"fewer than {min_offloads} offloads: the gate keeps its own priors"
        )
        body += [
            "",
            "[[priors]]",
            f"tool = {_toml(row['tool'])}",
            f"model = {_toml(row['model'])}",
            f"horizon = {row['horizon']}  # median remaining turns",
            f"recall_probability = {_toml(row['recall_probability'])}  # Beta posterior mean",
            f"offloads = {row['offloads']}  # {used}",
            "",
            "[priors.evidence]",
        ]
        for key in (
            "recalled", "recalls", "prior", "posterior", "credible_90", "remaining_turns",
            "turns_carried",
        ):  # fmt: skip
            body.append(f"{key} = {_toml(row[key])}")
        if row.get("approximate"):
            body.append(f"approximate = {_toml(row['approximate'])}")
    if version is None:
        digest = hashlib.sha256("\n".join(body).encode("utf-8")).hexdigest()
        version = f"sha256:{digest[:12]}"
    head = [
        "# seamscope offload-gate priors: review before use (OffloadGate(priors=...),",
        "# seamscope whatif --priors). recall_probability: Beta posterior mean of a recall per",
        f"# offload, seeded by the gate's prior with {strength:g} pseudo-offloads; horizon: median",
        "# of the model calls that followed each offload until it settled.",
        f"format = {FORMAT}",
        f"version = {_toml(version)}",
        f"min_offloads = {min_offloads}",
        'generated_by = "seamscope calibrate"',
        f"sources = {_toml(sources)}",
    ]
    if source is not None:
        head.append(f"source = {_toml(source)}")
    if source == "prometheus":
        head[4:4] = [
            "# From Prometheus: every count and sum is exact (a range's increase() is",
            "# extrapolated, then rounded); the remaining-turns percentiles are exact up to",
            "# 32 turns (a pair's `approximate` names what is not); turns_carried: mean only.",
        ]
    return "\n".join(head + body) + "\n", version


# -- the command --------------------------------------------------------------------


def add_calibrate_parser(sub: Any) -> None:
    p = sub.add_parser(
        "calibrate",
        help="learn the gate's priors per (tool, model) from realized settlements",
        description=(
            "Read OTLP-JSON files (or Jaeger, or Prometheus for a fleet) and, per (tool, "
            "model), estimate the recall probability (a "
            "Beta posterior seeded by the gate's prior: mean, 90% credible interval, count) "
            "and the remaining-turns distribution (median, p10, p90, mean) from the settled "
            "offloads; write them as a reviewable, versioned TOML priors file with the "
            "evidence behind each number, for OffloadGate(priors=...) and whatif --priors."
        ),
        epilog=(
            "exit codes: 0 success; 1 some lines or spans were skipped (the rest was used); "
            "2 usage error (FILE missing, not exactly one of FILE, --jaeger, --prometheus, no "
            "settled offload in the input, bad flag value, the output cannot be written); with "
            "--jaeger or --prometheus, 1 also when it cannot be read"
        ),
    )
    p.add_argument("files", nargs="*", metavar="FILE", help="OTLP-JSON lines files (- for stdin)")
    add_jaeger_arguments(p)
    p.add_argument(
        "--prometheus",
        metavar="URL",
        help="read the evidence of a fleet from Prometheus (http://host:9090) instead of "
        "traces: the per-(tool, model) series the ledger exports, one PromQL query per "
        'quantity; the file says source = "prometheus" (default: none)',
    )
    p.add_argument(
        "--range",
        dest="window",
        metavar="DURATION",
        help="with --prometheus: what the series grew over this PromQL duration (such as "
        "30d; increase(), extrapolated at the edges, rounded) instead of their totals since "
        "each process started (default: the totals)",
    )
    p.add_argument(
        "--output",
        default=DEFAULT_OUTPUT,
        metavar="FILE",
        help=f"priors file to write (default {DEFAULT_OUTPUT}); - for standard output (the "
        "summary then goes to standard error)",
    )
    p.add_argument(
        "--min-offloads",
        type=int,
        default=DEFAULT_MIN_OFFLOADS,
        metavar="N",
        help=f"offloads a pair needs before the gate uses its prior (default "
        f"{DEFAULT_MIN_OFFLOADS}); written into the file",
    )
    p.add_argument(
        "--prior-strength",
        type=float,
        default=DEFAULT_PRIOR_STRENGTH,
        metavar="K",
        help=f"pseudo-offloads the gate's own recall prior weighs (default "
        f"{DEFAULT_PRIOR_STRENGTH:g})",
    )
    p.add_argument(
        "--version",
        dest="priors_version",
        metavar="TEXT",
        help="the file's version (default: sha256: and a hash of its numbers)",
    )
    p.add_argument(
        "--format", choices=("text", "json"), default="text", help="summary format (default text)"
    )


def _line(row: dict[str, Any], min_offloads: int) -> str:
    lo, hi = row["credible_90"]
    turns = row["remaining_turns"]
    used = "used" if row["calibrated"] else f"not used ({row['offloads']} < {min_offloads})"
    return (
        f"{row['tool']} · {row['model']}: {plural(row['offloads'], 'offload')}, "
        f"{row['recalled']} recalled · "
        f"recall p {row['recall_probability']:.3f} (90% {lo:.3f}–{hi:.3f}) · horizon "
        f"{row['horizon']} (p10 {turns['p10']:g}, p90 {turns['p90']:g}, mean {turns['mean']:g}) · "
        f"{used}"
    )


def run_calibrate(args: argparse.Namespace, console: Console, err: Console) -> int:
    def usage(message: str) -> int:
        err.print(f"error: {message}", markup=False, highlight=False)
        return 2

    if args.prometheus is not None:
        if args.files or args.jaeger is not None:
            return usage("give FILE..., --jaeger or --prometheus, one of them")
        if args.window is not None and not valid_range(args.window):
            return usage(f"--range {args.window!r}: a PromQL duration such as 30d, 6h, 1h30m")
        query, problem = None, None
    elif args.window is not None:
        return usage("--range goes with --prometheus")
    else:
        query, problem = jaeger_source(args)
    if problem is not None:
        return usage(problem)
    if args.min_offloads < 1:
        return usage("--min-offloads must be >= 1")
    if not math.isfinite(args.prior_strength) or args.prior_strength <= 0:
        return usage("--prior-strength must be a number > 0")
    if args.priors_version is not None and not args.priors_version.strip():
        return usage("--version must not be empty")
    problems = duplicates = 0
    source_kind = None
    try:
        if args.prometheus is not None:
            evidence, queries = from_prometheus(args.prometheus, args.window)
            sources = [f"{args.prometheus} {q}" for q in queries]
            where, source_kind = args.prometheus, "prometheus"
        else:
            with opened_inputs(args.files) as handles:
                evidence, reader = calibrate(handles, query)
            for source, line, message in reader.problems:
                err.print(f"error: {source}:{line}: {message}", markup=False, highlight=False)
            problems = reader.problem_count
            duplicates = reader.duplicates
            where = ", ".join(args.files) or f"{args.jaeger} service {args.service}"
            sources = [name for name, _ in handles] or [f"{args.jaeger} service {args.service}"]
    except UnreadableInput as exc:
        return usage(str(exc))
    except (JaegerError, PrometheusError) as exc:
        err.print(f"error: {exc}", markup=False, highlight=False)
        return 1
    if not evidence:
        return usage(f"{where}: no settled offload of the gate to learn from")
    rows = [
        evidence[key].summary(args.prior_strength, args.min_offloads) for key in sorted(evidence)
    ]
    text, version = priors_toml(
        rows,
        min_offloads=args.min_offloads,
        strength=args.prior_strength,
        sources=sources,
        version=args.priors_version,
        source=source_kind,
    )
    out = err if args.output == "-" else console
    if args.output == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        try:
            with open(args.output, "w", encoding="utf-8") as handle:
                handle.write(text)
        except OSError as exc:
            return usage(f"cannot write {args.output}: {exc.strerror or exc}")
    if args.format == "json":
        for row in rows:
            out.file.write(json.dumps(row) + "\n")
        total = {
            "pairs": len(rows),
            "version": version,
            "output": args.output,
            "duplicates_dropped": duplicates,
        }
        out.file.write(json.dumps({"total": total}) + "\n")
    else:
        for row in rows:
            out.print(_line(row, args.min_offloads), markup=False, highlight=False)
        where = "standard output" if args.output == "-" else args.output
        out.print(
            f"{len(rows)} (tool, model) pairs from "
            f"{sum(r['offloads'] for r in rows)} settled offloads; priors {version} written "
            f"to {where} (min_offloads {args.min_offloads})",
            markup=False,
            highlight=False,
        )
        for note in duplicates_note(duplicates):
            out.print(note, markup=False, highlight=False)
    return 1 if problems else 0


def from_prometheus(
    url: str, window: str | None
) -> tuple[dict[tuple[str, str], Evidence], list[str]]:
    """The evidence of every (tool, model) pair Prometheus holds, and the queries
    issued (see :mod:`seamscope.cli._prometheus`)."""
    rows, queries = read_evidence(url, window)
    evidence: dict[tuple[str, str], Evidence] = {}
    for row in rows:
        ev = Evidence(
            row["tool"],
            row["model"],
            prior_p_sum=row["prior_p_sum"],
            recalled=row["recalled"],
            recalls=row["recalls"],
            remaining=row["remaining"],
            remaining_sum=row["remaining_sum"],
            carried_sum=row["carried_sum"],
        )
        ev.approximate = () if row["remaining_exact"] else ("remaining_turns",)
        evidence[(ev.tool, ev.model)] = ev
    return evidence, queries
