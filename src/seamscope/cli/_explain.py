"""``seamscope explain FILE``: decision trees from OTLP-JSON.

One pass over the file (:class:`seamscope.explain.Collector`): each trace is assembled as soon as
it is complete, turned into what will be printed for it (plain text, or the
JSON of its view), and kept only as that, in a spill file; its spans are
dropped. Traces that received spans after they were finished are read again
in a second pass. Then the turns are numbered per conversation and written
in start order. Memory follows the largest trace, not the file.

``--format json`` writes one document, one turn per line, as the turns are
written: ``{"turns": [...], "settlements": [...], ...}``.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import gc
import io
import json
import re
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TextIO

from rich.console import Console

from seamscope.cli._render import (
    Node,
    plain_lines,
    shadow_lines,
    span_tree,
    tool_tree,
    turn_label_tail,
    turn_tree,
    write_settlements,
    write_tree,
)
from seamscope.explain import (
    LOG_LINE,
    Collector,
    Problem,
    SpanRecord,
    TraceInfo,
    assemble,
    id_needles,
    reread,
    settlements,
    shadow_settlements,
    span_rows,
    text_needles,
    tool_story,
    turn_view,
)
from seamscope.telemetry import conventions as c

__all__ = ["Options", "Outcome", "add_explain_parser", "explain", "run_explain"]

MAX_NAMED_PROBLEMS = 100
"""Skipped lines and spans named one by one on stderr; the rest are counted."""
_MAX_LISTED = 5  # traces without decisions listed by id in the text notes
_HEX = re.compile(r"[0-9a-f]{1,32}")


def _trace_id(value: str) -> str:
    text = value.strip().lower()
    if not _HEX.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a trace id: use its hex digits (up to 32) or a unique prefix"
        )
    return text


def add_explain_parser(sub: Any) -> None:
    p = sub.add_parser(
        "explain",
        help="print decision trees from an OTLP-JSON file",
        description=(
            "Read OTLP-JSON (one export request per line, as the OpenTelemetry file exporters "
            "write) and print the decision trace of every turn as a tree. Spans repeated in the "
            "file (a re-sent batch) are merged. A malformed line or span is named on stderr and "
            "skipped; the rest is still shown (exit code 1)."
        ),
        epilog=(
            "exit codes: 0 success; 1 some lines or spans were skipped; 2 usage error (bad "
            "arguments, FILE missing, empty or without a readable span, unknown or ambiguous "
            "--trace-id, unknown --tool, a log file instead of a trace); 130 interrupted (Ctrl-C)"
        ),
    )
    p.add_argument(
        "file",
        nargs="?",
        metavar="FILE",
        help="OTLP-JSON lines file, or - for standard input (not with --glossary)",
    )
    p.add_argument(
        "--glossary",
        action="store_true",
        help="print the words of the trees and the offload table, and exit (default off)",
    )
    p.add_argument(
        "--trace-id",
        type=_trace_id,
        metavar="ID",
        help="only this trace (hex, or a unique prefix); a trace without decisions "
        "is shown as its span tree (default: every trace)",
    )
    p.add_argument(
        "--conversation",
        metavar="ID",
        help="only turns of this gen_ai.conversation.id (default: every conversation)",
    )
    p.add_argument(
        "--only-redirects",
        action="store_true",
        help="only iterations where a policy or the adopter rewrote a tool call (default off)",
    )
    p.add_argument(
        "--only-offloads",
        action="store_true",
        help="only iterations where the offload gate priced an output (at or above its "
        "threshold) or a framework middleware compacted the context (default off)",
    )
    p.add_argument(
        "--tool",
        metavar="NAME",
        help="why NAME was or was not offered, selected and run: one line per iteration "
        "(default: the whole trees)",
    )
    p.add_argument(
        "--tree",
        action="store_true",
        help="with --tool, also print each turn's whole tree (default off)",
    )
    p.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="output format: text trees or one JSON document (default text)",
    )
    p.add_argument(
        "--svg",
        metavar="FILE",
        help="also save the printed trees as an SVG picture (default: none)",
    )


@dataclass(frozen=True, slots=True)
class Options:
    """What to show; the defaults show everything, as the demo does."""

    trace_id: str | None = None
    conversation: str | None = None
    only_redirects: bool = False
    only_offloads: bool = False
    tool: str | None = None
    tree: bool = False
    format: str = "text"
    turns: bool = True
    settlements: bool = True

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Options:
        return cls(
            trace_id=args.trace_id,
            conversation=args.conversation,
            only_redirects=args.only_redirects,
            only_offloads=args.only_offloads,
            tool=args.tool,
            tree=args.tree,
            format=args.format,
        )

    def keep_iteration(self, it: dict[str, Any]) -> bool:
        if self.only_redirects and not any(
            d.get("policy") or d.get("adopter_override") for d in it.get("dispatches", [])
        ):
            return False
        if not self.only_offloads:
            return True
        priced = any(g.get("reason_code") != "below_threshold" for g in it.get("offload_gates", []))
        return priced or any(d.get("span") == c.SPAN_COMPACTION for d in it.get("middleware", []))


@dataclass
class Outcome:
    """What one explain run read and showed."""

    code: int = 0
    lines: int = 0
    traces: int = 0
    turns_total: int = 0
    turns_shown: int = 0
    problems: int = 0
    duplicates: int = 0
    late: int = 0
    without_decisions: list[TraceInfo] = field(default_factory=list)
    settlements: list[dict[str, Any]] = field(default_factory=list)
    shadows: list[dict[str, Any]] = field(default_factory=list)


@dataclass(slots=True)
class _Kept:
    """What is kept of a finished trace until it is written."""

    payload: tuple[int, int] | None = None  # where its output is in the spill
    kind: str = ""  # "turn" or "spans"
    tail: str = ""  # text mode: the turn label after "turn N"
    settlements: list[dict[str, Any]] = field(default_factory=list)
    shadows: list[dict[str, Any]] = field(default_factory=list)
    stories: list[dict[str, Any]] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    duplicates: int = 0


class _Problems:
    """Names the skipped lines and spans on stderr: each kind of problem once,
    with a count of the lines that repeat it; past ``MAX_NAMED_PROBLEMS``
    kinds, only a count."""

    def __init__(self, source: str, err: Console) -> None:
        self.source = source
        self.err = err
        self.count = 0
        self.kept: list[Problem] = []
        self.log_lines = 0  # lines of a structlog log file (seamscope's own, or any)
        self._repeats: dict[str, list[int]] = {}  # message -> [repeats, last line]
        self._unnamed = 0
        self._first_log_line = 0
        self.is_trace: Callable[[], bool] = lambda: True
        """Whether the input has shown an export request yet: until it has, problems
        are held (a file that is no trace at all is said so once, not line by line)."""
        self._held: list[Problem] = []

    def __call__(self, problem: Problem) -> None:
        if not self.is_trace():
            if len(self._held) < MAX_NAMED_PROBLEMS:
                self._held.append(problem)
            else:
                self.count += 1
                self._unnamed += 1
            return
        self.release()
        self._name(problem)

    def release(self) -> None:
        """Name the problems held while the input had not shown an export request."""
        held, self._held = self._held, []
        for problem in held:
            self._name(problem)

    def drop_held(self) -> int:
        """Forget the held problems (the input is not a trace file); how many lines."""
        held, self._held = self._held, []
        return len(held)

    def _name(self, problem: Problem) -> None:
        self.count += 1
        if problem.message == LOG_LINE:  # said once, at the end (a log file: which to open)
            self.log_lines += 1
            if self.log_lines == 1:
                self._first_log_line = problem.line
                self.kept.append(problem)
            return
        seen = self._repeats.get(problem.message)
        if seen is not None:
            seen[0] += 1
            seen[1] = problem.line
            return
        if len(self._repeats) >= MAX_NAMED_PROBLEMS:
            self._unnamed += 1
            return
        self._repeats[problem.message] = [0, problem.line]
        self.kept.append(problem)
        self.err.print(f"error: {problem.describe(self.source)}", markup=False, highlight=False)

    def close(self, *, log_file: bool = False) -> None:
        """Say what was counted; ``log_file``: the caller says the file is a log."""
        self.release()
        if self._first_log_line and not log_file:
            self.err.print(
                f"error: {self.source}:{self._first_log_line}: {LOG_LINE}"
                + (f" (and {self.log_lines - 1} more such lines)" if self.log_lines > 1 else ""),
                markup=False,
                highlight=False,
            )
            self._first_log_line = 0  # said; a second close() says nothing more
        for message, (repeats, last) in self._repeats.items():
            if repeats:
                self.err.print(
                    f"error: {self.source}: the same on {repeats} more "
                    f"{'line' if repeats == 1 else 'lines'} (the last: line {last}): {message}",
                    markup=False,
                    highlight=False,
                )
        self._repeats = {m: [0, last] for m, (_, last) in self._repeats.items()}
        if self._unnamed:
            self.err.print(
                f"error: {self.source}: {self._unnamed} more lines or spans skipped (not named)",
                markup=False,
                highlight=False,
            )
            self._unnamed = 0

    def only_log_lines(self) -> bool:
        count = self.count + len(self._held)
        log_lines = self.log_lines + sum(p.message == LOG_LINE for p in self._held)
        return count > 0 and count == log_lines


def _not_a_trace(collector: Collector, problems: _Problems) -> bool:
    """No line was an export request, nor metrics or logs, nor a log line: some other
    file (source code, a CSV, a binary)."""
    reader = collector.reader
    return bool(
        reader.lines
        and not reader.export_lines
        and not reader.other_signals
        and not problems.only_log_lines()
    )


def _trace_file_beside(source: str) -> str:
    """What to open instead of a log file: the demo's trace beside its log
    (``X.log.jsonl`` -> ``X.jsonl``) when it exists, else what to look for."""
    if source.endswith(".log.jsonl"):
        trace = source[: -len(".log.jsonl")] + ".jsonl"
        if Path(trace).is_file():
            return f"open {trace} instead"
    return "open the OTLP-JSON trace file instead (configure(trace_file=...), demo --output)"


class _Spill:
    """Finished traces' output, in memory up to 32 MiB and on disk past it."""

    def __init__(self) -> None:
        self._file: Any = tempfile.SpooledTemporaryFile(max_size=32 * 1024 * 1024)  # noqa: SIM115
        self._size = 0

    def put(self, text: str) -> tuple[int, int]:
        data = text.encode("utf-8", "surrogatepass")
        self._file.seek(self._size)
        self._file.write(data)
        self._size += len(data)
        return (self._size - len(data), len(data))

    def get(self, where: tuple[int, int]) -> str:
        self._file.seek(where[0])
        return str(self._file.read(where[1]).decode("utf-8", "surrogatepass"))

    def close(self) -> None:
        self._file.close()


class _Finisher:
    """Turns one finished trace into what will be printed for it."""

    def __init__(self, options: Options, plain: bool, spill: _Spill) -> None:
        self.options = options
        self.plain = plain and options.format == "text"
        self.spill = spill

    def __call__(self, info: TraceInfo, records: list[SpanRecord]) -> None:
        options = self.options
        tree = assemble(records)
        kept = _Kept(problems=tree.problems, duplicates=tree.duplicates)
        info.output = kept
        kept.settlements = settlements(tree)
        kept.shadows = shadow_settlements(tree)
        if options.conversation:
            kept.settlements = [
                s for s in kept.settlements if s.get("conversation_id") == options.conversation
            ]
            kept.shadows = [
                s for s in kept.shadows if s.get("conversation_id") == options.conversation
            ]
        turn = turn_view(tree, trace_id=info.trace_id, turn=0, conversation_id=info.conversation_id)
        if turn is not None:
            if options.conversation and info.conversation_id != options.conversation:
                return
            its = [it for it in turn["iterations"] if options.keep_iteration(it)]
            if not its:
                return
            turn["iterations"] = its
            del turn["turn"]
            kept.kind = "turn"
            if options.tool and options.format == "json":
                kept.stories = [
                    {"iteration": it["index"], "story": tool_story(it, options.tool)} for it in its
                ]
            kept.payload = self.spill.put(self._turn_payload(turn, kept))
        elif (
            options.trace_id
            and not kept.settlements
            and not kept.shadows
            and not info.has_settlement
        ):
            rows = span_rows(tree)
            kept.kind = "spans"
            text = (
                "\n".join(plain_lines(span_tree(info.trace_id, rows)))
                if self.plain
                else json.dumps({"trace_id": info.trace_id, "spans": rows})
            )
            kept.payload = self.spill.put(text)

    def _turn_payload(self, turn: dict[str, Any], kept: _Kept) -> str:
        if not self.plain:
            return json.dumps(turn)
        turn["turn"] = 0
        options = self.options
        node = (
            tool_tree(turn, options.tool)
            if options.tool and not options.tree
            else turn_tree(turn, tool=options.tool)
        )
        kept.tail = turn_label_tail(turn)
        lines = plain_lines(node)
        next(lines)  # the label, written with its number once the turns are counted
        return "\n".join(lines)


def _open(path: str) -> TextIO:
    if path == "-":
        buffer = getattr(sys.stdin, "buffer", None)
        if buffer is None:  # a replaced stdin (tests) is already text
            return sys.stdin
        return io.TextIOWrapper(buffer, encoding="utf-8", errors="replace")
    return open(path, encoding="utf-8", errors="replace")


def _usage(err: Console, message: str) -> int:
    err.print(f"error: {message}", markup=False, highlight=False)
    return 2


def _check(collector: Collector, options: Options, source: str, err: Console) -> int:
    """The exit code of a usage error the first pass revealed, or 0."""
    if options.trace_id:
        matching = [t for t in collector.traces.values() if t.trace_id.startswith(options.trace_id)]
        if not matching:
            return _usage(err, f"no trace {options.trace_id} in {source}")
        if len(matching) > 1:
            matching.sort(key=lambda t: (t.start_ns, t.trace_id))
            shown = ", ".join(f"{t.trace_id[:12]}…" for t in matching[:4])
            more = ", …" if len(matching) > 4 else ""
            return _usage(
                err,
                f"trace id prefix {options.trace_id} is ambiguous: {len(matching)} traces "
                f"match ({shown}{more}); give more digits",
            )
    if options.tool and options.tool not in collector.tools:
        close = difflib.get_close_matches(options.tool, sorted(collector.tools), n=3, cutoff=0.6)
        hint = f"; did you mean {' or '.join(close)}?" if close else ""
        where = f"trace {options.trace_id}" if options.trace_id else "this file"
        return _usage(err, f"no tool {options.tool} in {where}{hint}")
    return 0


@contextlib.contextmanager
def _no_gc() -> Iterator[None]:
    """Reading builds many short-lived objects and no cycles: the cyclic
    collector only costs time here (about a quarter of it, measured with
    ``benchmarks/bench_explain.py``)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def explain(
    source: str,
    handle: TextIO,
    options: Options,
    console: Console,
    err: Console,
    reopen: Callable[[], TextIO] | None = None,
) -> Outcome:
    """Read ``handle`` (named ``source``) and print what ``options`` ask.

    ``reopen`` gives the input again for the second pass; without it, the
    first pass keeps a copy of the input (standard input).
    """
    problems = _Problems(source, err)
    wanted = options.trace_id
    keep: Callable[[str], bool] | None = (lambda t: t.startswith(wanted)) if wanted else None
    spill = _Spill()
    finisher = _Finisher(options, _plain(console), spill)
    collector = Collector(
        finisher,
        keep=keep,
        collect_tools=options.tool is not None,
        report=problems,
    )
    problems.is_trace = lambda: collector.reader.export_lines > 0
    outcome = Outcome()
    copy: Any = None
    needles = id_needles(wanted) if wanted else None

    def again(stack: contextlib.ExitStack) -> TextIO:
        if reopen is None:
            copy.seek(0)
            return copy  # type: ignore[no-any-return]
        return stack.enter_context(reopen())

    try:
        with _no_gc(), contextlib.ExitStack() as stack:
            if reopen is None:
                copy = stack.enter_context(tempfile.SpooledTemporaryFile(32 * 1024 * 1024, "w+"))
            collector.read(handle, copy, needles)
            late = collector.late
            if late:
                reread(again(stack), late, finisher)
            if collector.skipped:
                _number_pass(collector, wanted, needles, again(stack))
            outcome.lines = collector.reader.lines + collector.skipped
            outcome.traces = len(collector.traces)
            outcome.late = len(late)
            if not collector.traces and not collector.skipped:
                if _not_a_trace(collector, problems):
                    problems.drop_held()
                    outcome.code = _usage(
                        err,
                        f"{source} is not a trace file: no line of it is an OTLP-JSON export "
                        'request (one {"resourceSpans": [...]} per line, as configure('
                        "trace_file=...) and seamscope demo --output write)",
                    )
                    return outcome
                problems.close(log_file=problems.only_log_lines())
                if problems.only_log_lines():
                    outcome.code = _usage(
                        err, f"{source} is a log file, not a trace: {_trace_file_beside(source)}"
                    )
                    return outcome
                what = "empty file" if outcome.lines == 0 else "no readable span"
                outcome.code = _usage(err, f"{source}: {what}, nothing to explain")
                return outcome
            code = _check(collector, options, source, err)
            if code:
                problems.close()
                outcome.code = code
                return outcome
            _write(collector, options, console, spill, problems, outcome)
    finally:
        spill.close()
    problems.close()
    outcome.problems = problems.count
    outcome.code = 1 if problems.count else 0
    return outcome


def _number_pass(collector: Collector, wanted: str | None, needles: Any, handle: TextIO) -> None:
    """With ``--trace-id`` the first pass skipped the lines without the id: read the
    chosen trace's conversation's other turns from them (only the lines that name the
    conversation), so the turn gets the number a whole read would give it."""
    matching = [t for t in collector.traces.values() if wanted and t.trace_id.startswith(wanted)]
    if len(matching) != 1 or not matching[0].has_decisions:
        return  # a usage error, or a span tree: no turn number needed
    conversation = matching[0].conversation_id
    # a turn without a conversation id is numbered among all such turns: read every line
    others = None if conversation is None else text_needles(conversation)
    collector.summarize(handle, others, needles)


def _write(
    collector: Collector,
    options: Options,
    console: Console,
    spill: _Spill,
    problems: _Problems,
    outcome: Outcome,
) -> None:
    ordered = sorted(collector.traces.values(), key=lambda t: (t.start_ns, t.trace_id))
    counters: dict[str | None, int] = {}
    numbers: dict[str, int] = {}
    for info in ordered:
        if info.has_decisions:
            counters[info.conversation_id] = counters.get(info.conversation_id, 0) + 1
            numbers[info.trace_id] = counters[info.conversation_id]
        elif not info.has_settlement:
            outcome.without_decisions.append(info)
    outcome.turns_total = len(numbers)
    shown = [t for t in ordered if t.output is not None]
    for info in shown:
        kept: _Kept = info.output
        outcome.duplicates += kept.duplicates
        outcome.settlements.extend(kept.settlements)
        outcome.shadows.extend(kept.shadows)
        for problem in kept.problems:
            problems(problem)
    if options.format == "json":
        _write_json(shown, numbers, options, console.file, spill, problems, outcome)
        return
    written = False
    plain = _plain(console)  # asked once: rich's answer reads the environment each time
    for info in shown:
        kept = info.output
        if kept.payload is None or (kept.kind == "turn" and not options.turns):
            written = written or kept.payload is not None
            continue
        written = True
        if kept.kind == "turn":
            outcome.turns_shown += 1
        text = spill.get(kept.payload)
        number = numbers.get(info.trace_id, 0)
        if plain:
            head = f"turn {number}{kept.tail}\n" if kept.kind == "turn" else ""
            console.file.write(f"{head}{text}\n\n")
        else:
            write_tree(console, _node(json.loads(text), kept.kind, number, options))
    if not written and not (options.trace_id and (outcome.settlements or outcome.shadows)):
        console.print("no matching turns")
    show_table = options.settlements and not (options.only_redirects or options.tool)
    if outcome.settlements and show_table:
        write_settlements(console, outcome.settlements)
    if outcome.shadows and show_table:
        for line in shadow_lines(outcome.shadows):
            console.print(line, markup=False, highlight=False)
    for note in _notes(outcome, options):
        console.print(note, markup=False, highlight=False)


def _plain(console: Console) -> bool:
    """Whether trees go out as plain lines (a file or a pipe) rather than through rich."""
    return not (console.is_terminal or console.record)


def _node(view: dict[str, Any], kind: str, number: int, options: Options) -> Node:
    if kind == "spans":
        return span_tree(view["trace_id"], view["spans"])
    view["turn"] = number
    if options.tool and not options.tree:
        return tool_tree(view, options.tool)
    return turn_tree(view, tool=options.tool)


def _notes(outcome: Outcome, options: Options) -> list[str]:
    notes = []
    without = outcome.without_decisions
    if without and not options.trace_id:
        listed = ", ".join(f"{t.trace_id[:8]}… {t.root_name or '?'}" for t in without[:_MAX_LISTED])
        more = ", …" if len(without) > _MAX_LISTED else ""
        n = len(without)
        notes.append(
            f"{n} trace{'s' if n != 1 else ''} without seamscope decisions, not shown "
            f"({listed}{more}); --trace-id ID prints one as its span tree"
        )
    if outcome.duplicates:
        notes.append(
            f"{outcome.duplicates} duplicate span{'s' if outcome.duplicates != 1 else ''} "
            "dropped (same trace id and span id read more than once)"
        )
    return notes


def _write_json(
    shown: list[TraceInfo],
    numbers: dict[str, int],
    options: Options,
    out: IO[str],
    spill: _Spill,
    problems: _Problems,
    outcome: Outcome,
) -> None:
    out.write('{"turns": [')
    stories: list[dict[str, Any]] = []
    span_trees: list[str] = []
    for info in shown:
        kept: _Kept = info.output
        if kept.payload is None:
            continue
        if kept.kind == "spans":
            span_trees.append(spill.get(kept.payload))
            continue
        number = numbers.get(info.trace_id, 0)
        text = spill.get(kept.payload)
        separator = ",\n" if outcome.turns_shown else "\n"
        out.write(f'{separator}{{"turn": {number}, {text[1:]}')
        outcome.turns_shown += 1
        stories.extend(
            {"trace_id": info.trace_id, "turn": number, **story} for story in kept.stories
        )
    out.write("\n]")
    tail: dict[str, Any] = {"settlements": outcome.settlements}
    if outcome.shadows:
        tail["shadow_settlements"] = outcome.shadows
    if options.tool:
        tail["tool"] = {"name": options.tool, "story": stories}
    tail["traces_without_decisions"] = {
        "count": len(outcome.without_decisions),
        "trace_ids": [t.trace_id for t in outcome.without_decisions[:100]],
    }
    tail["duplicates_dropped"] = outcome.duplicates
    if problems.count:
        tail["errors"] = [
            {"line": p.line, "span_id": p.span_id, "message": p.message} for p in problems.kept
        ]
        tail["errors_total"] = problems.count
    for key, value in tail.items():
        out.write(f",\n{json.dumps(key)}: {json.dumps(value)}")
    if span_trees:
        out.write(',\n"span_trees": [' + ",\n".join(span_trees) + "]")
    out.write("}\n")


def run_explain(args: argparse.Namespace, console: Console, err: Console) -> int:
    if args.glossary:
        if args.file is not None:
            return _usage(err, "--glossary takes no FILE")
        from seamscope.cli._glossary import GLOSSARY

        console.file.write(GLOSSARY)
        return 0
    if args.file is None:
        return _usage(err, "give FILE (an OTLP-JSON trace file, - for standard input)")
    if args.tree and not args.tool:
        return _usage(err, "--tree only goes with --tool NAME")
    source = "<stdin>" if args.file == "-" else args.file
    try:
        handle = _open(args.file)
    except FileNotFoundError:
        return _usage(err, f"{args.file}: no such file")
    except OSError as exc:
        return _usage(err, f"{args.file}: {exc.strerror or exc}")
    reopen = None if args.file == "-" else (lambda: _open(args.file))
    try:
        return explain(source, handle, Options.from_args(args), console, err, reopen).code
    except BrokenPipeError:
        raise  # the reader of our output went away: main() handles it
    except OSError as exc:  # a read error mid-file
        return _usage(err, f"{source}: {exc.strerror or exc}")
    finally:
        if handle is not sys.stdin:
            handle.close()
