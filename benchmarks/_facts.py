"""The nine decision facts, checked by value on the spans one invoke recorded.

A fact holds when some span states it with the values the scripted loop
makes: the exact tools offered and selected, which stage dropped which tools
(with a reason naming them), the PRE seam's winning policy and its model,
where the winner came from with the passed-over policy visible, the
redirect's emitted, target and final tools, the guard's and the palette's
verdicts, and the offload gate's four priced terms computed here from the
seed's formula. Keys are ``seamscope.telemetry.conventions`` constants.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from seamscope.decisions.records import (
    DEFAULT_RECALL_INPUT_TOKENS,
    DEFAULT_RECALL_OUTPUT_TOKENS,
    DEFAULT_STUB_TOKENS,
    OffloadReasonCode,
    PolicyResult,
    WinnerSource,
)
from seamscope.telemetry import conventions as c

__all__ = ["FACTS", "Expected", "Gate", "facts_of"]

FACTS = (
    "offered",
    "selected",
    "dropped with reason",
    "model winner",
    "winner source with evaluations",
    "redirect",
    "guard",
    "palette verdict",
    "offload priced terms",
)


@dataclass(frozen=True)
class Gate:
    """The offload gate call the loop makes, priced here from the seed's formula.

    Rates are USD per million tokens (input, output) of ``model``.
    """

    model: str
    tokens: int
    horizon: int
    recall_probability: float
    input_rate: float
    output_rate: float

    def terms(self) -> dict[str, float]:
        per_in, per_out = self.input_rate / 1e6, self.output_rate / 1e6
        reprefill = self.tokens * per_in * self.horizon
        stub = DEFAULT_STUB_TOKENS * per_in * self.horizon
        recall = self.recall_probability * (
            DEFAULT_RECALL_INPUT_TOKENS * per_in + DEFAULT_RECALL_OUTPUT_TOKENS * per_out
        )
        return {
            c.ATTR_OFFLOAD_REPREFILL_SAVING_USD: reprefill,
            c.ATTR_OFFLOAD_STUB_CARRY_COST_USD: stub,
            c.ATTR_OFFLOAD_EXPECTED_RECALL_HOP_COST_USD: recall,
            c.ATTR_OFFLOAD_NET_SAVING_USD: reprefill - stub - recall,
        }


@dataclass(frozen=True)
class Expected:
    """What the scripted loop decides; ``None`` where the framework has no such decision."""

    offered: frozenset[str] | None
    selected: frozenset[str] | None
    dropped: Mapping[str, frozenset[str]] | None  # stage name -> the tools it dropped
    winner: str
    model: str
    passed_over: str  # a policy evaluated (and not matched) before the winner
    emitted: str
    redirect_to: str
    guard: str
    palette: str
    gate: Gate | None
    skip: frozenset[str] = field(default_factory=frozenset)  # facts not made by this loop


def _attrs(span: Any) -> Mapping[str, Any]:
    return span.attributes or {}


def _named(spans: Sequence[Any], name: str) -> list[Mapping[str, Any]]:
    return [_attrs(s) for s in spans if s.name == name]


def _offered(spans: Sequence[Any], want: Expected) -> bool:
    return any(
        set(a.get(c.ATTR_SELECTION_OFFERED, ())) == want.offered
        for a in _named(spans, c.SPAN_SELECT_TOOLS)
    )


def _selected(spans: Sequence[Any], want: Expected) -> bool:
    return any(
        set(a.get(c.ATTR_SELECTION_SELECTED, ())) == want.selected
        for a in _named(spans, c.SPAN_SELECT_TOOLS)
    )


def _dropped(spans: Sequence[Any], want: Expected) -> bool:
    assert want.dropped is not None
    seen = {
        a.get(c.ATTR_STAGE_NAME): (set(a.get(c.ATTR_STAGE_DROPPED, ())), a.get(c.ATTR_STAGE_REASON))
        for a in _named(spans, c.SPAN_STAGE)
    }
    for stage, tools in want.dropped.items():
        if stage not in seen:
            return False
        dropped, reason = seen[stage]
        # the reason names the first tool it dropped (a long list ends with "…")
        if dropped != tools or not reason or not any(t in reason for t in tools):
            return False
    return True


def _model_winner(spans: Sequence[Any], want: Expected) -> bool:
    return any(
        a.get(c.ATTR_POLICY_WINNER) == want.winner
        and a.get(c.ATTR_GEN_AI_REQUEST_MODEL) == want.model
        for a in _named(spans, c.SPAN_SEAM_PRE_MODEL)
    )


def _evaluations(span: Any) -> dict[str, str]:
    """policy name -> result, from the span's evaluation events and its passed-over names."""
    found = {
        name: PolicyResult.NOT_MATCHED for name in _attrs(span).get(c.ATTR_POLICY_PASSED_OVER, ())
    }
    for event in span.events:
        if event.name == c.EVENT_POLICY_EVALUATED:
            ev = event.attributes or {}
            found[ev.get(c.ATTR_POLICY_NAME)] = ev.get(c.ATTR_POLICY_RESULT)
    return found


def _winner_source(spans: Sequence[Any], want: Expected) -> bool:
    for span in spans:
        if span.name != c.SPAN_SEAM_PRE_MODEL:
            continue
        a = _attrs(span)
        if a.get(c.ATTR_SEAM_WINNER_SOURCE) != WinnerSource.POLICY:
            continue
        results = _evaluations(span)
        # the winner's own match is recorded on the span or implied by it winning
        if (
            results.get(want.passed_over) == PolicyResult.NOT_MATCHED
            and results.get(want.winner, PolicyResult.MATCHED) == PolicyResult.MATCHED
            and a.get(c.ATTR_POLICY_WINNER) == want.winner
        ):
            return True
    return False


def _dispatches(spans: Sequence[Any], want: Expected) -> list[Mapping[str, Any]]:
    return [
        a
        for a in _named(spans, c.SPAN_DISPATCH)
        if a.get(c.ATTR_DISPATCH_EMITTED_TOOL) == want.emitted
    ]


def _redirect(spans: Sequence[Any], want: Expected) -> bool:
    return any(
        a.get(c.ATTR_DISPATCH_REDIRECT_TO) == want.redirect_to
        and a.get(c.ATTR_DISPATCH_FINAL_TOOL) == want.redirect_to
        and a.get(c.ATTR_POLICY_WINNER) == want.winner
        for a in _dispatches(spans, want)
    )


def _guard(spans: Sequence[Any], want: Expected) -> bool:
    return any(a.get(c.ATTR_DISPATCH_GUARD) == want.guard for a in _dispatches(spans, want))


def _palette(spans: Sequence[Any], want: Expected) -> bool:
    return any(
        a.get(c.ATTR_DISPATCH_PALETTE_GATE) == want.palette for a in _dispatches(spans, want)
    )


def _gate(spans: Sequence[Any], want: Expected) -> bool:
    gate = want.gate
    assert gate is not None
    terms = gate.terms()
    for a in _named(spans, c.SPAN_OFFLOAD_GATE):
        if (
            a.get(c.ATTR_OFFLOAD_FIRE) is True
            and a.get(c.ATTR_OFFLOAD_REASON_CODE) == OffloadReasonCode.NET_POSITIVE
            and a.get(c.ATTR_GEN_AI_REQUEST_MODEL) == gate.model
            and a.get(c.ATTR_OFFLOAD_OUTPUT_TOKENS) == gate.tokens
            and a.get(c.ATTR_OFFLOAD_HORIZON) == gate.horizon
            and all(
                isinstance(a.get(key), float) and math.isclose(a[key], value, rel_tol=1e-9)
                for key, value in terms.items()
            )
        ):
            return True
    return False


_TESTS: dict[str, Callable[[Sequence[Any], Expected], bool]] = {
    "offered": _offered,
    "selected": _selected,
    "dropped with reason": _dropped,
    "model winner": _model_winner,
    "winner source with evaluations": _winner_source,
    "redirect": _redirect,
    "guard": _guard,
    "palette verdict": _palette,
    "offload priced terms": _gate,
}
assert tuple(_TESTS) == FACTS


def facts_of(spans: Sequence[Any], want: Expected | None) -> dict[str, bool | None]:
    """Each fact: True (stated with the expected values), False, or None (not made here)."""
    if want is None:
        return dict.fromkeys(FACTS, False)
    return {name: None if name in want.skip else test(spans, want) for name, test in _TESTS.items()}
