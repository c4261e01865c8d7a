"""Passed-over evaluations: the counts, the names and the per-policy view.

A seam records the matched, guard-stopped and error evaluations in full and
the rest as counts and names (a prefix of the policies, first match wins).
The reference below is the per-policy evaluation written out: every policy in
order until the winner, ``skipped`` where it does not apply at the seam,
else its match (and, at POST, its guard). The record must hold exactly the
reference's full evaluations, count and name the rest, and its
``all_evaluations()`` must give back the whole reference.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from seamscope.decisions import ModelConfig, SeamRouter, ToolCall, ToolCallPolicy
from seamscope.decisions.records import (
    GuardResult,
    PolicyEvaluation,
    PolicyResult,
    Seam,
    contained_error,
)

from ._support import post_ctx, pre_ctx

DEFAULT = ModelConfig("claude-opus-4-6")
TOOLS = ["run_block", "search", "deploy"]


@dataclass(frozen=True)
class Answer:
    """A scripted predicate: always ``value``, or raises when ``value`` is None."""

    value: bool | None

    def __call__(self, ctx: Any) -> bool:
        if self.value is None:
            raise KeyError("scope")
        return self.value


ANSWERS = [Answer(True), Answer(False), Answer(None)]
answers = st.sampled_from(ANSWERS)


@st.composite
def policies(draw: st.DrawFn) -> list[ToolCallPolicy]:
    out = []
    for i in range(draw(st.integers(0, 12))):
        redirect = draw(st.sampled_from([None, "fetch_data"]))
        model = draw(st.sampled_from([None, ModelConfig("claude-haiku-4-5")]))
        if redirect is None and model is None:
            model = ModelConfig("claude-haiku-4-5")
        out.append(
            ToolCallPolicy(
                name=f"p{i}",
                match=draw(answers),
                model=model,
                redirect_to=redirect,
                when_tool=None if redirect is None else draw(st.sampled_from([None, *TOOLS])),
                guard=None if redirect is None else draw(st.sampled_from([None, *ANSWERS])),
            )
        )
    return out


def _error(source: str, policy: ToolCallPolicy) -> Any:
    return contained_error(source, KeyError("scope"), policy.name)


def reference(
    seam: Seam, policies: list[ToolCallPolicy], tool: str | None
) -> tuple[list[PolicyEvaluation], str | None]:
    """Every evaluation in order until the winner, and the winner's name."""
    out: list[PolicyEvaluation] = []
    for p in policies:
        applies = (
            p.model is not None
            if seam is Seam.PRE_MODEL
            else p.redirect_to is not None and p.applies_to_tool(tool or "")
        )
        if not applies:
            out.append(PolicyEvaluation(p.name, seam, PolicyResult.SKIPPED))
            continue
        matched = p.match.value  # type: ignore[attr-defined]
        if matched is None:
            out.append(PolicyEvaluation(p.name, seam, PolicyResult.ERROR, error=_error("match", p)))
            continue
        if not matched:
            out.append(PolicyEvaluation(p.name, seam, PolicyResult.NOT_MATCHED))
            continue
        if seam is Seam.PRE_MODEL or p.guard is None:
            out.append(PolicyEvaluation(p.name, seam, PolicyResult.MATCHED))
            return out, p.name
        verdict = p.guard.value  # type: ignore[attr-defined]
        if verdict is None:
            err = _error("guard", p)
            out.append(PolicyEvaluation(p.name, seam, PolicyResult.ERROR, GuardResult.ERROR, err))
            continue
        guard = GuardResult.PASSED if verdict else GuardResult.FAILED
        out.append(PolicyEvaluation(p.name, seam, PolicyResult.MATCHED, guard))
        if verdict:
            return out, p.name
    return out, None


def _split(evaluations: list[PolicyEvaluation]) -> tuple[Any, ...]:
    full = tuple(
        e
        for e in evaluations
        if e.result in (PolicyResult.MATCHED, PolicyResult.ERROR) or e.guard is not GuardResult.NONE
    )
    rest = [e for e in evaluations if e not in full]
    return (
        full,
        sum(1 for e in rest if e.result is PolicyResult.NOT_MATCHED),
        sum(1 for e in rest if e.result is PolicyResult.SKIPPED),
        tuple(e.policy for e in rest),
    )


def _recorded(record: Any) -> tuple[Any, ...]:
    passed = record.passed_over
    return (
        record.evaluations,
        passed.not_matched,
        passed.skipped,
        passed.names(),
    )


@settings(max_examples=300, deadline=None)
@given(policies())
def test_pre_seam_records_the_reference_folded(policies: list[ToolCallPolicy]) -> None:
    result = SeamRouter(policies, default_model=DEFAULT).pre_model(pre_ctx())
    expected, winner = reference(Seam.PRE_MODEL, policies, None)
    assert (_split(expected), tuple(expected), winner) == (
        _recorded(result),
        result.all_evaluations(),
        result.policy,
    )


@settings(max_examples=300, deadline=None)
@given(policies(), st.lists(st.sampled_from(TOOLS), min_size=1, max_size=3))
def test_post_seam_records_the_reference_folded(
    policies: list[ToolCallPolicy], tools: list[str]
) -> None:
    calls = [ToolCall(f"call_{i}", name) for i, name in enumerate(tools)]
    router = SeamRouter(policies, default_model=DEFAULT)
    result = router.post_model(post_ctx(tuple(calls), resolved=(*TOOLS, "fetch_data")), calls)
    for call, record in zip(calls, result.records, strict=True):
        expected, winner = reference(Seam.POST_MODEL, policies, call.name)
        assert (_split(expected), tuple(expected), winner) == (
            _recorded(record),
            record.all_evaluations(),
            record.policy,
        )
