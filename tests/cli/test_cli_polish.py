"""The CLI for someone who did not write it: the log file beside the trace,
repeated errors counted, a command's own usage, defaults and exit codes in
every --help, and Ctrl-C."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from seamscope.cli import EXIT_INTERRUPTED, _parser, main
from seamscope.cli._demo import log_path_for
from seamscope.explain._otlp import LOG_LINE

from .conftest import Explain


def _run_demo(trace: Path) -> int:
    with contextlib.redirect_stdout(io.StringIO()):
        return main(["demo", "--quiet", "--output", str(trace)])


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = _parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def test_explain_on_the_demos_log_file_names_the_trace_to_open_once(
    tmp_path: Path, explain: Explain
) -> None:
    trace = tmp_path / "seamscope-trace.jsonl"
    assert 0 == _run_demo(trace)
    log = log_path_for(trace)
    assert log is not None and log.read_text(encoding="utf-8").count("\n") > 1
    code, out, err = explain(str(log))
    assert (2, "", f"error: {log} is a log file, not a trace: open {trace} instead\n") == (
        code,
        out,
        err,
    )


def test_a_log_file_with_no_trace_beside_it_says_what_to_open(
    tmp_path: Path, demo_trace: Path, explain: Explain
) -> None:
    log = tmp_path / "app.log.jsonl"
    log.write_text('{"event": "started", "level": "info"}\n' * 3, encoding="utf-8")
    code, _, err = explain(str(log))
    assert 2 == code
    assert [
        f"error: {log} is a log file, not a trace: open the OTLP-JSON trace file instead "
        "(configure(trace_file=...), demo --output)"
    ] == err.splitlines()


def test_log_lines_among_spans_are_named_once_with_their_count(
    tmp_path: Path, demo_trace: Path, explain: Explain
) -> None:
    mixed = tmp_path / "mixed.jsonl"
    spans = demo_trace.read_text(encoding="utf-8")
    first = spans.count("\n") + 1
    mixed.write_text(spans + '{"event": "x", "level": "info"}\n' * 4, encoding="utf-8")
    code, out, err = explain(str(mixed))
    assert (1, [f"error: {mixed}:{first}: {LOG_LINE} (and 3 more such lines)"]) == (
        code,
        err.splitlines(),
    )
    assert "turn 1 · conversation demo-7 · agent analyst" in out


def test_an_error_repeated_on_many_lines_is_named_once_and_counted(
    tmp_path: Path, demo_trace: Path, explain: Explain
) -> None:
    bad = tmp_path / "bad.jsonl"
    spans = demo_trace.read_text(encoding="utf-8")
    first = spans.count("\n") + 1
    bad.write_text(spans + "[1, 2]\n" * 6, encoding="utf-8")
    code, _, err = explain(str(bad))
    what = "not an OTLP trace export (no resourceSpans)"
    assert (
        1,
        [
            f"error: {bad}:{first}: {what}",
            f"error: {bad}: the same on 5 more lines (the last: line {first + 5}): {what}",
        ],
    ) == (code, err.splitlines())


@pytest.mark.parametrize(
    ("argv", "usage"),
    [
        (["explain", "trace.jsonl", "-q"], "usage: seamscope explain "),
        (["demo", "--no-such-flag"], "usage: seamscope demo "),
    ],
)
def test_a_commands_usage_error_shows_that_commands_usage(
    argv: list[str], usage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(argv)
    err = capsys.readouterr().err
    assert (2, True) == (code, err.startswith(usage)), err
    assert err.rstrip().endswith(f"error: unrecognized arguments: {argv[-1]}")


@pytest.mark.parametrize("command", ["demo", "explain"])
def test_every_help_states_each_default_and_the_exit_codes(command: str) -> None:
    parser = _commands()[command]
    undocumented = [
        action.option_strings[0]
        for action in parser._actions
        if action.option_strings
        and action.help != argparse.SUPPRESS
        and "--help" not in action.option_strings
        and "default" not in (action.help or "")
    ]
    epilog = parser.epilog or ""
    interrupted = f"{EXIT_INTERRUPTED} interrupted"
    assert ([], True, True) == (
        undocumented,
        epilog.startswith("exit codes: 0 "),
        interrupted in epilog,
    )
    assert f"{EXIT_INTERRUPTED} interrupted" in (_parser().epilog or "")


def _wait_for(predicate: object, what: str, limit_s: float = 180.0) -> None:
    deadline = time.monotonic() + limit_s
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.1)


def test_ctrl_c_during_the_demo_is_one_line_exit_130_and_the_spans_so_far_read_back(
    tmp_path: Path,
) -> None:
    trace = tmp_path / "trace.jsonl"
    demo = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "seamscope",
            "demo",
            "--turns",
            "4000",  # a run the interrupt comes well within, however slow the machine
            "--pace",
            "0.05",
            "--quiet",
            "--output",
            str(trace),
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for(lambda: trace.exists() and trace.stat().st_size > 0, "the first spans")
        demo.send_signal(signal.SIGINT)
        out, err = demo.communicate(timeout=120)
    finally:
        if demo.poll() is None:
            demo.kill()
    assert (EXIT_INTERRUPTED, "") == (demo.returncode, out)
    assert [f"interrupted: the spans of the turns finished so far are in {trace}"] == [
        line for line in err.splitlines() if not line.startswith("demo: ")
    ], err
    lines = trace.read_text(encoding="utf-8").splitlines()
    assert lines and all("resourceSpans" in json.loads(line) for line in lines)
    explained = subprocess.run(
        [sys.executable, "-m", "seamscope", "explain", str(trace)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert (0, True) == (
        explained.returncode,
        "turn 1 · conversation demo-7 · agent analyst" in explained.stdout,
    ), explained.stderr


def test_ctrl_c_during_explain_is_one_line_and_exit_130(tmp_path: Path, demo_trace: Path) -> None:
    """explain reading a pipe that has not ended: Ctrl-C stops it with one line."""
    shutil.copy(demo_trace, tmp_path / "trace.jsonl")
    reader = subprocess.Popen(
        [sys.executable, "-m", "seamscope", "explain", "-"],
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert reader.stdin is not None
        reader.stdin.write(demo_trace.read_text(encoding="utf-8").splitlines()[0] + "\n")
        reader.stdin.flush()
        time.sleep(1.0)  # let it start and block on the open pipe (no assertion on time)
        reader.send_signal(signal.SIGINT)
        out, err = reader.communicate(timeout=120)
    finally:
        if reader.poll() is None:
            reader.kill()
    assert (EXIT_INTERRUPTED, "", "interrupted\n") == (reader.returncode, out, err)


@pytest.mark.parametrize("command", ["explain", "whatif", "calibrate"])
def test_an_error_naming_a_long_path_is_one_line_through_a_pipe(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Standard error is a pipe here (200 columns): each message stays one line, so a
    path longer than that is still whole (a script can grep it)."""
    missing = tmp_path / ("d" * 230) / "missing.jsonl"
    assert 2 == main([command, str(missing)])
    lines = capsys.readouterr().err.splitlines()
    assert [True] == [str(missing) in line for line in lines], lines


def test_explain_on_a_file_that_is_no_trace_says_so_once(explain: Explain) -> None:
    """A Python file (a CSV, anything) is named as not a trace file, in one line,
    instead of one JSON error per kind of line."""
    from seamscope.cli import _learn

    source = Path(_learn.__file__)
    code, out, err = explain(str(source))
    assert (2, "") == (code, out)
    assert [
        f"error: {source} is not a trace file: no line of it is an OTLP-JSON export request "
        '(one {"resourceSpans": [...]} per line, as configure(trace_file=...) and seamscope '
        "demo --output write)"
    ] == err.splitlines()


def test_garbage_lines_before_the_first_request_are_still_named(
    tmp_path: Path, demo_trace: Path, explain: Explain
) -> None:
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text("not json\n" + demo_trace.read_text(encoding="utf-8"), encoding="utf-8")
    code, out, err = explain(str(mixed))
    assert 1 == code and "turn 1" in out
    assert err.startswith(f"error: {mixed}:1: not valid JSON")
