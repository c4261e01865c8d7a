"""Metric points of a scripted iteration: counters, the duration histogram, bounded labels."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from seamscope.decisions import ModelConfig, OffloadGate, SeamRouter, ToolCall, ToolCallPolicy
from seamscope.decisions._policy import build_dispatch_context
from seamscope.decisions.records import GateCall, PolicyResult, Seam
from seamscope.telemetry import OTelObserver, TelemetryConfig
from seamscope.telemetry import conventions as c

from . import _support as s

PRE, POST = Seam.PRE_MODEL.value, Seam.POST_MODEL.value


def evaluation(seam: str, policy: str, result: PolicyResult) -> frozenset[Any]:
    return s.point_key(
        {c.ATTR_SEAM: seam, c.ATTR_POLICY_NAME: policy, c.ATTR_POLICY_RESULT: result.value}
    )


def counted(seam: str, result: PolicyResult) -> frozenset[Any]:
    """Evaluations that did not match or apply: per seam and result, no policy."""
    return s.point_key({c.ATTR_SEAM: seam, c.ATTR_POLICY_RESULT: result.value})


def win(seam: str, source: c.WinnerSource, policy: str) -> frozenset[Any]:
    return s.point_key(
        {c.ATTR_SEAM: seam, c.ATTR_SEAM_WINNER_SOURCE: source.value, c.ATTR_POLICY_NAME: policy}
    )


def stage(name: str, outcome: c.StageOutcomeKind, degraded: str) -> frozenset[Any]:
    return s.point_key(
        {
            c.ATTR_STAGE_NAME: name,
            c.ATTR_STAGE_OUTCOME: outcome.value,
            c.ATTR_STAGE_DEGRADED: degraded,
        }
    )


def gate(model: str, fire: str, code: c.OffloadReasonCode) -> frozenset[Any]:
    return s.point_key(
        {
            c.ATTR_GEN_AI_REQUEST_MODEL: model,
            c.ATTR_OFFLOAD_FIRE: fire,
            c.ATTR_OFFLOAD_REASON_CODE: code.value,
        }
    )


MODEL = s.point_key({c.ATTR_GEN_AI_REQUEST_MODEL: s.HAIKU})
MATCHED, NOT_MATCHED = PolicyResult.MATCHED, PolicyResult.NOT_MATCHED
SKIPPED, ERROR = PolicyResult.SKIPPED, PolicyResult.ERROR
SELECT, ABSTAIN = c.StageOutcomeKind.SELECT, c.StageOutcomeKind.ABSTAIN

EXPECTED_COUNTERS = {
    c.METRIC_POLICY_EVALUATIONS.name: {
        # hydrate_to_deploy has no model; docs_lookup did not match
        counted(PRE, SKIPPED): 1,
        counted(PRE, NOT_MATCHED): 1,
        evaluation(PRE, "sales_data_read", MATCHED): 1,
        # over the two calls: hydrate_to_deploy skipped for run_block,
        # docs_lookup not matched for each, sales_data_read stopped by its guard
        counted(POST, SKIPPED): 1,
        counted(POST, NOT_MATCHED): 1,
        evaluation(POST, "sales_data_read", MATCHED): 1,
        evaluation(POST, "run_block_to_fetch", MATCHED): 1,
        evaluation(POST, "hydrate_to_deploy", MATCHED): 1,
    },
    c.METRIC_POLICY_WINS.name: {
        win(PRE, c.WinnerSource.POLICY, "sales_data_read"): 1,
        win(POST, c.WinnerSource.POLICY, "run_block_to_fetch"): 1,
        win(POST, c.WinnerSource.POLICY, "hydrate_to_deploy"): 1,
    },
    c.METRIC_REDIRECTS.name: {
        s.point_key(
            {
                c.ATTR_POLICY_NAME: "run_block_to_fetch",
                c.ATTR_DISPATCH_PALETTE_GATE: c.PaletteVerdict.KEPT.value,
            }
        ): 1,
        s.point_key(
            {
                c.ATTR_POLICY_NAME: "hydrate_to_deploy",
                c.ATTR_DISPATCH_PALETTE_GATE: c.PaletteVerdict.DROPPED.value,
            }
        ): 1,
    },
    c.METRIC_STAGE_OUTCOMES.name: {
        stage("forced_choice", ABSTAIN, "true"): 1,
        stage("intent_routing", SELECT, "false"): 1,
        stage("lazy_routing", ABSTAIN, "false"): 1,
        stage("role_palette", SELECT, "false"): 1,
        stage("policy", SELECT, "false"): 1,
        stage("allowlist", SELECT, "false"): 1,
    },
    c.METRIC_OFFLOAD_DECISIONS.name: {
        gate(s.HAIKU, "true", c.OffloadReasonCode.NET_POSITIVE): 1,
        gate(s.HAIKU, "false", c.OffloadReasonCode.BELOW_THRESHOLD): 1,
    },
    c.METRIC_OFFLOAD_PREDICTED_NET_SAVING.name: {MODEL: s.PREDICTED_NET_SAVING},
    c.METRIC_SELECTION_TOOLS.name: {
        s.point_key({c.ATTR_SELECTION_SET: c.SelectionSet.OFFERED.value}): 6,
        s.point_key({c.ATTR_SELECTION_SET: c.SelectionSet.SELECTED.value}): 3,
    },
    c.METRIC_MODEL_INPUT_TOKENS.name: {
        s.point_key(
            {
                c.ATTR_GEN_AI_REQUEST_MODEL: s.HAIKU,
                c.ATTR_USAGE_CACHE: c.CacheUsage.UNCACHED.value,
                c.ATTR_OFFLOAD_ACTIVE: "false",
            }
        ): 1200,
    },
}

EXPECTED_DURATIONS = {
    # one per decision kind per iteration (the stages and dispatches are in
    # their pipeline's and seam's duration, and on their own spans)
    c.DecisionKind.SELECT_TOOLS.value: 1,
    c.DecisionKind.PRE_MODEL.value: 1,
    c.DecisionKind.POST_MODEL.value: 1,
    c.DecisionKind.OFFLOAD_GATE.value: 2,
}


DURATIONS_ON = TelemetryConfig(decision_duration_metric=True)


def run_points(
    tracer_provider: Any,
    meter_provider: Any,
    reader: InMemoryMetricReader,
    telemetry_config: TelemetryConfig | None = None,
    **kw: Any,
) -> dict[str, dict[frozenset[Any], Any]]:
    s.run(
        s.Scenario(**kw),
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        telemetry_config=telemetry_config,
    )
    return s.metric_points(reader)


def durations(points: dict[str, dict[frozenset[Any], Any]]) -> dict[str, int]:
    return {
        dict(key)[c.ATTR_DECISION_KIND]: point.count
        for key, point in points[c.METRIC_DECISION_DURATION.name].items()
    }


def test_counter_points_of_the_scripted_iteration(
    tracer_provider: Any, meter_provider: Any, metric_reader: InMemoryMetricReader
) -> None:
    # by default there is no duration histogram: spanmetrics derive it
    assert EXPECTED_COUNTERS == run_points(tracer_provider, meter_provider, metric_reader)


def test_decision_duration_histogram_is_opt_in(
    tracer_provider: Any, meter_provider: Any, metric_reader: InMemoryMetricReader
) -> None:
    points = run_points(
        tracer_provider,
        meter_provider,
        metric_reader,
        DURATIONS_ON,
    )
    assert EXPECTED_COUNTERS == {
        name: value for name, value in points.items() if name != c.METRIC_DECISION_DURATION.name
    }
    assert EXPECTED_DURATIONS == durations(points)
    # the decision kinds are exactly these: no stage or dispatch kind
    assert set(EXPECTED_DURATIONS) == {kind.value for kind in c.DecisionKind}
    for point in points[c.METRIC_DECISION_DURATION.name].values():
        assert tuple(c.DECISION_DURATION_BUCKETS) == tuple(point.explicit_bounds)
        assert 0 < point.sum < 1.0
        assert point.count == sum(point.bucket_counts)


def test_instruments_carry_conventions_units_and_descriptions(
    tracer_provider: Any, meter_provider: Any, metric_reader: InMemoryMetricReader
) -> None:
    s.run(tracer_provider=tracer_provider, meter_provider=meter_provider)
    data = metric_reader.get_metrics_data()
    assert data is not None
    seen = {
        metric.name: (metric.unit, metric.description)
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        if sm.scope.name == "seamscope"
        for metric in sm.metrics
    }
    expected = {spec.name: (spec.unit, spec.description) for spec in c.METRICS if spec.name in seen}
    assert expected == seen
    assert set(EXPECTED_COUNTERS) == set(seen)


def test_metric_attributes_are_the_declared_bounded_ones(
    tracer_provider: Any, meter_provider: Any, metric_reader: InMemoryMetricReader
) -> None:
    s.run(tracer_provider=tracer_provider, meter_provider=meter_provider)
    s.run(
        s.Scenario(
            policies=s.policies(docs_match=s.raising(ValueError("x"))),
            stages=s.stages(replace={"role_palette": s.ExplodingStage()}),
        ),
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
    )
    declared = {spec.name: set(spec.attributes) for spec in c.METRICS}
    points = s.metric_points(metric_reader)
    # not-matched and skipped evaluations are counted per seam and result only
    counted = {PolicyResult.NOT_MATCHED.value, PolicyResult.SKIPPED.value}
    assert [] == [
        (name, sorted(dict(key)))
        for name, by_key in points.items()
        for key in by_key
        if set(dict(key))
        != (
            declared[name] - {c.ATTR_POLICY_NAME}
            if name == c.METRIC_POLICY_EVALUATIONS.name
            and dict(key)[c.ATTR_POLICY_RESULT] in counted
            else declared[name]
        )
    ]
    values = {value for by_key in points.values() for key in by_key for _, value in key}
    ids_and_text = {s.CONVERSATION, s.AGENT, "call_1", "call_2", "off-1", s.USER_TEXT}
    assert set() == values & ids_and_text
    # every value is a configured name, a closed-set member, a flag or the fold value
    closed = {
        m.value
        for enum_type in (
            c.Seam,
            c.PolicyResult,
            c.WinnerSource,
            c.PaletteVerdict,
            c.StageOutcomeKind,
            c.OffloadReasonCode,
            c.DecisionKind,
            c.CacheUsage,
            c.SelectionSet,
        )
        for m in enum_type
    }
    allowed = closed | set(s.POLICY_NAMES) | set(s.STAGE_NAMES) | {s.HAIKU}
    allowed |= {"true", "false", "none", c.OTHER}
    assert set() == values - allowed


def test_raising_predicate_and_stage_are_counted(
    tracer_provider: Any, meter_provider: Any, metric_reader: InMemoryMetricReader
) -> None:
    points = run_points(
        tracer_provider,
        meter_provider,
        metric_reader,
        policies=s.policies(docs_match=s.raising(ValueError("x"))),
        stages=s.stages(replace={"role_palette": s.ExplodingStage()}),
    )
    evaluations = points[c.METRIC_POLICY_EVALUATIONS.name]
    assert 1 == evaluations[evaluation(PRE, "docs_lookup", ERROR)]
    assert 1 == evaluations[evaluation(POST, "docs_lookup", ERROR)]
    assert 1 == points[c.METRIC_STAGE_OUTCOMES.name][stage("role_palette", ABSTAIN, "true")]


def test_no_policy_won_is_labelled_none(
    tracer_provider: Any, meter_provider: Any, metric_reader: InMemoryMetricReader
) -> None:
    points = run_points(tracer_provider, meter_provider, metric_reader, policies=[])
    assert {
        win(PRE, c.WinnerSource.DEFAULT, "none"): 1,
        win(POST, c.WinnerSource.NONE, "none"): 2,
    } == points[c.METRIC_POLICY_WINS.name]
    assert c.METRIC_REDIRECTS.name not in points
    assert c.METRIC_POLICY_EVALUATIONS.name not in points


def test_one_duration_per_decision_kind_per_iteration(
    tracer_provider: Any, meter_provider: Any, metric_reader: InMemoryMetricReader
) -> None:
    points = run_points(
        tracer_provider, meter_provider, metric_reader, DURATIONS_ON, max_iterations=2
    )
    assert {kind: 2 * n for kind, n in EXPECTED_DURATIONS.items()} == durations(points)


def test_counters_accumulate_across_iterations(
    tracer_provider: Any, meter_provider: Any, metric_reader: InMemoryMetricReader
) -> None:
    for _ in range(3):
        s.run(
            tracer_provider=tracer_provider,
            meter_provider=meter_provider,
            telemetry_config=DURATIONS_ON,
        )
    points = s.metric_points(metric_reader)
    assert {
        key: 3 * value for key, value in EXPECTED_COUNTERS[c.METRIC_POLICY_WINS.name].items()
    } == points[c.METRIC_POLICY_WINS.name]
    total = points[c.METRIC_OFFLOAD_PREDICTED_NET_SAVING.name][MODEL]
    assert abs(3 * s.PREDICTED_NET_SAVING - total) < 1e-12
    assert {kind: 3 * n for kind, n in EXPECTED_DURATIONS.items()} == durations(points)


def test_components_used_directly_record_the_same_instruments(
    tracer_provider: Any, meter_provider: Any, metric_reader: InMemoryMetricReader
) -> None:
    observer = OTelObserver(
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        config=TelemetryConfig.create(decision_duration_metric=True),
    )
    policy = ToolCallPolicy(
        name="p", match=s.always(True), model=ModelConfig(s.HAIKU), redirect_to="b"
    )
    router = SeamRouter([policy], default_model=s.DEFAULT_MODEL, observer=observer)
    ctx = build_dispatch_context(Seam.PRE_MODEL, (), resolved_tool_names=("a", "b"))
    router.pre_model(ctx)
    router.post_model(
        build_dispatch_context(Seam.POST_MODEL, (), resolved_tool_names=("a", "b")),
        [ToolCall("1", "a")],
    )
    OffloadGate(pricing=s.PRICING, observer=observer).evaluate(100.0, s.HAIKU, GateCall())
    points = s.metric_points(metric_reader)
    assert {
        evaluation(PRE, "p", MATCHED): 1,
        evaluation(POST, "p", MATCHED): 1,
    } == points[c.METRIC_POLICY_EVALUATIONS.name]
    assert {gate(s.HAIKU, "false", c.OffloadReasonCode.BELOW_THRESHOLD): 1} == points[
        c.METRIC_OFFLOAD_DECISIONS.name
    ]
    # the dispatch is inside its seam's duration: no duration of its own
    assert {
        c.DecisionKind.PRE_MODEL.value: 1,
        c.DecisionKind.POST_MODEL.value: 1,
        c.DecisionKind.OFFLOAD_GATE.value: 1,
    } == durations(points)


def test_a_reevaluated_output_counts_its_decision_but_not_its_saving_again(
    meter_provider: Any, metric_reader: InMemoryMetricReader, captured_logs: list[Any]
) -> None:
    """A framework that re-decides an earlier output every iteration (symfonic)."""
    offload_gate = OffloadGate(
        observer=OTelObserver(meter_provider=meter_provider), id_factory=lambda: "off-1"
    )
    first = offload_gate.evaluate(20_000, s.HAIKU, GateCall("conv", tool_call_id="t1"))
    offload_gate.evaluate(20_000, s.HAIKU, GateCall("conv", tool_call_id="t1", reevaluation=True))
    points = s.metric_points(metric_reader)
    fired = gate(s.HAIKU, "true", c.OffloadReasonCode.NET_POSITIVE)
    assert 2 == points[c.METRIC_OFFLOAD_DECISIONS.name][fired]
    assert {MODEL: first.net_saving_usd} == points[c.METRIC_OFFLOAD_PREDICTED_NET_SAVING.name]
    assert 1 == sum(1 for e in captured_logs if e["event"] == c.LOG_OFFLOAD_DECIDED)
