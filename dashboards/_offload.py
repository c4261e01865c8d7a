"""The offload economics dashboard, as data: predicted against realized, by model,
tool and mechanism, the loss budget, the shadow gate and the offload store."""

from __future__ import annotations

from _panels import (  # the panel library beside this file
    _PAIR,
    _SHADOW_BY,
    CARRIED_TURNS,
    ERROR_BUDGET,
    INPUT_TOKENS,
    L_CACHE,
    L_COST_KIND,
    L_ERROR_TYPE,
    L_FIRE,
    L_MECHANISM,
    L_MODEL,
    L_OFFLOAD_ACTIVE,
    L_OUTCOME,
    L_REASON_CODE,
    L_SHADOW_BASIS,
    L_STORE_OPERATION,
    L_TOOL,
    OFFLOAD_DECISIONS,
    OFFLOAD_UID,
    PREDICTED_NET_SAVING,
    PRIOR_RECALL_PROBABILITY,
    REALIZED_COSTS,
    REALIZED_SAVINGS,
    RECALLED_OFFLOADS,
    RECALLS,
    REMAINING_TURNS,
    SETTLED,
    SETTLED_RECALLS,
    SHADOW_COSTS,
    SHADOW_DISAGREEMENTS,
    SHADOW_SAVINGS,
    SLO_PERIOD,
    STORE_ERRORS,
    TRUE,
    Dashboard,
    Graph,
    Jaeger,
    Link,
    Query,
    Row,
    Stat,
    TraceTable,
    TraceView,
    burn_rate,
    field_label,
    gate_only,
    grown,
    legend,
    or_zero_like,
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

__all__ = ["OFFLOAD"]

_PREDICTED = sum_by([], rate(PREDICTED_NET_SAVING))
_SAVINGS = sum_by([], rate(REALIZED_SAVINGS))
_COSTS = sum_by([], rate(REALIZED_COSTS))
_REALIZED_NET = f"(({_SAVINGS}) or vector(0))\n-\n(({_COSTS}) or vector(0))"
# Only the gate predicts: realized against predicted compares the gate's terms.
_GATE_SAVINGS = sum_by([], rate(gate_only(REALIZED_SAVINGS)))
_GATE_COSTS = sum_by([], rate(gate_only(REALIZED_COSTS)))
_GATE_NET = f"(({_GATE_SAVINGS}) or vector(0))\n-\n(({_GATE_COSTS}) or vector(0))"
_DECISIONS = rate(OFFLOAD_DECISIONS)
_FIRED = rate(series(OFFLOAD_DECISIONS, **{L_FIRE: TRUE}))
_GATE_SAVINGS_BY_MODEL = sum_by([L_MODEL], rate(gate_only(REALIZED_SAVINGS)))
_GATE_COSTS_BY_MODEL = sum_by([L_MODEL], rate(gate_only(REALIZED_COSTS)))
_PREDICTED_BY_MODEL = sum_by([L_MODEL], rate(PREDICTED_NET_SAVING))
_MODEL_MECHANISM = [L_MODEL, L_MECHANISM]
_SAVINGS_BY_MODEL_MECHANISM = sum_by(_MODEL_MECHANISM, rate(REALIZED_SAVINGS))
_COSTS_BY_MODEL_MECHANISM = sum_by(_MODEL_MECHANISM, rate(REALIZED_COSTS))
_SAVINGS_BY_MECHANISM = sum_by([L_MECHANISM], rate(REALIZED_SAVINGS))
_COSTS_BY_MECHANISM = sum_by([L_MECHANISM], rate(REALIZED_COSTS))
_LOSS = c.OffloadOutcome.LOSS.value

_FIRED_ON_MODEL_LINK = Link(
    "Fired offloads on this model",
    spanset(
        span_name(c.SPAN_OFFLOAD_GATE),
        span_attr(c.ATTR_OFFLOAD_FIRE, TRUE, quote=False),
        span_attr(c.ATTR_GEN_AI_REQUEST_MODEL, field_label(c.ATTR_GEN_AI_REQUEST_MODEL)),
    ),
)
_COMPACTIONS_ON_MODEL_LINK = Link(
    "Compactions of this mechanism on this model",
    spanset(
        span_name(c.SPAN_COMPACTION),
        span_attr(c.ATTR_OFFLOAD_MECHANISM, field_label(c.ATTR_OFFLOAD_MECHANISM)),
        span_attr(c.ATTR_GEN_AI_REQUEST_MODEL, field_label(c.ATTR_GEN_AI_REQUEST_MODEL)),
    ),
)
_LOSING_SETTLEMENTS_LINK = Link(
    "Losing settlements of this mechanism",
    spanset(
        span_name(c.SPAN_OFFLOAD_SETTLE),
        span_attr(c.ATTR_OFFLOAD_MECHANISM, field_label(c.ATTR_OFFLOAD_MECHANISM)),
        span_attr(c.ATTR_OFFLOAD_OUTCOME, _LOSS),
    ),
)

OFFLOAD = Dashboard(
    OFFLOAD_UID,
    "seamscope / offload economics",
    "What the offload gate predicted, what offloads and framework compactions (context "
    "editing, summaries) really saved and cost, by mechanism, recalls, settled outcomes, "
    "and the prompt cache with and without a live offload.",
    (
        Row(
            "Overview",
            (
                Stat(
                    "Predicted net saving (USD/h)",
                    "Net saving the gate predicted for the offloads it fired, per hour.",
                    per_hour(_PREDICTED),
                    "currencyUSD",
                ),
                Stat(
                    "Realized net saving (USD/h)",
                    "Realized savings minus realized costs of offloads and compactions, "
                    "every mechanism, per hour. Negative: taking content out of the prompt "
                    "loses money.",
                    per_hour(_REALIZED_NET),
                    "currencyUSD",
                ),
                Stat(
                    "Realized / predicted",
                    "The gate's realized net saving as a share of its predicted one. The "
                    "realized side lags by the turns an offload is carried.",
                    ratio(_GATE_NET, _PREDICTED),
                    "percentunit",
                ),
                Stat(
                    "Gate fire rate",
                    "Share of offload-gate calls that fired.",
                    ratio(sum_by([], _FIRED), sum_by([], _DECISIONS)),
                    "percentunit",
                ),
            ),
        ),
        Row(
            "Offload gate decisions",
            (
                Graph(
                    "Gate decisions by reason code",
                    "Share of offload-gate calls per reason: below the size threshold, "
                    "unpriced model, net saving positive (fired) or not positive.",
                    (
                        Query(
                            ratio(
                                sum_by([L_REASON_CODE], _DECISIONS),
                                sum_by([], _DECISIONS),
                                f"ignoring ({L_REASON_CODE}) group_left ()",
                            ),
                            legend(L_REASON_CODE),
                        ),
                    ),
                    "percentunit",
                    stacked=True,
                    max_value=1,
                    links=(
                        Link(
                            "Gate calls with this reason",
                            spanset(
                                span_name(c.SPAN_OFFLOAD_GATE),
                                span_attr(
                                    c.ATTR_OFFLOAD_REASON_CODE,
                                    field_label(c.ATTR_OFFLOAD_REASON_CODE),
                                ),
                            ),
                        ),
                    ),
                ),
                Graph(
                    "Fire rate by model",
                    "Share of each model's offload-gate calls that fired.",
                    (
                        Query(
                            ratio(sum_by([L_MODEL], _FIRED), sum_by([L_MODEL], _DECISIONS)),
                            legend(L_MODEL),
                        ),
                    ),
                    "percentunit",
                    max_value=1,
                    links=(_FIRED_ON_MODEL_LINK,),
                ),
            ),
        ),
        Row(
            "Predicted vs realized",
            (
                Graph(
                    "Predicted vs realized net saving (USD/h)",
                    "Predicted: the gate's net saving for fired offloads. Realized: savings "
                    "(later model calls that carried the stub) minus costs (stub carry, "
                    "recalls, prompt-cache disruption), counted where they happen: the "
                    "gate's, and of every mechanism (with framework compactions).",
                    (
                        Query(per_hour(_PREDICTED), "predicted"),
                        Query(per_hour(_GATE_NET), "realized (gate)"),
                        Query(per_hour(_REALIZED_NET), "realized (every mechanism)"),
                    ),
                    "currencyUSD",
                ),
                Graph(
                    "Realized costs by kind (USD/h)",
                    "What offloads and compactions cost, per hour: the stub, placeholder or "
                    "summary carried on later turns, recalls of the removed content, "
                    "prompt-cache disruption, and summaries' own model calls.",
                    (
                        Query(
                            per_hour(sum_by([L_COST_KIND], rate(REALIZED_COSTS))),
                            legend(L_COST_KIND),
                        ),
                    ),
                    "currencyUSD",
                    stacked=True,
                ),
                Graph(
                    "Realized loss by model and mechanism (USD/h)",
                    "Realized costs minus realized savings per model and mechanism, where "
                    "positive: what that mechanism takes out of the prompt on that model "
                    "loses money (what SeamscopeOffloadRealizedLoss alerts on).",
                    (
                        Query(
                            per_hour(
                                f"{_COSTS_BY_MODEL_MECHANISM}\n-\n"
                                + or_zero_like(
                                    _SAVINGS_BY_MODEL_MECHANISM, _COSTS_BY_MODEL_MECHANISM
                                )
                            )
                            + " > 0",
                            legend(L_MODEL, L_MECHANISM),
                        ),
                    ),
                    "currencyUSD",
                    links=(
                        _FIRED_ON_MODEL_LINK,
                        _COMPACTIONS_ON_MODEL_LINK,
                        _LOSING_SETTLEMENTS_LINK,
                    ),
                ),
                Graph(
                    "Realized / predicted by model",
                    "The gate's realized net saving as a share of its predicted one, per "
                    "model. Below 100%: the gate's priors (horizon, recall probability) are "
                    "optimistic for this workload.",
                    (
                        Query(
                            ratio(
                                or_zero_like(_GATE_SAVINGS_BY_MODEL, _PREDICTED_BY_MODEL)
                                + "\n-\n"
                                + or_zero_like(_GATE_COSTS_BY_MODEL, _PREDICTED_BY_MODEL),
                                _PREDICTED_BY_MODEL,
                            ),
                            legend(L_MODEL),
                        ),
                    ),
                    "percentunit",
                ),
            ),
        ),
        Row(
            "Mechanisms: the gate and framework compactions",
            (
                Graph(
                    "Realized net saving by mechanism (USD/h)",
                    "Savings minus costs per hour of each mechanism: the offload gate "
                    "(seamscope_gate), a framework's context editing (cleared tool results), "
                    "summarization, tool output trimming (the Agents SDK's "
                    "ToolOutputTrimmer) and Deep Agents' evictions of large tool results "
                    "(deepagents_eviction). Negative: that mechanism loses money.",
                    (
                        Query(
                            per_hour(
                                or_zero_like(_SAVINGS_BY_MECHANISM, _COSTS_BY_MECHANISM)
                                + "\n-\n"
                                + or_zero_like(_COSTS_BY_MECHANISM, _SAVINGS_BY_MECHANISM)
                            ),
                            legend(L_MECHANISM),
                        ),
                    ),
                    "currencyUSD",
                    w=8,
                    links=(_LOSING_SETTLEMENTS_LINK,),
                ),
                Graph(
                    "Realized savings by mechanism (USD/h)",
                    "Re-prefill avoided per hour by each mechanism: later model calls that "
                    "carried the stub, placeholder or summary instead of the content.",
                    (Query(per_hour(_SAVINGS_BY_MECHANISM), legend(L_MECHANISM)),),
                    "currencyUSD",
                    w=8,
                    stacked=True,
                ),
                Graph(
                    "Realized costs by mechanism and kind (USD/h)",
                    "What each mechanism costs per hour, by kind: carry, recalls (re-reads "
                    "of cleared or summarized data), cache disruption, compaction calls.",
                    (
                        Query(
                            per_hour(sum_by([L_MECHANISM, L_COST_KIND], rate(REALIZED_COSTS))),
                            legend(L_MECHANISM, L_COST_KIND),
                        ),
                    ),
                    "currencyUSD",
                    w=8,
                    stacked=True,
                    links=(_LOSING_SETTLEMENTS_LINK,),
                ),
            ),
        ),
        Row(
            "Recalls and settled offloads",
            (
                Graph(
                    "Recalls by model and mechanism",
                    "Recalls per second: of offloaded tool outputs (seamscope_gate), and "
                    "re-reads of data a compaction cleared or summarized.",
                    (
                        Query(
                            sum_by(_MODEL_MECHANISM, rate(RECALLS)),
                            legend(L_MODEL, L_MECHANISM),
                        ),
                    ),
                    "ops",
                    w=8,
                ),
                Graph(
                    "Recalls per fired offload",
                    "The gate's recalls per offload it fired, per model: compare with the "
                    "recall probability prior the gate priced.",
                    (
                        Query(
                            ratio(
                                sum_by([L_MODEL], rate(gate_only(RECALLS))),
                                sum_by([L_MODEL], _FIRED),
                            ),
                            legend(L_MODEL),
                        ),
                    ),
                    "none",
                    w=8,
                ),
                Graph(
                    "Settled by mechanism and outcome",
                    "Offloads and compactions settled per second by mechanism and outcome "
                    "(gain, loss, break_even), where one process saw the whole conversation.",
                    (
                        Query(
                            sum_by([L_MECHANISM, L_OUTCOME], rate(SETTLED)),
                            legend(L_MECHANISM, L_OUTCOME),
                        ),
                    ),
                    "ops",
                    w=8,
                    stacked=True,
                    links=(
                        Link(
                            "Settlements of this mechanism with this outcome",
                            spanset(
                                span_name(c.SPAN_OFFLOAD_SETTLE),
                                span_attr(
                                    c.ATTR_OFFLOAD_MECHANISM,
                                    field_label(c.ATTR_OFFLOAD_MECHANISM),
                                ),
                                span_attr(
                                    c.ATTR_OFFLOAD_OUTCOME, field_label(c.ATTR_OFFLOAD_OUTCOME)
                                ),
                            ),
                        ),
                    ),
                ),
            ),
        ),
        Row(
            "Loss budget",
            (
                Graph(
                    "Loss budget burn rate, page windows (1h, 5m)",
                    "Loss share of settled offloads and compactions per model and mechanism "
                    "over 1h and 5m, in multiples of the error budget (the "
                    f"{ERROR_BUDGET} rule). SeamscopeOffloadLossBudgetFastBurn pages when "
                    "both are above 14.4.",
                    (
                        Query(burn_rate("1h"), legend(L_MODEL, L_MECHANISM) + " · 1h"),
                        Query(burn_rate("5m"), legend(L_MODEL, L_MECHANISM) + " · 5m"),
                    ),
                    "none",
                    w=8,
                    links=(_LOSING_SETTLEMENTS_LINK,),
                ),
                Graph(
                    "Loss budget burn rate, ticket windows (6h, 30m)",
                    "The same over 6h and 30m. SeamscopeOffloadLossBudgetSlowBurn opens a "
                    "ticket when both are above 6.",
                    (
                        Query(burn_rate("6h"), legend(L_MODEL, L_MECHANISM) + " · 6h"),
                        Query(burn_rate("30m"), legend(L_MODEL, L_MECHANISM) + " · 30m"),
                    ),
                    "none",
                    w=8,
                    links=(_LOSING_SETTLEMENTS_LINK,),
                ),
                Graph(
                    f"Loss budget left over {SLO_PERIOD}",
                    f"Share of the error budget left over the last {SLO_PERIOD} per model and "
                    "mechanism: 1 - (loss share / budget). Below 0: the SLO is missed.",
                    (
                        Query(
                            "1 - (\n"
                            + ratio(
                                or_zero_like(
                                    sum_by(
                                        _MODEL_MECHANISM,
                                        grown(series(SETTLED, **{L_OUTCOME: _LOSS}), SLO_PERIOD),
                                    ),
                                    f"group by ({', '.join(_MODEL_MECHANISM)}) "
                                    f"(last_over_time({SETTLED}[{SLO_PERIOD}]))",
                                ),
                                sum_by(_MODEL_MECHANISM, grown(SETTLED, SLO_PERIOD)),
                            )
                            + f"\n) / scalar({ERROR_BUDGET})",
                            legend(L_MODEL, L_MECHANISM),
                        ),
                    ),
                    "percentunit",
                    w=8,
                ),
                Graph(
                    "Offload store failures by call and error type",
                    "Offload store calls per second that failed (the store down, slow or "
                    "full), by operation and error type. A failed put made no offload (the "
                    "output stayed in the prompt: gate reason store_failed); a failed recall "
                    "told the agent to retry; failed accounts or claims leave the offload "
                    "to be settled later by any worker.",
                    (
                        Query(
                            sum_by([L_STORE_OPERATION, L_ERROR_TYPE], rate(STORE_ERRORS)),
                            legend(L_STORE_OPERATION, L_ERROR_TYPE),
                        ),
                    ),
                    "ops",
                    w=12,
                ),
                Graph(
                    "Shadow disagreements by model and tool",
                    "Offload-gate calls per second where the shadow configuration "
                    "(OffloadGate(shadow=...)) reached another verdict than the live one, "
                    "per model and tool: what rolling the shadow out would change.",
                    (
                        Query(
                            sum_by([L_MODEL, L_TOOL], rate(SHADOW_DISAGREEMENTS)),
                            legend(L_MODEL, L_TOOL),
                        ),
                    ),
                    "ops",
                    w=12,
                    links=(
                        Link(
                            "Gate calls on this model and tool",
                            spanset(
                                span_name(c.SPAN_OFFLOAD_GATE),
                                span_attr(
                                    c.ATTR_GEN_AI_REQUEST_MODEL,
                                    field_label(c.ATTR_GEN_AI_REQUEST_MODEL),
                                ),
                                span_attr(
                                    c.ATTR_GEN_AI_TOOL_NAME, field_label(c.ATTR_GEN_AI_TOOL_NAME)
                                ),
                            ),
                        ),
                    ),
                ),
                Graph(
                    "Shadow net saving by model and tool",
                    "What the shadow configuration's offloads would have saved minus what "
                    "they would have cost per hour, on the conversations' real course "
                    "(counted as conversations settle): exact where the offload fires either "
                    "way, expected (one recall hop at the shadow's probability) where only "
                    "the shadow fires. Compare with the realized net of the live gate.",
                    (
                        Query(
                            per_hour(
                                or_zero_like(
                                    sum_by(_SHADOW_BY, rate(SHADOW_SAVINGS)),
                                    sum_by(_SHADOW_BY, rate(SHADOW_COSTS)),
                                )
                                + "\n-\n"
                                + or_zero_like(
                                    sum_by(_SHADOW_BY, rate(SHADOW_COSTS)),
                                    sum_by(_SHADOW_BY, rate(SHADOW_SAVINGS)),
                                )
                            ),
                            legend(L_MODEL, L_TOOL) + " · " + legend(L_SHADOW_BASIS),
                        ),
                    ),
                    "currencyUSD",
                    w=12,
                ),
            ),
        ),
        Row(
            "Calibration evidence",
            (
                Graph(
                    "Recall probability by tool and model: realized vs the gate's prior",
                    "Per tool and model: the share of settled "
                    "offloads of the gate that were recalled (what seamscope calibrate "
                    "--prometheus learns the recall probability from) and the mean recall "
                    "prior the gate decided them with.",
                    (
                        Query(
                            ratio(
                                sum_by(_PAIR, rate(RECALLED_OFFLOADS)),
                                sum_by(_PAIR, rate(REMAINING_TURNS + "_count")),
                            ),
                            legend(L_TOOL, L_MODEL) + " · recalled",
                        ),
                        Query(
                            ratio(
                                sum_by(_PAIR, rate(PRIOR_RECALL_PROBABILITY)),
                                sum_by(_PAIR, rate(REMAINING_TURNS + "_count")),
                            ),
                            legend(L_TOOL, L_MODEL) + " · prior",
                        ),
                    ),
                    "percentunit",
                    w=12,
                ),
                Graph(
                    "Turns after an offload (remaining, carried) and recalls per offload",
                    "Per tool and model: the model calls that followed each settled offload "
                    "of the gate until it settled (the gate's horizon, realized: median and "
                    "90th percentile), the mean number that carried its stub, and its mean "
                    "recalls.",
                    (
                        Query(
                            "histogram_quantile(0.5, "
                            + sum_by([*_PAIR, "le"], rate(REMAINING_TURNS + "_bucket"))
                            + ")",
                            legend(L_TOOL, L_MODEL) + " · median remaining",
                        ),
                        Query(
                            "histogram_quantile(0.9, "
                            + sum_by([*_PAIR, "le"], rate(REMAINING_TURNS + "_bucket"))
                            + ")",
                            legend(L_TOOL, L_MODEL) + " · p90 remaining",
                        ),
                        Query(
                            ratio(
                                sum_by(_PAIR, rate(CARRIED_TURNS)),
                                sum_by(_PAIR, rate(REMAINING_TURNS + "_count")),
                            ),
                            legend(L_TOOL, L_MODEL) + " · mean carried",
                        ),
                        Query(
                            ratio(
                                sum_by(_PAIR, rate(SETTLED_RECALLS)),
                                sum_by(_PAIR, rate(REMAINING_TURNS + "_count")),
                            ),
                            legend(L_TOOL, L_MODEL) + " · recalls per offload",
                        ),
                    ),
                    "none",
                    w=12,
                ),
            ),
        ),
        Row(
            "Prompt cache",
            (
                Graph(
                    "Cache-hit ratio with / without a live offload",
                    "Share of model input tokens read from the prompt cache, for calls made "
                    "while the conversation had a live offload and for the others. A gap "
                    "means offloads disrupt the cache.",
                    (
                        Query(
                            ratio(
                                or_zero_like(
                                    sum_by(
                                        [L_MODEL, L_OFFLOAD_ACTIVE],
                                        rate(
                                            series(
                                                INPUT_TOKENS,
                                                **{L_CACHE: c.CacheUsage.READ.value},
                                            )
                                        ),
                                    ),
                                    sum_by([L_MODEL, L_OFFLOAD_ACTIVE], rate(INPUT_TOKENS)),
                                ),
                                sum_by([L_MODEL, L_OFFLOAD_ACTIVE], rate(INPUT_TOKENS)),
                            ),
                            legend(L_MODEL) + " · live offload " + legend(L_OFFLOAD_ACTIVE),
                        ),
                    ),
                    "percentunit",
                    max_value=1,
                ),
                Graph(
                    "Input tokens by cache use",
                    "Model input tokens per second: read from the cache, written to it, or "
                    "uncached, with and without a live offload.",
                    (
                        Query(
                            sum_by([L_CACHE, L_OFFLOAD_ACTIVE], rate(INPUT_TOKENS)),
                            legend(L_CACHE) + " · live offload " + legend(L_OFFLOAD_ACTIVE),
                        ),
                    ),
                    "short",
                ),
            ),
        ),
        Row(
            "Offload traces",
            (
                TraceTable(
                    "Fired offloads, compactions and losing settlements (Tempo)",
                    "TraceQL: offload-gate calls that fired, framework compactions (context "
                    "editing, summaries), and settled offloads or compactions that lost money.",
                    " || ".join(
                        [
                            spanset(
                                span_name(c.SPAN_OFFLOAD_GATE),
                                span_attr(c.ATTR_OFFLOAD_FIRE, TRUE, quote=False),
                            ),
                            spanset(span_name(c.SPAN_COMPACTION)),
                            spanset(
                                span_name(c.SPAN_OFFLOAD_SETTLE),
                                span_attr(c.ATTR_OFFLOAD_OUTCOME, _LOSS),
                            ),
                        ]
                    ),
                ),
                TraceTable(
                    "Fired offloads (Jaeger)",
                    "Jaeger search: offload-gate spans that fired, for the service in the "
                    "`service` variable.",
                    Jaeger(c.SPAN_OFFLOAD_GATE, ((c.ATTR_OFFLOAD_FIRE, TRUE),)),
                ),
                TraceView(),
            ),
        ),
    ),
)
