"""How fast ``seamscope explain`` reads a large file, and how much memory it takes.

Two files. The demo's own output: ``--demo-seeds`` runs (4) of ``seamscope
demo --turns T`` (``--demo-turns``, 1500; seeds 1, 2, ...), concatenated, as
written by its exporter (batches of many traces per line); or ``--demo-file``,
such a file made before. And a synthetic file: one run of ``seamscope demo --turns 8`` (two
conversations, 8 turns, their settlements), replicated with fresh trace and
span ids, conversation ids and start times until it reaches ``--size-mb``.
Each copy is one export request per line, as a file exporter writes it.

Every measurement is a child process of this script: its wall time, its CPU
time and its peak resident memory (both from ``os.wait4``). The reference is
a bare ``json.loads`` pass over the same file's lines in the same
interpreter, run interleaved with the others in the same repeats. Ratios are
medians of the per-repeat ratios; a target is met when both the wall and the
CPU ratio meet it (on a busy machine the CPU ratio is the steadier one).

Targets: text <= 3x, ``--format json`` <= 3x, one trace picked by
``--trace-id`` <= 1x the bare pass (on the demo's output it is a trace from
the middle of the file); peak memory < 300 MB for any file whose largest
trace fits in 50 MB. A second file puts ``--big-trace-mb`` of spans
in one trace (many copies of the demo's turns under one trace id) beside
the small ones, to show memory follows the largest trace and not the file.

With ``--instructions-mb N`` (and valgrind installed) it also counts the
instructions of each run on the first N MB of the demo's output (of the
synthetic file with ``--demo-seeds 0``) with
``valgrind --tool=callgrind``, once with and once without the start-up (a
run on a one-line file is subtracted): a count the host's load does not
reach, where the wall and CPU times of a shared machine vary by tens of
percent from run to run.

    .venv/bin/python benchmarks/bench_explain.py                 # 4 x 1500 demo turns, 200 MB
    .venv/bin/python benchmarks/bench_explain.py --demo-file out.jsonl --demo-seeds 0
    .venv/bin/python benchmarks/bench_explain.py --size-mb 20 --repeats 1
    .venv/bin/python benchmarks/bench_explain.py --instructions-mb 10
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HEX_ID = re.compile(r'"(traceId|spanId|parentSpanId)":"([0-9a-f]+)"')
TIME = re.compile(r'"(start|end)TimeUnixNano":"(\d+)"')
CONVERSATION = re.compile(r'"(demo-\d+(?:-\d+)?)"')
COPY_SPACING_NS = 10_000_000_000  # copies start 10 s apart

BARE = "import json, sys\nfor line in open(sys.argv[1], encoding='utf-8'):\n    json.loads(line)\n"
EXPLAIN = [sys.executable, "-m", "seamscope", "explain"]
DEMO = [sys.executable, "-m", "seamscope", "demo"]


def _demo_lines(workdir: Path) -> list[str]:
    out = workdir / "demo.jsonl"
    subprocess.run(
        [*DEMO, "--turns", "8", "--quiet", "--output", str(out)],
        check=True,
        stdout=subprocess.DEVNULL,
        cwd=workdir,
    )
    return out.read_text(encoding="utf-8").splitlines()


def demo_output(workdir: Path, seeds: int, turns: int) -> Path:
    """``seeds`` runs of ``seamscope demo --turns turns`` (seeds 1, 2, ...), concatenated."""
    out = workdir / f"demo-{seeds}x{turns}.jsonl"
    with out.open("w", encoding="utf-8") as whole:
        for seed in range(1, seeds + 1):
            part = workdir / f"demo-seed{seed}.jsonl"
            subprocess.run(
                [
                    *DEMO,
                    "--turns",
                    str(turns),
                    "--seed",
                    str(seed),
                    "--quiet",
                    "--output",
                    str(part),
                ],
                check=True,
                stdout=subprocess.DEVNULL,
                cwd=workdir,
            )
            with part.open(encoding="utf-8") as piece:
                shutil.copyfileobj(piece, whole)
            part.unlink()
    return out


def _middle_trace_id(path: Path) -> str:
    """The trace of a root span in the line halfway through the file."""
    with path.open(encoding="utf-8") as handle:
        lines = sum(1 for _ in handle)
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle):
            if number < lines // 2:
                continue
            for rs in json.loads(line)["resourceSpans"]:
                for ss in rs["scopeSpans"]:
                    for span in ss["spans"]:
                        if not span.get("parentSpanId") and span["name"].startswith("invoke_agent"):
                            return str(span["traceId"])
    raise SystemExit(f"no invoke_agent root span in the second half of {path}")


def _copy(line: str, key: str, shift_ns: int, trace_id: str | None = None) -> str:
    def new_id(match: re.Match[str]) -> str:
        field, old = match.group(1), match.group(2)
        if field == "traceId" and trace_id is not None:
            return f'"traceId":"{trace_id}"'
        digest = hashlib.blake2b(f"{key}/{old}".encode(), digest_size=len(old) // 2).hexdigest()
        return f'"{field}":"{digest}"'

    line = HEX_ID.sub(new_id, line)
    line = TIME.sub(lambda m: f'"{m.group(1)}TimeUnixNano":"{int(m.group(2)) + shift_ns}"', line)
    return CONVERSATION.sub(lambda m: f'"{m.group(1)}-{key}"', line)


def _big_copy(line: str, key: str, shift_ns: int, trace_id: str, root_id: str) -> str:
    """A copy whose turns are all iterations of one trace, under one root written last."""
    request = json.loads(_copy(line, key, shift_ns))
    for rs in request["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                if span["name"].startswith("seamscope.offload.settle"):
                    continue  # settlements stay traces of their own
                span["traceId"] = trace_id
                if not span.get("parentSpanId"):
                    span["parentSpanId"] = root_id
    return json.dumps(request, separators=(",", ":"))


def _big_root(trace_id: str, root_id: str, end_ns: int) -> str:
    span = {
        "traceId": trace_id,
        "spanId": root_id,
        "name": "invoke_agent analyst",
        "startTimeUnixNano": "1",
        "endTimeUnixNano": str(end_ns),
        "attributes": [{"key": "gen_ai.conversation.id", "value": {"stringValue": "big"}}],
    }
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]})


def write_file(
    path: Path, base: list[str], size_mb: float, big_trace_mb: float = 0.0
) -> dict[str, int]:
    """Replicate ``base`` into ``path`` until it holds ``size_mb`` MB; returns counts.

    With ``big_trace_mb``, the first copies go into one trace of that size.
    """
    target = int(size_mb * 1e6)
    big = int(big_trace_mb * 1e6)
    big_id = hashlib.blake2b(b"big", digest_size=16).hexdigest()
    root_id = hashlib.blake2b(b"big-root", digest_size=8).hexdigest()
    written = copies = big_bytes = 0
    with path.open("w", encoding="utf-8") as out:
        while written < target:
            in_big = big_bytes < big
            for line in base:
                shift = copies * COPY_SPACING_NS
                if in_big:
                    text = _big_copy(line, f"c{copies}", shift, big_id, root_id)
                    big_bytes += len(text) + 1
                else:
                    text = _copy(line, f"c{copies}", shift)
                out.write(text + "\n")
                written += len(text) + 1
            copies += 1
            if in_big and big_bytes >= big:
                text = _big_root(big_id, root_id, (copies + 1) * COPY_SPACING_NS * 10**3)
                out.write(text + "\n")
                written += len(text) + 1
    spans = sum(line.count('"spanId"') for line in base) * copies
    return {"bytes": written, "copies": copies, "spans": spans, "big_trace_bytes": big_bytes}


def measure(argv: list[str]) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds and peak RSS (MB) of one child process, output discarded."""
    start = time.perf_counter()
    child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    elapsed = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    assert child.stderr is not None
    errors = child.stderr.read().decode(errors="replace")
    child.stderr.close()
    if child.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv)} exited {child.returncode}: {errors[-2000:]}")
    peak_mb = usage.ru_maxrss / 1024 if sys.platform != "darwin" else usage.ru_maxrss / 2**20
    return elapsed, usage.ru_utime + usage.ru_stime, peak_mb


def instructions(argv: list[str]) -> int:
    """Instructions one run executes, counted by callgrind."""
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
    )
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise SystemExit(f"callgrind gave no count for {' '.join(argv)}: {done.stderr[-2000:]}")
    return int(found.group(1))


def count_instructions(
    main_file: Path, trace_id: str | None, size_mb: float, workdir: Path
) -> None:
    """The instruction table: explain's runs against the bare pass, on the first
    ``size_mb`` MB of ``main_file`` (``trace_id`` None: a trace from their middle)."""
    part, tiny = workdir / "explain-bench-part.jsonl", workdir / "explain-bench-one.jsonl"
    with main_file.open(encoding="utf-8") as source, part.open("w", encoding="utf-8") as out:
        written = 0
        for line in source:
            out.write(line)
            if not written:
                tiny.write_text(line, encoding="utf-8")
            written += len(line)
            if written >= size_mb * 1e6:
                break
    if trace_id is None:
        trace_id = _middle_trace_id(part)
    rows = {
        "bare": [sys.executable, "-c", BARE],
        "text": EXPLAIN,
        "json": [*EXPLAIN, "--format", "json"],
        "trace": [*EXPLAIN, "--trace-id", trace_id],
    }
    counts = {
        k: (instructions([*argv, str(part)]), instructions([*argv, str(tiny)]))
        for k, argv in rows.items()
    }
    bare, bare_start = counts["bare"]
    print(
        f"\ninstructions (valgrind --tool=callgrind) on the first {written / 1e6:.1f} MB of "
        f"{main_file.name}:\n"
    )
    print("| run | instructions | ratio | ratio without start-up |")
    print("|---|---:|---:|---:|")
    labels = {
        "bare": "bare json.loads pass",
        "text": "explain (text)",
        "json": "explain --format json",
        "trace": "explain --trace-id (one trace)",
    }
    for key, (total, start) in counts.items():
        ratio = f"{total / bare:.2f}" if key != "bare" else ""
        net = f"{(total - start) / (bare - bare_start):.2f}" if key != "bare" else ""
        print(f"| {labels[key]} | {total / 1e9:.2f} G | {ratio} | {net} |")


def _largest_kb(base: list[str]) -> float:
    sizes: dict[str, int] = {}
    for line in base:
        for rs in json.loads(line)["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for span in ss["spans"]:
                    size = len(json.dumps(span, separators=(",", ":")))
                    sizes[span["traceId"]] = sizes.get(span["traceId"], 0) + size
    return max(sizes.values()) / 1e3


def _a_trace_id(path: Path) -> str:
    with path.open(encoding="utf-8") as handle:
        request = json.loads(handle.readline())
    for rs in request["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                if not span.get("parentSpanId"):
                    return str(span["traceId"])
    raise SystemExit("no root span in the first line")


def run(
    size_mb: float,
    big_trace_mb: float,
    repeats: int,
    workdir: Path,
    instructions_mb: float = 0,
    demo: Path | None = None,
) -> None:
    base = _demo_lines(workdir)
    main_file = workdir / "explain-bench.jsonl"
    big_file = workdir / "explain-bench-big-trace.jsonl"
    made = write_file(main_file, base, size_mb)
    made_big = write_file(big_file, base, max(size_mb / 2, big_trace_mb * 2), big_trace_mb)
    trace_id = _a_trace_id(main_file)
    print(
        f"file: {made['bytes'] / 1e6:.1f} MB, {made['copies']} copies of the 8-turn demo "
        f"({made['spans']} spans, {made['copies'] * 10} traces of at most "
        f"{_largest_kb(base):.0f} KB)"
    )
    print(
        f"big-trace file: {made_big['bytes'] / 1e6:.1f} MB, one trace of "
        f"{made_big['big_trace_bytes'] / 1e6:.1f} MB beside small ones"
    )
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, {repeats} repeats, median\n")

    rows: dict[str, list[str]] = {}
    table: list[tuple[str, str, str | None, float | None]] = []
    if demo is not None:
        demo_trace = _middle_trace_id(demo)
        with demo.open(encoding="utf-8") as handle:
            lines = sum(1 for _ in handle)
        print(
            f"demo output: {demo.stat().st_size / 1e6:.1f} MB, {lines} lines; the trace: "
            f"{demo_trace}\n"
        )
        rows |= {
            "demo-bare": [sys.executable, "-c", BARE, str(demo)],
            "demo-text": [*EXPLAIN, str(demo)],
            "demo-json": [*EXPLAIN, str(demo), "--format", "json"],
            "demo-trace": [*EXPLAIN, str(demo), "--trace-id", demo_trace],
        }
        table += [
            ("bare json.loads pass, demo output", "demo-bare", None, None),
            ("explain (text), demo output", "demo-text", "demo-bare", 3.0),
            ("explain --format json, demo output", "demo-json", "demo-bare", 3.0),
            ("explain --trace-id (one trace), demo output", "demo-trace", "demo-bare", 1.0),
        ]
    rows |= {
        "bare": [sys.executable, "-c", BARE, str(main_file)],
        "text": [*EXPLAIN, str(main_file)],
        "json": [*EXPLAIN, str(main_file), "--format", "json"],
        "trace": [*EXPLAIN, str(main_file), "--trace-id", trace_id],
        "bare-big": [sys.executable, "-c", BARE, str(big_file)],
        "text-big": [*EXPLAIN, str(big_file)],
    }
    wall: dict[str, list[float]] = {k: [] for k in rows}
    cpu: dict[str, list[float]] = {k: [] for k in rows}
    peaks: dict[str, float] = dict.fromkeys(rows, 0.0)
    for _ in range(repeats):
        for key, argv in rows.items():  # interleaved: every repeat runs each row once
            elapsed, used, peak = measure(argv)
            wall[key].append(elapsed)
            cpu[key].append(used)
            peaks[key] = max(peaks[key], peak)

    def ratio(times: dict[str, list[float]], key: str, ref: str) -> float:
        return statistics.median(t / r for t, r in zip(times[key], times[ref], strict=True))

    table += [
        ("bare json.loads pass", "bare", None, None),
        ("explain (text)", "text", "bare", 3.0),
        ("explain --format json", "json", "bare", 3.0),
        ("explain --trace-id (one trace)", "trace", "bare", 1.0),
        ("bare json.loads pass, big-trace file", "bare-big", None, None),
        ("explain (text), big-trace file", "text-big", "bare-big", None),
    ]
    print("| run | wall s | CPU s | wall ratio | CPU ratio | target | peak MB (< 300) |")
    print("|---|---:|---:|---:|---:|---|---:|")
    for label, key, ref, limit in table:
        cells = [label, f"{statistics.median(wall[key]):.2f}", f"{statistics.median(cpu[key]):.2f}"]
        if ref is None:
            cells += ["", "", ""]
        else:
            by_wall, by_cpu = ratio(wall, key, ref), ratio(cpu, key, ref)
            verdict = ""
            if limit is not None:
                verdict = f"<= {limit:g}: {'met' if max(by_wall, by_cpu) <= limit else 'MISSED'}"
            cells += [f"{by_wall:.2f}", f"{by_cpu:.2f}", verdict]
        cells.append(f"{peaks[key]:.0f}{'' if peaks[key] < 300 else ' MISSED'}")
        print("| " + " | ".join(cells) + " |")
    if instructions_mb:  # on the demo's output when there is one (its shape is the target's)
        if demo is not None:
            count_instructions(demo, None, instructions_mb, workdir)
        else:
            count_instructions(main_file, trace_id, instructions_mb, workdir)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mb", type=float, default=200.0, help="main file size (200)")
    parser.add_argument(
        "--big-trace-mb",
        type=float,
        default=50.0,
        help="the one large trace of the second file (50)",
    )
    parser.add_argument("--repeats", type=int, default=3, help="runs of each row (3)")
    parser.add_argument("--keep", metavar="DIR", help="write the files here and keep them")
    parser.add_argument(
        "--instructions-mb",
        type=float,
        default=0.0,
        metavar="MB",
        help="also count instructions with callgrind on this many MB (0: no)",
    )
    parser.add_argument("--demo-seeds", type=int, default=4, help="demo runs (4; 0: none)")
    parser.add_argument("--demo-turns", type=int, default=1500, help="turns per demo run (1500)")
    parser.add_argument(
        "--demo-file", metavar="PATH", help="a demo-output file made before (not generated)"
    )
    args = parser.parse_args(argv)
    if args.instructions_mb and shutil.which("valgrind") is None:
        parser.error("--instructions-mb needs valgrind")
    sizes = (args.size_mb, args.big_trace_mb, args.repeats)

    def go(workdir: Path) -> None:
        demo = Path(args.demo_file) if args.demo_file else None
        if demo is None and args.demo_seeds > 0:
            demo = demo_output(workdir, args.demo_seeds, args.demo_turns)
        run(*sizes, workdir, args.instructions_mb, demo)

    if args.keep:
        Path(args.keep).mkdir(parents=True, exist_ok=True)
        go(Path(args.keep))
        return 0
    with tempfile.TemporaryDirectory(prefix="seamscope-bench-") as tmp:
        go(Path(tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
