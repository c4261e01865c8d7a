"""Small PromQL text helpers for the end-to-end tests (no PromQL engine here)."""

from __future__ import annotations

import re

__all__ = ["parse_duration", "split_threshold", "substitute_grafana_variables"]

_COMPARISONS = ("==", "!=", ">=", "<=", ">", "<")
_NUMBER = re.compile(r"(?:bool\s+)?[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_VARIABLE = re.compile(r"\$(?:\{\s*)?(\w+)(?:\s*\})?")


def split_threshold(expr: str) -> tuple[str, str]:
    """Split ``expr`` at its top-level comparison against a number: ``(operand, "op X")``.

    Only a comparison outside every bracket, brace and string counts, and
    only the last one (PromQL comparisons are left-associative, so the last
    top-level one is the outermost). Its right-hand side must be a number
    literal (optionally ``bool X``); anything else raises :class:`ValueError`.
    A ``> 0.10`` nested in parentheses stays where it is.
    """
    depth = 0
    quote = ""
    last: tuple[int, str] | None = None
    i = 0
    while i < len(expr):
        ch = expr[i]
        if quote:
            if ch == "\\":
                i += 2
                continue
            if ch == quote:
                quote = ""
        elif ch in "\"'`":
            quote = ch
        elif ch == "#":  # a comment runs to the end of its line
            newline = expr.find("\n", i)
            i = len(expr) if newline < 0 else newline
            continue
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0:
            op = next((op for op in _COMPARISONS if expr.startswith(op, i)), None)
            if op is not None and not expr.startswith(("=~", "!~"), i):
                last = (i, op)
                i += len(op)
                continue
        i += 1
    if depth != 0 or quote:
        raise ValueError(f"unbalanced expression: {expr!r}")
    if last is None:
        raise ValueError(f"no top-level comparison in {expr!r}")
    index, op = last
    operand = expr[:index].strip()
    threshold = expr[index + len(op) :].strip()
    if not operand or not _NUMBER.fullmatch(threshold):
        raise ValueError(f"the top-level comparison is not against a number: {op} {threshold!r}")
    return operand, f"{op} {threshold}"


def substitute_grafana_variables(expr: str, values: dict[str, str]) -> str:
    """Replace ``$name`` / ``${name}``; a variable without a value raises :class:`KeyError`."""

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in values:
            raise KeyError(f"no value for Grafana variable ${name} in {expr!r}")
        return values[name]

    return _VARIABLE.sub(replace, expr)


_DURATION = re.compile(r"(\d+)(ms|s|m|h|d|w|y)")
_UNIT_SECONDS = {
    "ms": 0.001,
    "s": 1,
    "m": 60,
    "h": 3600,
    "d": 86400,
    "w": 604800,
    "y": 31536000,
}


def parse_duration(text: str) -> float:
    """A Prometheus duration (``1m``, ``1h30m``, ``500ms``) in seconds."""
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text.strip():
        raise ValueError(f"not a Prometheus duration: {text!r}")
    return sum(int(n) * _UNIT_SECONDS[u] for n, u in parts)
