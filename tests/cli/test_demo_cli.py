"""The demo's flags and output: SVG paths, OTLP endpoints, refused flags, quiet, stdout."""

from __future__ import annotations

import http.server
import json
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from seamscope.cli import main
from seamscope.cli._calibrate import DEFAULT_OUTPUT as DEFAULT_PRIORS
from seamscope.cli._demo import DEFAULT_OUTPUT, log_path_for
from seamscope.cli._export import Endpoint, parse_endpoint
from seamscope.cli._learn import priors_path_for
from seamscope.cli._render import LEGEND

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _demo(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["demo", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# --------------------------------------------------------------------------
# --svg
# --------------------------------------------------------------------------


def test_svg_into_a_missing_folder_creates_it(
    in_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    picture = in_tmp / "new" / "deeper" / "demo.svg"
    code, _, err = _demo(capsys, "--quiet", "--svg", str(picture))
    assert (0, "") == (code, err)
    assert picture.read_text(encoding="utf-8").startswith("<svg")


def _svg_text(picture: Path) -> str:
    """The text of an SVG rich saved: its non-breaking spaces as spaces."""
    return picture.read_text(encoding="utf-8").replace("&#160;", " ")


def test_quiet_prints_the_summary_but_the_svg_holds_the_trees(
    in_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--quiet keeps the terminal to the summary; the picture asked for with
    --svg still shows what the demo decided (the trees, the table, the summary)."""
    picture = in_tmp / "demo.svg"
    code, out, err = _demo(capsys, "--quiet", "--svg", str(picture))
    svg = _svg_text(picture)
    summary = out.splitlines()[0]
    assert (0, "", False) == (code, err, "iteration 0" in out)
    assert summary.startswith("7 turns · 7 traces · ")
    assert [True] * 4 == [
        "conversation demo-7 · agent analyst" in svg,
        "iteration 0" in svg,
        "offload economics: predicted vs realized" in svg,
        summary in svg,
    ]


def test_the_first_tree_has_a_legend_and_a_contained_error_is_a_note(
    in_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One legend line above the first tree; the gate's terms are named; the
    policy that raises does so on turn 1 only (its customer has no tier), shown
    as a note that says the seam contained it."""
    code, out, _ = _demo(capsys)
    lines = out.splitlines()
    turns = out.split("\nturn ")[1:]  # after the legend
    note = "(note, contained: policy 'vip_customer' raised KeyError, counted as no match)"
    assert (0, LEGEND, 1) == (code, lines[2], out.count(LEGEND))  # after what it writes, stages
    assert lines[3].startswith("turn 1 · conversation demo-7 ")
    assert [3, 0, 0, 0] == [turn.count(note) for turn in turns[:4]]
    assert (
        "offload_gate fire    net +$0.1790 = saving $0.1969 − stub carry $0.0010 − "
        "expected recall $0.0169"
    ) in out


def test_svg_onto_a_folder_is_a_one_line_usage_error(
    in_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _demo(capsys, "--svg", str(in_tmp))
    assert (2, "") == (code, out)
    assert f"error: --svg {in_tmp} is a folder; name the file to write\n" == err
    assert not (in_tmp / DEFAULT_OUTPUT).exists()


def test_svg_that_cannot_be_written_is_a_one_line_error(
    in_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (in_tmp / "file").write_text("", encoding="utf-8")
    code, _, err = _demo(capsys, "--quiet", "--svg", str(in_tmp / "file" / "demo.svg"))
    assert 1 == code
    assert err.startswith(f"error: cannot write the SVG {in_tmp / 'file' / 'demo.svg'}: ")
    assert 1 == len(err.splitlines())


# --------------------------------------------------------------------------
# --otlp-endpoint
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "pasted, expected",
    [
        ("localhost:4318", Endpoint("http://localhost:4318", "localhost", 4318)),
        ("http://localhost:4318/", Endpoint("http://localhost:4318", "localhost", 4318)),
        ("http://c:4318/v1/traces", Endpoint("http://c:4318", "c", 4318)),
        ("c:4318/v1/metrics/", Endpoint("http://c:4318", "c", 4318)),
        ("https://o.example/otlp/v1/traces", Endpoint("https://o.example/otlp", "o.example", 443)),
        ("http://[::1]:4318", Endpoint("http://[::1]:4318", "::1", 4318)),
    ],
)  # fmt: skip
def test_an_endpoint_as_users_paste_it(pasted: str, expected: Endpoint) -> None:
    endpoint = parse_endpoint(pasted)
    assert expected == endpoint
    assert f"{expected.base}/v1/traces" == endpoint.traces


@pytest.mark.parametrize("pasted", ["ftp://c:4318", "http://", "c:port", "http://c:99999"])
def test_an_endpoint_that_is_not_a_url_is_refused(
    pasted: str, in_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _demo(capsys, "--otlp-endpoint", pasted)
    assert (2, "") == (code, out)
    assert err.startswith(f"error: --otlp-endpoint {pasted!r}: ")
    assert [] == list(in_tmp.iterdir())


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_an_unreachable_endpoint_is_one_warning_and_a_summary_line(
    in_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port = _closed_port()
    code, out, err = _demo(capsys, "--otlp-endpoint", f"127.0.0.1:{port}", "--otlp-metrics")
    assert 0 == code
    base = f"http://127.0.0.1:{port}"
    assert f"warning: OTLP endpoint {base} is unreachable (connection refused); running " \
           "without it\n" == err  # fmt: skip
    assert (
        f"otlp: nothing sent, {base} is unreachable (connection refused); the spans are in "
        f"{DEFAULT_OUTPUT}"
    ) == out.splitlines()[-1]
    code, out, err = _demo(capsys, "--quiet", "--otlp-endpoint", f"127.0.0.1:{port}")
    assert (0, "") == (code, err)  # --quiet: the summary says it
    assert out.splitlines()[-1].startswith("otlp: nothing sent")


class _Receiver(http.server.ThreadingHTTPServer):
    status = 200
    paths: list[str]


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Receiver

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.server.paths.append(self.path)
        self.send_response(self.server.status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[_Receiver]:
    server = _Receiver(("127.0.0.1", 0), _Handler)
    server.paths = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_a_full_traces_url_is_not_doubled(
    receiver: _Receiver, in_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port = receiver.server_address[1]
    code, out, err = _demo(
        capsys, "--quiet", "--otlp-endpoint", f"127.0.0.1:{port}/v1/traces", "--otlp-metrics"
    )
    assert (0, "") == (code, err)
    assert {"/v1/traces", "/v1/metrics"} == set(receiver.paths)
    assert (
        f"otlp: 192 spans sent to http://127.0.0.1:{port}/v1/traces; metrics pushed to "
        f"http://127.0.0.1:{port}/v1/metrics"
    ) == out.splitlines()[-1]


def test_an_endpoint_that_refuses_the_spans_is_named_once_without_sdk_noise(
    receiver: _Receiver, in_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    receiver.status = 404
    port = receiver.server_address[1]
    code, out, err = _demo(capsys, "--otlp-endpoint", f"http://127.0.0.1:{port}")
    assert 0 == code
    assert (
        f"warning: OTLP export to http://127.0.0.1:{port}/v1/traces failed (HTTP 404 Not Found); "
        "not sending more\n"
    ) == err
    assert (
        f"otlp: 0 spans sent to http://127.0.0.1:{port}/v1/traces, 192 not sent "
        "(HTTP 404 Not Found)"
    ) == out.splitlines()[-1]


# --------------------------------------------------------------------------
# Flags that do nothing alone, --quiet, progress
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--linger", "5"], "--linger keeps the metrics endpoint up: it needs --metrics-port"),
        (["--otlp-metrics"], "--otlp-metrics pushes metrics to the OTLP endpoint: it needs "
                             "--otlp-endpoint"),
        (["--turns", "0"], "--turns must be >= 1"),
        (["--pace", "-1"], "--pace and --linger must be >= 0"),
    ],
)  # fmt: skip
def test_flags_that_do_nothing_alone_are_refused(
    argv: list[str], message: str, in_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (2, "", f"error: {message}\n") == _demo(capsys, *argv)
    assert [] == list(in_tmp.iterdir())


def test_quiet_prints_only_the_summary(in_tmp: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _demo(capsys, "--quiet", "--turns", "12")
    assert (0, "") == (code, err)  # no progress either
    # realized: each stub priced at the size of the stub really sent (chars / 4)
    assert [
        "12 turns · 12 traces · offloads and compactions predicted +$1.3597, realized +$0.0192",
        "  predicted: what each gate expected at its priors (H turns carried, recall chance p); "
        "realized: what the turns then did (fewer turns, more recalls, the cache): the table "
        "above has each; calibrate learns H and p from it",
        f"spans: {DEFAULT_OUTPUT}   logs: seamscope-trace.log.jsonl   explain: seamscope "
        f"explain {DEFAULT_OUTPUT}",
    ] == out.splitlines()


def test_a_long_run_shows_progress(in_tmp: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _demo(capsys, "--turns", "20")
    assert 0 == code
    lines = err.splitlines()
    assert lines[0] == "demo: 2/20 turns"
    assert lines[-1] == "demo: 18/20 turns"
    _, _, err = _demo(capsys, "--turns", "2", "--pace", "0.01")
    assert "demo: 1/2 turns\n" == err


# --------------------------------------------------------------------------
# Files: a port in use, --output -, .gitignore
# --------------------------------------------------------------------------


def test_a_port_in_use_leaves_no_empty_output_files(
    in_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, out, err = _demo(capsys, "--metrics-port", str(port))
    assert (1, "") == (code, out)
    assert err.startswith(f"error: cannot serve metrics on port {port}: ")
    assert [] == list(in_tmp.iterdir())


def test_output_dash_writes_the_spans_to_standard_output(
    in_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _demo(capsys, "--output", "-")
    assert 0 == code
    requests = [json.loads(line) for line in out.splitlines()]
    assert requests and all("resourceSpans" in r for r in requests)
    assert "turn 2 · conversation demo-7" in err  # the trees go to stderr
    assert "spans: standard output   logs: not written" in err
    assert [] == list(in_tmp.iterdir())


def test_output_dash_pipes_into_explain_dash(tmp_path: Path) -> None:
    demo = subprocess.run(
        [sys.executable, "-m", "seamscope", "demo", "--output", "-"],
        capture_output=True,
        cwd=tmp_path,
        timeout=120,
        check=True,
    )
    explained = subprocess.run(
        [sys.executable, "-m", "seamscope", "explain", "-"],
        input=demo.stdout,
        capture_output=True,
        timeout=120,
        check=True,
    )
    _writes, _staged, legend, trees = demo.stderr.decode().split("\n", 3)
    assert LEGEND == legend
    assert (
        trees.split("offload economics")[0]
        == (explained.stdout.decode().split("offload economics")[0])
    )


@pytest.mark.skipif(
    shutil.which("git") is None or not (REPO / ".git").exists(), reason="needs a git checkout"
)
def test_gitignore_covers_every_file_the_demo_writes() -> None:
    written = [
        DEFAULT_OUTPUT,
        str(log_path_for(Path(DEFAULT_OUTPUT))),
        str(priors_path_for(Path(DEFAULT_OUTPUT))),
        DEFAULT_PRIORS,
    ]
    result = subprocess.run(
        ["git", "check-ignore", "--no-index", *written],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert written == result.stdout.split()
