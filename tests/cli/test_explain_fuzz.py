"""Fuzzing the reader: whatever a file holds, explain returns an exit code.

Files are drawn from OTLP-shaped requests (seamscope's own span names and
attribute keys, ids from a small pool so that spans repeat, loop and
orphan) with any part replaced by other JSON, cut short or garbled. The
run is bounded by example count, so CI spends a few seconds on it; raise
``SEAMSCOPE_FUZZ_EXAMPLES`` for a longer run.
"""

from __future__ import annotations

import io
import json
import os
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

from seamscope.cli._explain import Options, explain
from seamscope.explain import _traces
from seamscope.explain._otlp import LineReader, Values
from seamscope.telemetry import conventions as c

EXAMPLES = int(os.environ.get("SEAMSCOPE_FUZZ_EXAMPLES", "150"))

_TRACES = ["0" * 31 + "1", "ab" * 16, "AB" * 16, "q83sBMQgp0xwzsS4P4WJ0A=="]
_SPANS = ["00000000000000a1", "00000000000000a2", "00000000000000a3", "AAAAAAAAAAE="]
_NAMES = [*c.SPANS, "invoke_agent analyst", "chat m", "execute_tool t", "GET /"]
_KEYS = [*c.ATTRIBUTES, "http.route", ""]

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


def _any_values() -> st.SearchStrategy[Any]:
    scalar = st.one_of(
        st.builds(lambda s: {"stringValue": s}, st.text(max_size=30) | json_values),
        st.builds(lambda b: {"boolValue": b}, st.booleans() | json_values),
        st.builds(
            lambda i: {"intValue": i},
            st.integers(min_value=-(2**70), max_value=2**70).map(str) | json_values,
        ),
        st.builds(
            lambda d: {"doubleValue": d},
            st.floats() | st.sampled_from(["Infinity", "-Infinity", "NaN", "x"]),
        ),
        st.builds(lambda b: {"bytesValue": b}, st.text(max_size=8)),
        json_values,
    )
    return st.recursive(
        scalar,
        lambda inner: (
            st.builds(lambda vs: {"arrayValue": {"values": vs}}, st.lists(inner, max_size=3))
            | st.builds(
                lambda kvs: {"kvlistValue": {"values": [{"key": k, "value": v} for k, v in kvs]}},
                st.lists(st.tuples(st.text(max_size=5), inner), max_size=3),
            )
        ),
        max_leaves=6,
    )


_attribute = st.builds(lambda k, v: {"key": k, "value": v}, st.sampled_from(_KEYS), _any_values())
_event = st.builds(
    lambda name, attrs: {"name": name, "attributes": attrs},
    st.sampled_from([c.EVENT_POLICY_EVALUATED, c.EVENT_ADOPTER_ERROR, "other"]) | json_values,
    st.lists(_attribute, max_size=3) | json_values,
)


def _maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return strategy | json_values  # any field may be replaced by other JSON


_span = st.fixed_dictionaries(
    {
        "traceId": _maybe(st.sampled_from(_TRACES)),
        "spanId": _maybe(st.sampled_from(_SPANS)),
        "name": _maybe(st.sampled_from(_NAMES)),
    },
    optional={
        "parentSpanId": _maybe(st.sampled_from(["", *_SPANS])),
        "startTimeUnixNano": _maybe(st.integers(min_value=-1, max_value=2**65).map(str)),
        "endTimeUnixNano": _maybe(st.integers(min_value=0, max_value=2**64).map(str)),
        "attributes": _maybe(st.lists(_attribute, max_size=6)),
        "events": _maybe(st.lists(_event, max_size=2)),
        "status": _maybe(st.fixed_dictionaries({"code": st.integers(0, 3) | json_values})),
    },
)


def _request(spans: list[Any], service: Any) -> str:
    resource = {"attributes": [{"key": "service.name", "value": service}]}
    request = {"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": spans}]}]}
    return json.dumps(request)


_line = st.one_of(
    st.builds(_request, st.lists(_span | json_values, max_size=6), _any_values()),
    st.builds(json.dumps, json_values),
    st.text(max_size=40),
    st.builds(
        lambda s, n: s[:n],
        st.builds(_request, st.lists(_span, max_size=3), _any_values()),
        st.integers(0, 400),
    ),
)


def _console(record: bool = False) -> Console:
    return Console(file=io.StringIO(), width=120, record=record, highlight=False)


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    lines=st.lists(_line, max_size=8),
    fmt=st.sampled_from(["text", "json", "rich"]),
    tool=st.none() | st.sampled_from(["t", "fetch_data"]),
    trace_id=st.none() | st.sampled_from(["0", "ab"]),
    early=st.booleans(),
)
def test_explain_returns_an_exit_code_whatever_the_file_holds(
    lines: list[str], fmt: str, tool: str | None, trace_id: str | None, early: bool
) -> None:
    text = "\n".join(lines) + "\n"
    options = Options(format="json" if fmt == "json" else "text", tool=tool, trace_id=trace_id)
    out, err = _console(record=fmt == "rich"), _console()
    saved = _traces.IDLE_LINES, _traces.OPEN_BYTES
    if early:  # finish every trace at once: late spans, the second pass
        _traces.IDLE_LINES, _traces.OPEN_BYTES = 1, 1
    try:
        outcome = explain("fuzz", io.StringIO(text), options, out, err, lambda: io.StringIO(text))
    finally:
        _traces.IDLE_LINES, _traces.OPEN_BYTES = saved
    assert outcome.code in (0, 1, 2)
    if fmt == "json" and outcome.code != 2:
        written = out.file.getvalue()  # type: ignore[attr-defined]
        json.loads(written, parse_constant=lambda name: (_ for _ in ()).throw(ValueError(name)))


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.text(max_size=200) | st.builds(json.dumps, json_values))
def test_the_line_reader_never_raises(text: str) -> None:
    spans, _, _ = LineReader().read(1, text)
    for span in spans:
        values = Values(span.attributes, [], span)
        values.items()
        for key in span.attributes:
            if isinstance(key, str):
                values.text(key), values.number(key), values.flag(key), values.texts(key)
