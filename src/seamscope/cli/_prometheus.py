"""``seamscope calibrate --prometheus URL``: the evidence per (tool, model) read
from the series the ledger exports, one PromQL query per quantity.

The series (see the conventions module) are recorded when a gate offload whose
tool is known settles, by ``gen_ai.request.model`` and ``gen_ai.tool.name``
(tool names capped like every metric attribute: past the cap they fold into
``other``):

==========================  =============================================  =======
quantity                    query (summed over processes)                  exact?
==========================  =============================================  =======
settled offloads, and the   ``seamscope_offload_remaining_turns_bucket``   yes, up
remaining-turns              by ``le`` (one bucket per whole turn up to      to 32
distribution                32: median, p10, p90 from the bucket counts)   turns
remaining turns' mean       ``..._remaining_turns_sum``                    yes
recalled offloads           ``seamscope_offload_recalled_offloads_total``  yes
recalls                     ``seamscope_offload_settled_recalls_total``    yes
carried turns (mean only)   ``seamscope_offload_carried_turns_total``      yes
the gate's recall prior     ``..._prior_recall_probability_total``         yes
==========================  =============================================  =======

A remaining-turns value above 32 falls in a coarse bucket and is taken at the
bucket's upper bound (the file says so). The carried turns are a sum: their
median is not known here (only their mean is written).

Without ``--range`` each query reads the counters' current totals: everything
the scraped processes settled since they started (a restarted process starts
again from zero). With ``--range 30d`` each reads what the series grew over
the window: a series born inside it (a process started since) counted from
zero, its last value exact; an older one by ``increase(...[30d])``, which
Prometheus extrapolates at the window's edges, so the counts are rounded to
whole offloads and turns and may be off by the extrapolation.
"""

from __future__ import annotations

import json
import math
import re
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from seamscope.telemetry import conventions as c

__all__ = ["PrometheusError", "evidence_queries", "read_evidence", "valid_range"]

_TIMEOUT_S = 30.0
_RANGE = re.compile(r"^(\d+(ms|s|m|h|d|w|y))+$")
L_TOOL = c.ATTR_GEN_AI_TOOL_NAME.replace(".", "_")
L_MODEL = c.ATTR_GEN_AI_REQUEST_MODEL.replace(".", "_")
_REMAINING = c.METRIC_OFFLOAD_REMAINING_TURNS.prometheus
EXACT_UP_TO = 32
"""Remaining-turn values up to this are exact from the bucket counts."""


class PrometheusError(RuntimeError):
    """Prometheus cannot be read (the message says why)."""


def valid_range(text: str) -> bool:
    """A PromQL duration such as ``30d``, ``6h``, ``1h30m``."""
    return bool(_RANGE.match(text))


def evidence_queries(window: str | None) -> dict[str, str]:
    """One PromQL query per quantity (``window`` None: the counters' totals)."""

    def total(metric: str, by: tuple[str, ...] = (L_TOOL, L_MODEL)) -> str:
        selector = metric
        if window is not None:  # a series born inside the window counts from zero
            selector = (
                f"(last_over_time({metric}[{window}]) unless {metric} offset {window}) "
                f"or increase({metric}[{window}])"
            )
        return f"sum by ({', '.join(by)}) ({selector})"

    return {
        "buckets": total(_REMAINING + "_bucket", (L_TOOL, L_MODEL, "le")),
        "remaining_sum": total(_REMAINING + "_sum"),
        "recalled": total(c.METRIC_OFFLOAD_RECALLED_OFFLOADS.prometheus),
        "recalls": total(c.METRIC_OFFLOAD_SETTLED_RECALLS.prometheus),
        "carried_sum": total(c.METRIC_OFFLOAD_CARRIED_TURNS.prometheus),
        "prior_p_sum": total(c.METRIC_OFFLOAD_PRIOR_RECALL_PROBABILITY.prometheus),
    }


def _query(url: str, expr: str) -> list[dict[str, Any]]:
    target = f"{url.rstrip('/')}/api/v1/query?{urllib.parse.urlencode({'query': expr})}"
    try:
        with urllib.request.urlopen(target, timeout=_TIMEOUT_S) as answer:
            body = json.loads(answer.read().decode("utf-8"))
    except urllib.error.HTTPError as exc:
        raise PrometheusError(f"{url}: HTTP {exc.code} for {expr}") from None
    except (OSError, ValueError) as exc:
        raise PrometheusError(f"{url}: cannot query ({exc})") from None
    if not isinstance(body, dict) or body.get("status") != "success":
        raise PrometheusError(f"{url}: the query failed: {expr}")
    result = (body.get("data") or {}).get("result")
    return result if isinstance(result, list) else []


def _pairs(result: list[dict[str, Any]]) -> dict[tuple[str, str], float]:
    out: dict[tuple[str, str], float] = {}
    for sample in result:
        labels = sample.get("metric") or {}
        try:
            value = float(sample["value"][1])
        except (KeyError, IndexError, TypeError, ValueError):
            continue
        if math.isfinite(value):
            key = (str(labels.get(L_TOOL, "")), str(labels.get(L_MODEL, "")))
            out[key] = out.get(key, 0.0) + value
    return out


def _bound(le: str) -> float:
    return math.inf if le == "+Inf" else float(le)


def read_evidence(url: str, window: str | None) -> tuple[list[dict[str, Any]], list[str]]:
    """Per (tool, model) with settled offloads: the raw figures calibrate needs
    (``offloads``, ``remaining`` values from the buckets, the sums and counts),
    and the queries issued. Raises :class:`PrometheusError`."""
    queries = evidence_queries(window)
    answers = {name: _query(url, expr) for name, expr in queries.items()}
    cumulative: dict[tuple[str, str], list[tuple[float, int]]] = {}
    for sample in answers["buckets"]:
        labels = sample.get("metric") or {}
        try:
            bound, count = _bound(str(labels["le"])), round(float(sample["value"][1]))
        except (KeyError, IndexError, TypeError, ValueError):
            continue
        key = (str(labels.get(L_TOOL, "")), str(labels.get(L_MODEL, "")))
        cumulative.setdefault(key, []).append((bound, count))
    sums = {name: _pairs(answers[name]) for name in queries if name != "buckets"}
    rows: list[dict[str, Any]] = []
    for key in sorted(cumulative):
        buckets = sorted(cumulative[key])
        values: list[int] = []
        coarse = False
        below, previous = 0, -1.0
        for bound, count in buckets:
            n = max(0, count - below)
            if n:
                if bound > EXACT_UP_TO or bound != math.floor(bound) or bound - previous > 1:
                    coarse = True
                last = buckets[-2][0] if math.isinf(bound) and len(buckets) > 1 else bound
                values += [int(last)] * n
            below, previous = max(below, count), bound
        if not values:
            continue
        tool, model = key
        rows.append(
            {
                "tool": tool,
                "model": model,
                "offloads": len(values),
                "remaining": values,
                "remaining_exact": not coarse,
                "remaining_sum": sums["remaining_sum"].get(key, 0.0),
                "recalled": round(sums["recalled"].get(key, 0.0)),
                "recalls": round(sums["recalls"].get(key, 0.0)),
                "carried_sum": sums["carried_sum"].get(key, 0.0),
                "prior_p_sum": sums["prior_p_sum"].get(key, 0.0),
            }
        )
    return rows, list(queries.values())
