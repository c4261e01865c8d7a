"""explain on real files: repeated batches, traces in pieces, foreign traces, big files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from seamscope.cli._explain import Options, explain
from seamscope.cli._render import plain_settlements, render_settlements
from seamscope.explain import _traces
from seamscope.telemetry import conventions as c

from ._support import export_line, span, turn, write_lines
from .conftest import Explain


def _trees(out: str) -> str:
    return out.split("offload economics")[0]


def _spans_of(path: Path) -> list[dict[str, Any]]:
    return [
        s
        for line in path.read_text(encoding="utf-8").splitlines()
        for rs in json.loads(line)["resourceSpans"]
        for ss in rs["scopeSpans"]
        for s in ss["spans"]
    ]


def _console(buffer: Any, width: int = 200, **kwargs: Any) -> Console:
    return Console(file=buffer, width=width, highlight=False, soft_wrap=False, **kwargs)


# --------------------------------------------------------------------------
# Repeated spans
# --------------------------------------------------------------------------


@pytest.mark.parametrize("copies", [2, 8, 60])
def test_a_resent_batch_is_merged_and_the_duplicates_counted(
    copies: int, demo_trace: Path, tmp_path: Path, explain: Explain
) -> None:
    once = explain(str(demo_trace))
    text = demo_trace.read_text(encoding="utf-8")
    spans = len(_spans_of(demo_trace))
    repeated = tmp_path / "repeated.jsonl"
    repeated.write_text(text * copies, encoding="utf-8")

    code, out, err = explain(str(repeated))

    assert (0, "") == (code, err)
    assert _trees(once[1]) == _trees(out)
    assert once[1].count("│ off-") == out.count("│ off-")  # settlements merged too
    assert f"{spans * (copies - 1)} duplicate spans dropped" in out
    code, out, _ = explain(str(repeated), "--format", "json")
    assert spans * (copies - 1) == json.loads(out)["duplicates_dropped"]


def test_a_trace_cut_across_lines_in_any_order_is_shown_whole(
    tmp_path: Path, explain: Explain
) -> None:
    spans = turn()
    root, rest = spans[-1], spans[:-1]
    whole = write_lines(tmp_path / "whole.jsonl", [export_line(spans)])
    # the root first, its children later, one per line, with other lines between
    pieces = [export_line([root])] + [export_line([s]) for s in rest]
    padding = [export_line(turn(f"{n:032x}", conversation=f"other-{n}")) for n in range(1, 40)]
    scattered = write_lines(tmp_path / "scattered.jsonl", [pieces[0], *padding, *pieces[1:]])

    expected = explain(str(whole))[1]
    code, out, _ = explain(str(scattered), "--conversation", "conv-1")
    assert 0 == code
    assert expected == out


@pytest.mark.parametrize("idle_lines, open_bytes", [(1, 1), (2, 10_000), (1_000, 1)])
def test_finishing_traces_early_never_changes_what_is_shown(
    idle_lines: int,
    open_bytes: int,
    demo_trace: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    explain: Explain,
) -> None:
    # the demo's spans one per line, reversed: every root comes before its children
    spans = _spans_of(demo_trace)
    reversed_file = write_lines(tmp_path / "rev.jsonl", [export_line([s]) for s in spans[::-1]])
    expected = explain(str(demo_trace))[1]
    monkeypatch.setattr(_traces, "IDLE_LINES", idle_lines)
    monkeypatch.setattr(_traces, "OPEN_BYTES", open_bytes)
    code, out, err = explain(str(reversed_file))
    assert (0, "") == (code, err)
    assert expected == out


def test_memory_follows_the_open_traces_not_the_file(tmp_path: Path) -> None:
    """A file of 300 turns: at no time are more than a few traces' spans held."""
    lines = [export_line(turn(f"{n + 1:032x}", conversation=f"c{n}")) for n in range(300)]
    path = write_lines(tmp_path / "many.jsonl", lines)
    held: list[int] = []

    def finish(info: Any, records: Any) -> None:
        held.append(sum(len(o.spans) for o in collector._open.values()) + len(records))

    collector = _traces.Collector(finish, report=lambda p: None)
    with path.open(encoding="utf-8") as handle:
        collector.read(handle)
    assert 300 == len(held)
    assert max(held) <= 5  # one turn's spans: the trace being finished


def test_the_plain_table_is_the_rich_table(demo_trace: Path) -> None:
    import io

    buffer = io.StringIO()
    outcome = explain(
        str(demo_trace),
        demo_trace.open(encoding="utf-8"),
        Options(turns=False),
        _console(buffer),
        _console(io.StringIO()),
    )
    rich_buffer = io.StringIO()
    _console(rich_buffer).print(render_settlements(outcome.settlements))
    assert rich_buffer.getvalue() == "\n".join(plain_settlements(outcome.settlements)) + "\n"
    assert 3 == len(outcome.settlements)


def test_a_terminal_shows_the_same_trees_as_a_pipe(demo_trace: Path) -> None:
    """The same characters, as long as no line is wider than the terminal."""
    import io

    plain, rich_out = io.StringIO(), io.StringIO()
    for buffer, record in ((plain, False), (rich_out, True)):
        with demo_trace.open(encoding="utf-8") as handle:
            explain(
                str(demo_trace),
                handle,
                Options(),
                _console(buffer, width=1000, record=record),
                _console(io.StringIO()),
            )
    assert plain.getvalue() == rich_out.getvalue()


# --------------------------------------------------------------------------
# Foreign traces
# --------------------------------------------------------------------------

_HEALTHZ = "5f3c2a1b00000000000000000000beef"


def _with_healthz(tmp_path: Path) -> Path:
    healthz = [
        span("00000000000000a2", "SELECT 1", parent="00000000000000a1", trace_id=_HEALTHZ,
             start=10, end=3_000_010, attrs={"db.system": "postgresql"}),
        span("00000000000000a1", "GET /healthz", trace_id=_HEALTHZ, start=5, end=4_000_005,
             attrs={"http.route": "/healthz", "http.response.status_code": 500}, status=2),
    ]  # fmt: skip
    return write_lines(tmp_path / "mixed.jsonl", [export_line(turn()), export_line(healthz)])


def test_a_trace_without_decisions_is_counted_and_named(tmp_path: Path, explain: Explain) -> None:
    code, out, _ = explain(str(_with_healthz(tmp_path)))
    assert 0 == code
    assert "turn 1 · conversation conv-1" in out
    assert (
        "1 trace without seamscope decisions, not shown (5f3c2a1b… GET /healthz); "
        "--trace-id ID prints one as its span tree"
    ) in out
    code, out, _ = explain(str(_with_healthz(tmp_path)), "--format", "json")
    assert {"count": 1, "trace_ids": [_HEALTHZ]} == json.loads(out)["traces_without_decisions"]


def test_trace_id_on_a_trace_without_decisions_prints_its_span_tree(
    tmp_path: Path, explain: Explain
) -> None:
    code, out, _ = explain(str(_with_healthz(tmp_path)), "--trace-id", "5f3c2a1b")
    assert 0 == code
    assert "no matching turns" not in out
    assert [
        f"trace {_HEALTHZ} · 2 spans · service checkout · no seamscope decisions",
        "└── GET /healthz  4 ms  ERROR  http.route=/healthz  http.response.status_code=500",
        "    └── SELECT 1  3 ms  db.system=postgresql",
    ] == out.splitlines()[:3]
    code, out, _ = explain(str(_with_healthz(tmp_path)), "--trace-id", _HEALTHZ, "--format", "json")
    (tree,) = json.loads(out)["span_trees"]
    assert ["GET /healthz", "SELECT 1"] == [row["name"] for row in tree["spans"]]


def test_a_deep_span_tree_is_cut_and_says_so(tmp_path: Path, explain: Explain) -> None:
    chain = [span(f"{n + 1:016x}", f"step {n}", parent=f"{n:016x}" if n else None,
                  trace_id=_HEALTHZ, start=n) for n in range(5_000)]  # fmt: skip
    path = write_lines(tmp_path / "chain.jsonl", [export_line(chain)])
    code, out, _ = explain(str(path), "--trace-id", _HEALTHZ)
    assert 0 == code
    assert "… 4952 spans nested deeper than 48 levels not shown" in out
    assert len(out.splitlines()) < 60


# --------------------------------------------------------------------------
# What the tree shows
# --------------------------------------------------------------------------


def test_stage_drops_kept_only_in_the_dropped_attribute_are_shown(
    tmp_path: Path, explain: Explain
) -> None:
    path = write_lines(tmp_path / "t.jsonl", [export_line(turn())])
    _, out, _ = explain(str(path))
    assert "policy         select  safety ceiling 'write'  (−1: delete_rows)" in out
    partly = {c.ATTR_STAGE_REASON: "budget (−1: send_email)", c.ATTR_STAGE_DROPPED:
              ["send_email", "delete_rows"]}  # fmt: skip
    path = write_lines(tmp_path / "t2.jsonl", [export_line(turn(stage=partly))])
    _, out, _ = explain(str(path))
    assert "policy         select  budget (−1: send_email)  (also −1: delete_rows)" in out


def test_tool_leads_with_the_answer_and_the_tree_comes_on_request(
    demo_trace: Path, explain: Explain
) -> None:
    code, out, _ = explain(str(demo_trace), "--tool", "page_oncall")
    assert 0 == code
    turn2 = out.split("\n\n")[1].splitlines()
    assert turn2[0].startswith("turn 2 · conversation demo-7 · agent analyst · trace ")
    assert (
        "├── iteration 2  page_oncall: dropped by role_palette (analyst palette (−1: "
        "page_oncall)); not selected; target of a redirect from create_ticket that the palette "
        "gate dropped"
    ) == turn2[3]
    assert 5 == len(turn2)  # the label and one line per iteration
    _, tree, _ = explain(str(demo_trace), "--tool", "page_oncall", "--tree")
    assert "│   ├── select_tools  12 offered → 3 selected" in tree
    assert "page_oncall: dropped by role_palette" in tree


def test_an_unknown_tool_is_a_usage_error_with_suggestions(
    demo_trace: Path, explain: Explain
) -> None:
    code, out, err = explain(str(demo_trace), "--tool", "page_oncal")
    assert (2, "") == (code, out)
    assert "error: no tool page_oncal in this file; did you mean page_oncall?\n" == err
    code, _, err = explain(str(demo_trace), "--tool", "nothing_like_it")
    assert (2, "error: no tool nothing_like_it in this file\n") == (code, err)
    assert (2, "", "error: --tree only goes with --tool NAME\n") == explain(
        str(demo_trace), "--tree"
    )


# --------------------------------------------------------------------------
# Exit codes and input
# --------------------------------------------------------------------------


def test_an_empty_file_or_one_without_spans_is_a_usage_error(
    tmp_path: Path, explain: Explain
) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n", encoding="utf-8")
    assert (2, "", f"error: {empty}: empty file, nothing to explain\n") == explain(str(empty))
    metrics = write_lines(tmp_path / "metrics.jsonl", ['{"resourceMetrics": []}'])
    assert (2, "", f"error: {metrics}: no readable span, nothing to explain\n") == explain(
        str(metrics)
    )


def test_trace_id_must_be_hex_and_a_prefix_must_be_unique(
    demo_trace: Path, explain: Explain, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = explain(str(demo_trace), "--trace-id", "not-hex")
    assert 2 == code
    assert "argument --trace-id: 'not-hex' is not a trace id" in err
    code, out, err = explain(str(demo_trace), "--trace-id", "7")
    assert (2, "") == (code, out)
    assert err.startswith("error: trace id prefix 7 is ambiguous: 2 traces match (7")
    assert err.endswith("); give more digits\n")
    code, _, err = explain(str(demo_trace), "--trace-id", "ffff0000")
    assert (2, f"error: no trace ffff0000 in {demo_trace}\n") == (code, err)
    trace_id = json.loads(explain(str(demo_trace), "--format", "json")[1])["turns"][1]["trace_id"]
    code, out, _ = explain(str(demo_trace), "--trace-id", trace_id.upper())
    assert 0 == code
    assert out.startswith("turn 2 · conversation demo-7")


def test_dash_reads_standard_input(
    demo_trace: Path, explain: Explain, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO(demo_trace.read_text(encoding="utf-8") * 2))
    code, out, err = explain("-")
    assert (0, "") == (code, err)
    assert _trees(explain(str(demo_trace))[1]) == _trees(out)
    assert "duplicate spans dropped" in out  # the second pass read the kept copy


def test_a_truncated_line_says_it_looks_truncated(
    demo_trace: Path, tmp_path: Path, explain: Explain
) -> None:
    good = demo_trace.read_text(encoding="utf-8")
    cut = tmp_path / "cut.jsonl"
    cut.write_text(good + good.splitlines()[0][:452] + "\n", encoding="utf-8")
    code, out, err = explain(str(cut))
    n = len(good.splitlines()) + 1
    assert 1 == code
    assert (
        f"error: {cut}:{n}: line looks truncated: the JSON stops at column 452 before the "
        "export request is complete\n"
    ) == err
    assert (4, 3) == (
        out.count("conversation demo-7 ·"),
        out.count("conversation demo-7-langchain ·"),
    )
    bad = write_lines(tmp_path / "bad.jsonl", ['{"resourceSpans": [} ]'])
    assert "not valid JSON: Expecting value (column 20)" in explain(str(bad))[2]


def test_json_output_is_one_strict_json_document(demo_trace: Path, explain: Explain) -> None:
    code, out, _ = explain(str(demo_trace), "--format", "json", "--tool", "fetch_data")

    def refuse(constant: str) -> None:
        raise AssertionError(f"not strict JSON: {constant}")

    report = json.loads(out, parse_constant=refuse)
    assert 0 == code
    assert [1, 2, 3, 4, 1, 2, 3] == [t["turn"] for t in report["turns"]]
    assert [
        ("seamscope_gate", "loss"),
        ("seamscope_gate", "gain"),
        ("context_editing", "loss"),
    ] == [(s["mechanism"], s["outcome"]) for s in report["settlements"]]
    assert "fetch_data" == report["tool"]["name"]
    first = report["tool"]["story"][0]
    assert (1, 0) == (first["turn"], first["iteration"])
    assert {"count": 0, "trace_ids": []} == report["traces_without_decisions"]
    assert 0 == report["duplicates_dropped"]
