"""The PromQL text helpers the end-to-end tests rely on (no processes)."""

from __future__ import annotations

import pytest

from ._promql import parse_duration, split_threshold, substitute_grafana_variables


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("up > 0", ("up", "> 0")),
        (
            "sum(rate(x[5m])) / sum(rate(y[5m])) >= 0.05",
            ("sum(rate(x[5m])) / sum(rate(y[5m]))", ">= 0.05"),
        ),
        ("(a / (b > 0.10))\n< 0.5\n", ("(a / (b > 0.10))", "< 0.5")),
        ('x{l!="a>b", m=~"<"} != 1e-3', ('x{l!="a>b", m=~"<"}', "!= 1e-3")),
        ("a > bool 2", ("a", "> bool 2")),
        ("a > 1 < 5", ("a > 1", "< 5")),
        ("a # not > 3 here\n> 4", ("a # not > 3 here", "> 4")),
        ("x == -0.5", ("x", "== -0.5")),
    ],
)
def test_split_threshold(expr: str, expected: tuple[str, str]) -> None:
    assert expected == split_threshold(expr)


@pytest.mark.parametrize(
    "expr",
    [
        "sum(rate(x[5m]))",  # no comparison
        "(a > 0)",  # only a nested one
        "a > b",  # not against a number
        "a > (0.5)",
        "> 1",
        "(a > 1",
    ],
)
def test_split_threshold_rejects(expr: str) -> None:
    with pytest.raises(ValueError):
        split_threshold(expr)


def test_substitute_grafana_variables() -> None:
    expr = "rate(x[$__rate_interval]) + rate(y[${__rate_interval}])"
    assert "rate(x[30s]) + rate(y[30s])" == substitute_grafana_variables(
        expr, {"__rate_interval": "30s"}
    )
    with pytest.raises(KeyError):
        substitute_grafana_variables("rate(x[$__range])", {"__rate_interval": "30s"})


@pytest.mark.parametrize(
    ("text", "seconds"), [("1m", 60), ("15m", 900), ("1h30m", 5400), ("500ms", 0.5)]
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert seconds == parse_duration(text)
    with pytest.raises(ValueError):
        parse_duration("1 minute")
