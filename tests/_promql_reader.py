"""A small PromQL reader for the rule and runbook checks: enough to list the
series, matchers and grouping labels an expression uses. It fails loudly on
anything it does not know."""

from __future__ import annotations

import re

__all__ = ["AGGREGATIONS", "FUNCTIONS", "PromQLUse"]

AGGREGATIONS = frozenset(
    [
        "sum",
        "avg",
        "min",
        "max",
        "count",
        "group",
        "stddev",
        "stdvar",
        "topk",
        "bottomk",
        "quantile",
        "count_values",
    ]
)
FUNCTIONS = AGGREGATIONS | frozenset(
    [
        "abs",
        "absent",
        "absent_over_time",
        "avg_over_time",
        "ceil",
        "changes",
        "clamp",
        "clamp_max",
        "clamp_min",
        "count_over_time",
        "delta",
        "deriv",
        "floor",
        "histogram_quantile",
        "idelta",
        "increase",
        "irate",
        "label_join",
        "label_replace",
        "last_over_time",
        "max_over_time",
        "min_over_time",
        "predict_linear",
        "quantile_over_time",
        "rate",
        "resets",
        "round",
        "scalar",
        "sort",
        "sort_desc",
        "sum_over_time",
        "time",
        "timestamp",
        "vector",
    ]
)
GROUPING = frozenset(["by", "without", "on", "ignoring", "group_left", "group_right"])
KEYWORDS = frozenset(["and", "or", "unless", "bool", "offset", "atan2", "Inf", "NaN", "inf", "nan"])

_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
  | (?P<comment>\#[^\n]*)
  | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
  | (?P<number>\d[\w.]*|\.\d[\w.]*)
  | (?P<ident>[A-Za-z_:][\w:]*)
  | (?P<op>=~|!~|!=|==|>=|<=|[-+*/%^<>=,(){}\[\]@])
    """,
    re.VERBOSE,
)


def _tokens(expr: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(expr):
        match = _TOKEN.match(expr, pos)
        if match is None:
            raise ValueError(f"cannot read PromQL at {expr[pos : pos + 30]!r}")
        pos = match.end()
        kind = match.lastgroup
        assert kind is not None
        if kind not in ("space", "comment"):
            out.append((kind, match.group()))
    return out


class PromQLUse:
    """The series, label matchers and grouping labels one expression uses."""

    def __init__(self, expr: str) -> None:
        self.series: set[str] = set()
        self.functions: set[str] = set()
        # (series name or None, label, operator, value)
        self.matchers: list[tuple[str | None, str, str, str]] = []
        self.grouping: set[str] = set()
        self._read(_tokens(expr))

    def _read(self, toks: list[tuple[str, str]]) -> None:
        i = 0
        while i < len(toks):
            kind, text = toks[i]
            nxt = toks[i + 1][1] if i + 1 < len(toks) else ""
            if kind == "ident" and text in GROUPING:
                if nxt == "(":
                    i = self._label_list(toks, i + 2)
                    continue
            elif kind == "ident" and text in KEYWORDS:
                pass
            elif kind == "ident" and (nxt == "(" or text in AGGREGATIONS):
                if text not in FUNCTIONS:
                    raise ValueError(f"unknown PromQL function {text!r}")
                self.functions.add(text)
            elif kind == "ident":
                self.series.add(text)
                if nxt == "{":
                    i = self._selector(toks, i + 2, text)
                    continue
            elif text == "{":
                i = self._selector(toks, i + 1, None)
                continue
            elif text == "[":
                while toks[i][1] != "]":
                    i += 1
            i += 1

    def _label_list(self, toks: list[tuple[str, str]], i: int) -> int:
        while toks[i][1] != ")":
            if toks[i][0] == "ident":
                self.grouping.add(toks[i][1])
            i += 1
        return i + 1

    def _selector(self, toks: list[tuple[str, str]], i: int, series: str | None) -> int:
        while toks[i][1] != "}":
            if toks[i][1] == ",":
                i += 1
                continue
            (k_kind, label), (_, op), (v_kind, value) = toks[i : i + 3]
            if k_kind != "ident" or v_kind != "string":
                raise ValueError(f"cannot read matcher {label}{op}{value}")
            self.matchers.append((series, label, op, value[1:-1]))
            i += 3
        return i + 1
