"""``explain --trace-id`` skips, unparsed, the lines that cannot hold the trace (none of
the forms of its id is in them), and still numbers the turn as a whole read does."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from seamscope.explain._otlp import id_needles
from seamscope.explain._traces import Collector

from ._support import export_line, turn, write_lines
from .conftest import Explain

A, B, C, D = (f"{n}" * 8 + "0" * 24 for n in "abcd")
JUNK = "this line is not JSON"


def _file(tmp_path: Path, *, encode: dict[str, str] | None = None) -> Path:
    """Three turns of conv-1 (A, B, C in start order), one of conv-2 (D), one bad line;
    each turn on a line of its own, written last-first. ``encode``: the id as the file
    writes it (base64, upper case) for some traces."""
    encode = encode or {}
    lines = [JUNK]
    for trace, conversation, start in ((C, "conv-1", 3_000), (D, "conv-2", 2_500)):
        lines.append(export_line(turn(trace, conversation=conversation, start=start)))
    for trace, start in ((B, 2_000), (A, 1_000)):
        lines.append(export_line(turn(trace, conversation="conv-1", start=start)))
    text = "\n".join(lines)
    for trace, written in encode.items():
        text = text.replace(f'"traceId": "{trace}"', f'"traceId": "{written}"')
        text = text.replace(f'"traceId":"{trace}"', f'"traceId":"{written}"')
    return write_lines(tmp_path / "turns.jsonl", text.splitlines())


def test_lines_without_the_id_are_not_parsed_and_the_turn_keeps_its_number(
    tmp_path: Path, explain: Explain
) -> None:
    path = _file(tmp_path)
    code, _, err = explain(str(path))
    assert 1 == code and f"{path}:1: not valid JSON" in err  # a whole read names the bad line
    code, out, err = explain(str(path), "--trace-id", C[:10])
    assert (0, "") == (code, err)  # the bad line holds no form of C's id: never parsed
    assert out.startswith("turn 3 · conversation conv-1")
    code, out, _ = explain(str(path), "--trace-id", D[:10], "--format", "json")
    assert [(D, 1)] == [(t["trace_id"], t["turn"]) for t in json.loads(out)["turns"]]


def test_the_collector_skips_exactly_the_lines_without_a_form_of_the_id(tmp_path: Path) -> None:
    finished: list[str] = []
    collector = Collector(
        lambda info, spans: finished.append(info.trace_id),
        keep=lambda t: t.startswith(B[:8]),
        report=lambda problem: None,
    )
    with open(_file(tmp_path), encoding="utf-8") as handle:
        collector.read(handle, needles=id_needles(B[:8]))
    assert (4, [B]) == (collector.skipped, finished)
    assert [B] == list(collector.traces)


def test_ids_written_in_base64_or_upper_case_are_found(tmp_path: Path, explain: Explain) -> None:
    written = {
        C: base64.b64encode(bytes.fromhex(C)).decode("ascii"),
        B: B.upper(),
    }
    path = _file(tmp_path, encode=written)
    code, out, _ = explain(str(path), "--trace-id", C[:12])
    assert 0 == code and out.startswith("turn 3 · conversation conv-1")
    code, out, _ = explain(str(path), "--trace-id", B[:12])
    assert 0 == code and out.startswith("turn 2 · conversation conv-1")


def test_a_prefix_too_short_for_a_base64_needle_reads_every_line(
    tmp_path: Path, explain: Explain
) -> None:
    assert id_needles("c" * 5) is None
    code, out, err = explain(str(_file(tmp_path)), "--trace-id", "c" * 5)
    assert 1 == code and "not valid JSON" in err
    assert out.startswith("turn 3 · conversation conv-1")
