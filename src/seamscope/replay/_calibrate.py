"""What ``seamscope calibrate`` computes from traces: per (tool, model) pair,
the evidence of its settled offloads (:class:`Evidence`: recalled or not,
recalls, the model calls that followed each offload until it settled, the
turns it was carried) and the Beta posterior of its recall probability.

* recall probability: a Beta posterior. The prior is seeded by the gate's own
  prior ``p0`` (what its spans recorded) with a strength of ``k`` pseudo-
  offloads: Beta(k·p0, k·(1−p0)) (``p0`` kept inside [0.01, 0.99]); each
  settled offload that was recalled at least once adds one to alpha, each
  that was not adds one to beta. Reported: the posterior mean, its 90%
  equal-tailed credible interval and the count;
* horizon: the model calls that followed each offload in its conversation
  until it settled (the turns its output would have been carried: the
  gate's H); reported as its median (rounded half up), 10th and 90th
  percentiles and mean, beside the turns really carried (a recall ends the
  carry). A settlement made before the conversation ended (idle, evicted,
  expired) is censored: the offload is counted on to the conversation's end.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, TextIO

from seamscope.replay._course import (
    SETTLED_EARLY,
    Chat,
    Conversation,
    CourseReader,
    Gate,
    Recall,
    Settle,
)

__all__ = [
    "DEFAULT_PRIOR_STRENGTH",
    "Evidence",
    "beta_cdf",
    "beta_quantile",
    "calibrate",
    "collect",
]

DEFAULT_PRIOR_STRENGTH = 2.0
"""Pseudo-offloads the gate's own prior weighs in the Beta posterior."""


# -- the Beta distribution ------------------------------------------------------------


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-14:
            break
    return h


def beta_cdf(x: float, a: float, b: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    front = math.exp(log_front)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def beta_quantile(q: float, a: float, b: float) -> float:
    """The ``q`` quantile of Beta(a, b), by bisection (to 1e-12)."""
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if beta_cdf(mid, a, b) < q:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


# -- evidence -------------------------------------------------------------------------


def _percentile(values: list[int], q: float) -> float:
    """Linear-interpolated percentile of sorted ``values``."""
    if not values:
        return 0.0
    pos = (len(values) - 1) * q
    low = math.floor(pos)
    high = min(low + 1, len(values) - 1)
    return values[low] + (values[high] - values[low]) * (pos - low)


def _half_up(value: float) -> int:
    return int(Decimal(repr(value)).quantize(Decimal(1), rounding=ROUND_HALF_UP))


@dataclass(slots=True)
class Evidence:
    """What the settled offloads of one (tool, model) pair say."""

    tool: str
    model: str
    prior_p_sum: float = 0.0  # the gate's p on each offload, summed in reading order
    recalled: int = 0
    recalls: int = 0
    remaining: list[int] = field(default_factory=list)
    carried: list[int] = field(default_factory=list)
    remaining_sum: float | None = None
    """From Prometheus: the remaining turns' exact sum (``remaining`` holds
    values past 32 turns at their bucket's bound)."""
    carried_sum: float | None = None
    """From Prometheus: the carried turns' sum (``carried`` is then empty)."""
    approximate: tuple[str, ...] = ()
    """The figures the source gives only approximately (written into the file)."""

    @property
    def offloads(self) -> int:
        return len(self.remaining)

    def posterior(self, strength: float) -> tuple[float, float, float, float]:
        """(alpha0, beta0, alpha, beta) of the Beta prior and posterior."""
        p0 = self.prior_p_sum / self.offloads if self.offloads else 0.5
        p0 = min(0.99, max(0.01, p0))
        a0, b0 = strength * p0, strength * (1.0 - p0)
        return a0, b0, a0 + self.recalled, b0 + self.offloads - self.recalled

    def summary(self, strength: float, min_offloads: int) -> dict[str, Any]:
        a0, b0, a, b = self.posterior(strength)
        remaining = sorted(self.remaining)
        carried = sorted(self.carried)
        n = len(remaining)
        remaining_mean = (
            (sum(remaining) if self.remaining_sum is None else self.remaining_sum) / n if n else 0.0
        )
        carried_turns: dict[str, float] = (
            {
                "median": round(_percentile(carried, 0.5), 6),
                "mean": round(sum(carried) / len(carried), 6) if carried else 0.0,
            }
            if self.carried_sum is None
            else {"mean": round(self.carried_sum / n, 6) if n else 0.0}
        )
        return {
            "tool": self.tool,
            "model": self.model,
            "offloads": self.offloads,
            "calibrated": self.offloads >= min_offloads,
            "recall_probability": round(a / (a + b), 6),
            "horizon": _half_up(_percentile(remaining, 0.5)),
            "recalled": self.recalled,
            "recalls": self.recalls,
            "prior": [round(a0, 6), round(b0, 6)],
            "posterior": [round(a, 6), round(b, 6)],
            "credible_90": [
                round(beta_quantile(0.05, a, b), 6),
                round(beta_quantile(0.95, a, b), 6),
            ],
            "remaining_turns": {
                "median": round(_percentile(remaining, 0.5), 6),
                "p10": round(_percentile(remaining, 0.1), 6),
                "p90": round(_percentile(remaining, 0.9), 6),
                "mean": round(remaining_mean, 6),
            },
            "turns_carried": carried_turns,
            **({"approximate": list(self.approximate)} if self.approximate else {}),
        }


@dataclass(slots=True)
class _After:
    """What an offload settled early did after its settlement (see
    :data:`~seamscope.replay._course.SETTLED_EARLY`)."""

    recalled: bool  # its output is back in the prompt: no stub carried
    recalls: int = 0
    carried: int = 0
    chats: int | None = None  # the model calls seen when its conversation's course ended


def collect(conv: Conversation, into: dict[tuple[str, str], Evidence]) -> None:
    """Add the settled offloads of one conversation's course to ``into``.

    An offload settled early (idle, evicted, expired: the ledger stopped
    following it, the conversation went on) is censored there, not ended: its
    remaining turns run to the conversation's end (its next settlement by
    another trigger, else the last model call read), and the recalls and
    carrying model calls after the settlement count too (each later call
    carries its stub until a recall brings the output back)."""
    events = conv.ordered()
    fired: dict[str, tuple[Gate, int]] = {}  # offload id -> (gate, chats before it)
    chats = 0
    settled_at: dict[str, tuple[Settle, int]] = {}
    after: dict[str, _After] = {}  # settled early, still followed here
    for ev in events:
        if type(ev) is Chat:
            chats += 1
            for state in after.values():
                if state.chats is None and not state.recalled:
                    state.carried += 1
        elif type(ev) is Gate and ev.fire and ev.offload_id and ev.tool:
            fired[ev.offload_id] = (ev, chats)
        elif type(ev) is Recall:
            recalled = after.get(ev.offload_id)
            if recalled is not None and recalled.chats is None:
                recalled.recalls += 1
                recalled.recalled = True
        elif type(ev) is Settle:
            if ev.offload_id not in settled_at:
                settled_at[ev.offload_id] = (ev, chats)
                if ev.trigger in SETTLED_EARLY:
                    after[ev.offload_id] = _After(bool(ev.recalls))
                    continue
            for state in after.values():  # the conversation's end: the course ends
                if state.chats is None:
                    state.chats = chats
    for offload_id, (gate, before) in fired.items():
        found = settled_at.get(offload_id)
        if found is None or found[0].recalls is None:
            continue  # not settled in the trace: no realized evidence
        settle, at = found
        ev_ = into.setdefault((gate.tool or "", gate.model), Evidence(gate.tool or "", gate.model))
        ev_.prior_p_sum += gate.recall_probability
        recalls = settle.recalls or 0
        carried = settle.turns_carried or 0
        censored = after.get(offload_id)
        if censored is not None:
            recalls += censored.recalls
            carried += censored.carried
            at = chats if censored.chats is None else censored.chats
        ev_.recalls += recalls
        ev_.recalled += recalls > 0
        ev_.remaining.append(at - before)
        ev_.carried.append(carried)


def calibrate(
    sources: Iterable[tuple[str, TextIO]], query: Callable[[CourseReader], None] | None = None
) -> tuple[dict[tuple[str, str], Evidence], CourseReader]:
    """The evidence of every (tool, model) pair in ``sources``."""
    evidence: dict[tuple[str, str], Evidence] = {}
    reader = CourseReader(lambda conv: collect(conv, evidence))
    for name, handle in sources:
        reader.read(handle, name)
    if query is not None:
        query(reader)
    reader.close_all()
    return evidence, reader
