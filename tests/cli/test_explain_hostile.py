"""Hostile files never crash explain: each bad line or span is named, the rest shown."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from seamscope.explain import _otlp
from seamscope.telemetry import conventions as c

from ._support import any_value, export_line, span, turn, write_lines
from .conftest import Explain

_GOOD = "1" * 32  # the good turn beside the bad one


def _file(tmp_path: Path, *lines: str) -> Path:
    return write_lines(tmp_path / "hostile.jsonl", [export_line(turn(_GOOD)), *lines])


def _both_formats(explain: Explain, path: Path) -> tuple[int, str, str]:
    """Text and JSON agree on the exit code and the named problems; JSON stays strict."""
    code, out, err = explain(str(path))
    json_code, json_out, json_err = explain(str(path), "--format", "json")
    assert (code, err) == (json_code, json_err)
    json.loads(json_out, parse_constant=lambda name: pytest.fail(f"not strict JSON: {name}"))
    return code, out, err


def test_a_span_that_is_its_own_parent(tmp_path: Path, explain: Explain) -> None:
    spans = turn("2" * 32)
    looped = span("00000000000000ee", c.SPAN_STAGE, parent="00000000000000ee", trace_id="2" * 32)
    code, out, err = _both_formats(explain, _file(tmp_path, export_line([*spans, looped])))
    assert 1 == code
    where = tmp_path / "hostile.jsonl"
    assert f"error: {where}:2: span 00000000000000ee: is its own parent; span skipped\n" == err
    assert 2 == out.count("· conversation conv-1 ·")


def test_a_parent_cycle(tmp_path: Path, explain: Explain) -> None:
    cycle = [
        span("00000000000000e1", "a", parent="00000000000000e2", trace_id="3" * 32),
        span("00000000000000e2", "b", parent="00000000000000e1", trace_id="3" * 32),
    ]
    code, _, err = _both_formats(explain, _file(tmp_path, export_line(cycle)))
    assert 1 == code
    assert 2 == err.count("is in or under a parent cycle; span skipped")


def test_json_nested_100000_deep(tmp_path: Path, explain: Explain) -> None:
    deep = '{"resourceSpans": ' + "[" * 100_000 + "]" * 100_000 + "}"
    code, out, err = _both_formats(explain, _file(tmp_path, deep))
    assert 1 == code
    assert f"error: {tmp_path / 'hostile.jsonl'}:2: not readable: JSON nested too deeply\n" == err
    assert "turn 1 · conversation conv-1" in out


def test_a_5000_span_parent_chain_of_iterations(tmp_path: Path, explain: Explain) -> None:
    trace = "4" * 32
    chain = [span(f"{n + 1:016x}", c.SPAN_ITERATION, parent=f"{n:016x}" if n else None,
                  trace_id=trace, start=n + 1, attrs={c.ATTR_ITERATION_INDEX: n})
             for n in range(5_000)]  # fmt: skip
    code, out, err = _both_formats(explain, _file(tmp_path, export_line(chain)))
    assert (0, "") == (code, err)
    assert "iteration 4999" in out


def test_a_deep_array_value(tmp_path: Path, explain: Explain) -> None:
    value: dict[str, object] = {"stringValue": "x"}
    for _ in range(200):
        value = {"arrayValue": {"values": [value]}}
    stage = {c.ATTR_STAGE_NAME: "policy", c.ATTR_STAGE_OUTCOME: "select"}
    spans = turn("5" * 32, stage=stage)
    spans[0]["attributes"].append({"key": c.ATTR_STAGE_DROPPED, "value": value})
    code, out, err = _both_formats(explain, _file(tmp_path, export_line(spans)))
    assert 1 == code
    assert (
        f"{tmp_path / 'hostile.jsonl'}:2: span 555555555555{3:04x}: attribute "
        f"{c.ATTR_STAGE_DROPPED}: nested deeper than {_otlp.MAX_VALUE_DEPTH} levels; ignored"
    ) in err
    assert 2 == out.count("policy         select")


@pytest.mark.parametrize(
    "raw",
    [
        {"intValue": "9" * 30},  # past 64 bits
        {"intValue": 1e400},  # a JSON number that is not an integer
        {"doubleValue": "Infinity"},
        {"doubleValue": "NaN"},
        {"doubleValue": 10**400},
    ],
)
def test_numbers_out_of_range(raw: dict[str, object], tmp_path: Path, explain: Explain) -> None:
    gate = span("6" * 12 + "00ff", c.SPAN_OFFLOAD_GATE, parent="6" * 12 + "0001",
                trace_id="6" * 32, raw_attrs=[
                    {"key": c.ATTR_OFFLOAD_REASON_CODE, "value": {"stringValue": "net_positive"}},
                    {"key": c.ATTR_OFFLOAD_NET_SAVING_USD, "value": raw},
                    {"key": c.ATTR_OFFLOAD_OUTPUT_TOKENS, "value": raw},
                ])  # fmt: skip
    line = export_line([*turn("6" * 32), gate])
    if raw.get("intValue") == 1e400:
        line = line.replace('"intValue":Infinity', '"intValue":1e400')
    code, out, err = _both_formats(explain, _file(tmp_path, line))
    assert 1 == code
    assert 2 == err.count("; ignored")
    assert (
        "offload_gate no fire net ? = saving ? − stub carry ? − expected recall ?\n"
        "        (? tok, H=?, p=?, ?, ?)\n"
    ) in out


def test_a_number_too_long_for_python(tmp_path: Path, explain: Explain) -> None:
    line = export_line(turn("7" * 32)).replace('"intValue":"1200"', '"intValue":' + "9" * 5000)
    code, out, err = _both_formats(explain, _file(tmp_path, line))
    assert 1 == code
    assert "hostile.jsonl:2: not readable: Exceeds the limit (4300 digits)" in err
    assert 1 == out.count("· conversation conv-1 ·")


def test_missing_and_wrongly_typed_fields_in_text_mode(tmp_path: Path, explain: Explain) -> None:
    trace = "8" * 32
    spans = turn(trace)
    spans[0]["attributes"] = [  # the stage: no name, an outcome that is a number
        {"key": c.ATTR_STAGE_OUTCOME, "value": {"intValue": "3"}},
        {"key": c.ATTR_STAGE_DROPPED, "value": {"boolValue": True}},
    ]
    spans[2]["attributes"].append({"key": c.ATTR_GEN_AI_REQUEST_MODEL, "value": {"boolValue": 1}})
    dispatch = span("8" * 12 + "00d1", c.SPAN_DISPATCH, parent="8" * 12 + "00d0", trace_id=trace)
    post = span("8" * 12 + "00d0", c.SPAN_SEAM_POST_MODEL, parent="8" * 12 + "0001", trace_id=trace)
    gate = span("8" * 12 + "00d2", c.SPAN_OFFLOAD_GATE, parent="8" * 12 + "0001", trace_id=trace)
    no_name = {k: v for k, v in span("8" * 12 + "00d3", "x", trace_id=trace).items()
               if k != "name"}  # fmt: skip
    bad_id = span("not-hex", "y", trace_id=trace)
    line = export_line([*spans, post, dispatch, gate, no_name, bad_id, "not an object"])  # type: ignore[list-item]
    code, out, err = _both_formats(explain, _file(tmp_path, line))
    assert 1 == code
    assert "span 8888888888880" + "0d3: the span has no name; span skipped" in err
    assert "span not-hex: spanId is not a 16-digit hex id ('not-hex'); span skipped" in err
    assert "hostile.jsonl:2: the span is not an object; span skipped" in err
    assert "?              3       " in out  # the stage without a name
    assert "post_model  ? as emitted" in out
    assert "offload_gate no fire  ? " in out


def test_a_50_mb_attribute_costs_its_parse_and_nothing_after(
    tmp_path: Path, explain: Explain
) -> None:
    huge = "x" * 50_000_000
    spans = turn("9" * 32, stage={c.ATTR_STAGE_REASON: huge})
    code, out, err = _both_formats(explain, _file(tmp_path, export_line(spans)))
    assert (0, "") == (code, err)
    reason = next(line for line in out.splitlines() if "policy         select  xxx" in line)
    limit = _otlp.MAX_STRING_CHARS
    assert f"x… ({50_000_000 - limit} more characters)" in reason
    assert len(reason) < limit + 200


def test_a_line_too_long_to_read_is_skipped_unread(
    tmp_path: Path, explain: Explain, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_otlp, "MAX_LINE_CHARS", 10_000)
    long_line = export_line(turn("a" * 32, stage={c.ATTR_STAGE_REASON: "y" * 30_000}))
    code, out, err = _both_formats(explain, _file(tmp_path, long_line))
    assert 1 == code
    assert "hostile.jsonl:2: line longer than 10000 characters; skipped\n" in err
    assert 1 == out.count("· conversation conv-1 ·")


def test_markup_and_control_characters_in_names_print_as_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from seamscope.cli import main

    stage = {c.ATTR_STAGE_NAME: "[red]x[/]", c.ATTR_STAGE_REASON: "a\x1b[2Jb\nc[/bold]"}
    path = _file(tmp_path, export_line(turn("b" * 32, stage=stage)))
    picture = tmp_path / "t.svg"
    assert 0 == main(["explain", str(path), "--svg", str(picture)])  # the rich path
    out = capsys.readouterr().out
    assert "[red]x[/]" in out
    assert "a\\x1b[2Jb\\x0ac[/bold]" in out
    assert "\x1b" not in out


def test_every_value_type_decodes_without_raising() -> None:
    raws = [any_value(v) for v in ("s", True, 3, 2.5, ["a", 1])]
    raws += [{"kvlistValue": {"values": [{"key": "k", "value": {"stringValue": "v"}}]}}]
    raws += [{"bytesValue": "AAEC"}, {}, {"unknown": 1}, "bare", 7, 1.5, None, [1]]
    values = _otlp.Values({str(n): raw for n, raw in enumerate(raws)}, [], None)
    assert [
        ("0", "s"), ("1", True), ("2", 3), ("3", 2.5), ("4", ("a", 1)), ("5", {"k": "v"}),
        ("6", "AAEC"), ("7", None), ("8", None), ("9", "bare"), ("10", 7), ("11", 1.5),
        ("12", None), ("13", None),
    ] == values.items()  # fmt: skip


def test_compacted_values_read_as_the_file_has_them() -> None:
    raws = {
        "s": {"stringValue": "x" * 5000},
        "b": {"boolValue": True},
        "i": {"intValue": "7"},
        "d": {"doubleValue": 0.5},
        "inf": {"doubleValue": "Infinity"},
        "a": {"arrayValue": {"values": [{"stringValue": "p"}, {"stringValue": "q"}]}},
        "kv": {"kvlistValue": {"values": [{"key": "k", "value": {"intValue": 1}}]}},
        "big": {"intValue": "9" * 30},
    }
    compacted = {k: dict(v) for k, v in raws.items()}
    _otlp.compact(compacted)
    assert ["s", "b", "i", "d", "a"] == [k for k in raws if type(compacted[k]) is not dict]
    for attributes in (raws, compacted):
        sink: list[_otlp.Problem] = []
        a = _otlp.Values(attributes, sink, None)
        assert (a.text("s") or "").endswith("… (2952 more characters)")
        assert (True, 7, 0.5, None, ["p", "q"]) == (
            a.flag("b"), a.number("i"), a.number("d"), a.number("inf"), a.texts("a")
        )  # fmt: skip
        assert ({"k": 1}, None) == (a.value("kv"), a.number("big"))
        assert ["doubleValue is not finite", "intValue is out of the 64-bit range"] == [
            p.message.split(": ", 1)[1].removesuffix("; ignored") for p in sink
        ]


def test_a_span_id_that_is_not_a_string_never_reaches_the_output(
    tmp_path: Path, explain: Explain
) -> None:
    """Found by the fuzzer: a span whose ``spanId`` is ``[[Infinity]]`` was named by
    that raw value, and ``--format json`` wrote ``Infinity`` (not strict JSON)."""
    bad = {"traceId": "3" * 32, "spanId": [[float("inf")]], "name": c.SPAN_ITERATION}
    line = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [bad]}]}]})
    code, _, err = _both_formats(explain, _file(tmp_path, line))
    assert 1 == code
    assert "spanId is not a 16-digit hex id (list)" in err
