"""The decisions dashboard, as data: which policy won each seam, which redirects the
palette gate dropped, what the selection stages and a framework's own middlewares
did, and how long each decision took."""

from __future__ import annotations

from _panels import (  # the panel library beside this file
    DECISIONS_UID,
    L_MIDDLEWARE,
    L_MIDDLEWARE_DECISION,
    L_MODEL,
    L_PALETTE_GATE,
    L_POLICY,
    L_POLICY_RESULT,
    L_SEAM,
    L_SELECTION_SET,
    L_SPAN_NAME,
    L_STAGE,
    L_STAGE_DEGRADED,
    L_STAGE_OUTCOME,
    L_WINNER_SOURCE,
    MIDDLEWARE_COST,
    MIDDLEWARE_DECISIONS,
    POLICY_EVALUATIONS,
    POLICY_WINS,
    REDIRECTS,
    SELECTION_TOOLS,
    SPAN_CALLS,
    SPAN_DURATION_BUCKET,
    SPAN_DURATION_COUNT,
    SPAN_DURATION_SUM,
    STAGE_OUTCOMES,
    TRUE,
    Dashboard,
    Graph,
    Jaeger,
    Link,
    Query,
    Row,
    TraceTable,
    TraceView,
    decision_spans,
    field_label,
    legend,
    per_hour,
    rate,
    ratio,
    series,
    span_attr,
    span_name,
    spanset,
    sum_by,
)

from seamscope.telemetry import conventions as c

__all__ = ["DECISIONS"]

_WINS = rate(POLICY_WINS)
_EVALUATIONS = rate(POLICY_EVALUATIONS)
_REDIRECTS = rate(REDIRECTS)
_DROPPED = c.PaletteVerdict.DROPPED.value
_OUTCOMES = rate(STAGE_OUTCOMES)
_BUCKETS = sum_by(["le", L_SPAN_NAME], rate(decision_spans(SPAN_DURATION_BUCKET)))

_POLICY_WON_LINK = Link(
    "Traces where this policy won",
    spanset(span_attr(c.ATTR_POLICY_WINNER, field_label(c.ATTR_POLICY_NAME))),
)

DECISIONS = Dashboard(
    DECISIONS_UID,
    "seamscope / decisions",
    "Which policy won each seam, which redirects the palette gate dropped, what the "
    "selection stages and a framework's own middlewares did, and how long each decision "
    "took.",
    (
        Row(
            "Seams: who decided",
            (
                Graph(
                    "Policy wins per seam",
                    "Seam decisions per second by seam, winner source and winning policy "
                    "(policy `none` when the resolver, the default or the adopter decided).",
                    (
                        Query(
                            sum_by([L_SEAM, L_WINNER_SOURCE, L_POLICY], _WINS),
                            legend(L_SEAM, L_WINNER_SOURCE, L_POLICY),
                        ),
                    ),
                    "ops",
                    links=(_POLICY_WON_LINK,),
                ),
                Graph(
                    "Winner source share per seam",
                    "Share of each seam's decisions taken by a policy, the role resolver, the "
                    "default, the adopter callback, or nobody (dispatched as emitted).",
                    (
                        Query(
                            ratio(
                                sum_by([L_SEAM, L_WINNER_SOURCE], _WINS),
                                sum_by([L_SEAM], _WINS),
                                f"ignoring ({L_WINNER_SOURCE}) group_left ()",
                            ),
                            legend(L_SEAM, L_WINNER_SOURCE),
                        ),
                    ),
                    "percentunit",
                    stacked=True,
                    max_value=1,
                ),
                Graph(
                    "Policy evaluations by result",
                    "Policy evaluations per second by seam, policy and result. Matched and "
                    "error evaluations carry the policy; `not_matched` and `skipped` (the "
                    "policy does not apply at that seam) are counted per seam only, their "
                    "names are on the seam spans (seamscope.policy.passed_over). `error`: "
                    "its predicate raised (counted as no match).",
                    (
                        Query(
                            sum_by([L_SEAM, L_POLICY, L_POLICY_RESULT], _EVALUATIONS),
                            legend(L_SEAM, L_POLICY, L_POLICY_RESULT),
                        ),
                    ),
                    "ops",
                ),
                Graph(
                    "Policy predicate errors",
                    "Evaluations per second whose predicate raised, by seam and policy. Each "
                    "one silently counts as no match.",
                    (
                        Query(
                            sum_by(
                                [L_SEAM, L_POLICY],
                                rate(
                                    series(
                                        POLICY_EVALUATIONS,
                                        **{L_POLICY_RESULT: c.PolicyResult.ERROR.value},
                                    )
                                ),
                            ),
                            legend(L_SEAM, L_POLICY),
                        ),
                    ),
                    "ops",
                    links=(_POLICY_WON_LINK,),
                ),
            ),
        ),
        Row(
            "Redirects and the palette gate",
            (
                Graph(
                    "Redirects by palette-gate verdict",
                    "Policy redirects per second by policy: `kept` dispatched to the redirect "
                    "target, `dropped` targeted a tool not routed this turn, so the original "
                    "call dispatched.",
                    (
                        Query(
                            sum_by([L_POLICY, L_PALETTE_GATE], _REDIRECTS),
                            legend(L_POLICY, L_PALETTE_GATE),
                        ),
                    ),
                    "ops",
                    links=(
                        Link(
                            "Dispatches with this policy and verdict",
                            spanset(
                                span_name(c.SPAN_DISPATCH),
                                span_attr(c.ATTR_POLICY_WINNER, field_label(c.ATTR_POLICY_NAME)),
                                span_attr(
                                    c.ATTR_DISPATCH_PALETTE_GATE,
                                    field_label(c.ATTR_DISPATCH_PALETTE_GATE),
                                ),
                            ),
                        ),
                    ),
                ),
                Graph(
                    "Palette-gate drop ratio per policy",
                    "Share of a policy's redirects the palette gate dropped. A policy whose "
                    "target is rarely routed is a configuration problem.",
                    (
                        Query(
                            ratio(
                                sum_by(
                                    [L_POLICY],
                                    rate(series(REDIRECTS, **{L_PALETTE_GATE: _DROPPED})),
                                ),
                                sum_by([L_POLICY], _REDIRECTS),
                            ),
                            legend(L_POLICY),
                        ),
                    ),
                    "percentunit",
                    links=(
                        Link(
                            "Dropped redirects of this policy",
                            spanset(
                                span_name(c.SPAN_DISPATCH),
                                span_attr(c.ATTR_POLICY_WINNER, field_label(c.ATTR_POLICY_NAME)),
                                span_attr(c.ATTR_DISPATCH_PALETTE_GATE, _DROPPED),
                            ),
                        ),
                    ),
                ),
            ),
        ),
        Row(
            "Tool selection stages",
            (
                Graph(
                    "Stage outcomes",
                    "Selection-stage outcomes per second by stage: `select` narrowed the "
                    "tools, `abstain` left them as they were.",
                    (
                        Query(
                            sum_by([L_STAGE, L_STAGE_OUTCOME], _OUTCOMES),
                            legend(L_STAGE, L_STAGE_OUTCOME),
                        ),
                    ),
                    "ops",
                    links=(
                        Link(
                            "Stage spans with this outcome",
                            spanset(
                                span_name(c.SPAN_STAGE),
                                span_attr(c.ATTR_STAGE_NAME, field_label(c.ATTR_STAGE_NAME)),
                                span_attr(c.ATTR_STAGE_OUTCOME, field_label(c.ATTR_STAGE_OUTCOME)),
                            ),
                        ),
                    ),
                ),
                Graph(
                    "Degraded abstain ratio per stage",
                    "Share of a stage's runs that abstained degraded (or raised and were "
                    "contained). The pipeline went on without that lever.",
                    (
                        Query(
                            ratio(
                                sum_by(
                                    [L_STAGE],
                                    rate(series(STAGE_OUTCOMES, **{L_STAGE_DEGRADED: TRUE})),
                                ),
                                sum_by([L_STAGE], _OUTCOMES),
                            ),
                            legend(L_STAGE),
                        ),
                    ),
                    "percentunit",
                    links=(
                        Link(
                            "Degraded runs of this stage",
                            spanset(
                                span_name(c.SPAN_STAGE),
                                span_attr(c.ATTR_STAGE_NAME, field_label(c.ATTR_STAGE_NAME)),
                                span_attr(c.ATTR_STAGE_DEGRADED, TRUE, quote=False),
                            ),
                        ),
                    ),
                ),
                Graph(
                    "Stages that narrowed the tools (select share)",
                    "Share of a stage's runs that selected (narrowed the offered tools).",
                    (
                        Query(
                            ratio(
                                sum_by(
                                    [L_STAGE],
                                    rate(
                                        series(
                                            STAGE_OUTCOMES,
                                            **{L_STAGE_OUTCOME: c.StageOutcomeKind.SELECT.value},
                                        )
                                    ),
                                ),
                                sum_by([L_STAGE], _OUTCOMES),
                            ),
                            legend(L_STAGE),
                        ),
                    ),
                    "percentunit",
                    max_value=1,
                ),
                Graph(
                    "Tools offered vs selected",
                    "Tools offered to the selection pipeline and tools it selected, per "
                    "second (one count per tool per iteration). The gap is what the stages "
                    "dropped; which tools and why is on the seamscope.select_tools and "
                    "seamscope.stage spans.",
                    (
                        Query(
                            sum_by([L_SELECTION_SET], rate(SELECTION_TOOLS)),
                            legend(L_SELECTION_SET),
                        ),
                    ),
                    "ops",
                ),
                Graph(
                    "Decisions per second by kind",
                    "Pipeline runs, PRE and POST seam decisions and offload-gate calls per "
                    "second, by decision span (the collector's spanmetrics).",
                    (
                        Query(
                            sum_by([L_SPAN_NAME], rate(decision_spans(SPAN_CALLS))),
                            legend(L_SPAN_NAME),
                        ),
                    ),
                    "ops",
                ),
            ),
        ),
        Row(
            "Framework middlewares",
            (
                Graph(
                    "Middleware decisions by middleware and kind",
                    "Decisions a framework's own middlewares took, per second, by middleware "
                    "(its name in the framework) and kind: tool selection or search, model "
                    "route or fallback, a blocked tool call, a compaction.",
                    (
                        Query(
                            sum_by(
                                [L_MIDDLEWARE, L_MIDDLEWARE_DECISION], rate(MIDDLEWARE_DECISIONS)
                            ),
                            legend(L_MIDDLEWARE, L_MIDDLEWARE_DECISION),
                        ),
                    ),
                    "ops",
                    stacked=True,
                    links=(
                        Link(
                            "Decisions of this middleware of this kind",
                            spanset(
                                span_attr(
                                    c.ATTR_MIDDLEWARE_NAME, field_label(c.ATTR_MIDDLEWARE_NAME)
                                ),
                                span_attr(
                                    c.ATTR_MIDDLEWARE_DECISION,
                                    field_label(c.ATTR_MIDDLEWARE_DECISION),
                                ),
                            ),
                        ),
                    ),
                ),
                Graph(
                    "Middlewares' own model calls: cost by middleware and model (USD/h)",
                    "What the models a middleware asks for its own decisions (a tool "
                    "selector, a router's or a risk check's classifier, a summary model) "
                    "cost per hour, by middleware and decision model.",
                    (
                        Query(
                            per_hour(sum_by([L_MIDDLEWARE, L_MODEL], rate(MIDDLEWARE_COST))),
                            legend(L_MIDDLEWARE, L_MODEL),
                        ),
                    ),
                    "currencyUSD",
                    stacked=True,
                ),
                TraceTable(
                    "Blocked calls, fallbacks and compactions (Tempo)",
                    "TraceQL: tool calls a middleware blocked (they never ran), model calls a "
                    "fallback answered, and compactions (context editing, summaries).",
                    " || ".join(
                        [
                            spanset(
                                span_name(c.SPAN_DISPATCH),
                                span_attr(c.ATTR_DISPATCH_BLOCKED, TRUE, quote=False),
                            ),
                            spanset(
                                span_name(c.SPAN_SEAM_PRE_MODEL),
                                span_attr(c.ATTR_SEAM_WINNER_SOURCE, c.WinnerSource.FALLBACK.value),
                            ),
                            spanset(span_name(c.SPAN_COMPACTION)),
                        ]
                    ),
                    h=8,
                ),
            ),
        ),
        Row(
            "Decision latency",
            (
                Graph(
                    "Decision duration p50 / p95 by kind",
                    "Time seamscope spends deciding, per decision span, from the "
                    "collector's spanmetrics duration histogram. The mean is sum / count.",
                    (
                        Query(
                            f"histogram_quantile(0.5, {_BUCKETS})",
                            "p50 " + legend(L_SPAN_NAME),
                        ),
                        Query(
                            f"histogram_quantile(0.95, {_BUCKETS})",
                            "p95 " + legend(L_SPAN_NAME),
                        ),
                        Query(
                            # A plain division, NaN while a kind is idle, like the
                            # quantiles above (ratio() would drop the series).
                            "("
                            + sum_by([L_SPAN_NAME], rate(decision_spans(SPAN_DURATION_SUM)))
                            + ")\n/\n("
                            + sum_by([L_SPAN_NAME], rate(decision_spans(SPAN_DURATION_COUNT)))
                            + ")",
                            "mean " + legend(L_SPAN_NAME),
                        ),
                    ),
                    "s",
                    w=24,
                    h=9,
                ),
            ),
        ),
        Row(
            "Decision traces",
            (
                TraceTable(
                    "Decision spans worth a look (Tempo)",
                    "TraceQL: dispatches whose redirect the palette gate dropped, stages that "
                    "abstained degraded, and decision spans with an error status.",
                    " || ".join(
                        [
                            spanset(
                                span_name(c.SPAN_DISPATCH),
                                span_attr(c.ATTR_DISPATCH_PALETTE_GATE, _DROPPED),
                            ),
                            spanset(
                                span_name(c.SPAN_STAGE),
                                span_attr(c.ATTR_STAGE_DEGRADED, TRUE, quote=False),
                            ),
                            spanset('name =~ "seamscope.*"', "status = error"),
                        ]
                    ),
                ),
                TraceTable(
                    "Dropped redirects (Jaeger)",
                    "Jaeger search: dispatch spans whose redirect the palette gate dropped, "
                    "for the service in the `service` variable.",
                    Jaeger(c.SPAN_DISPATCH, ((c.ATTR_DISPATCH_PALETTE_GATE, _DROPPED),)),
                ),
                TraceView(),
            ),
        ),
    ),
)
