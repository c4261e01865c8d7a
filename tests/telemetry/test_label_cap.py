"""Metric attribute values are capped per attribute; the tail folds into ``other``."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from seamscope.decisions import (
    ModelConfig,
    OffloadGate,
    SeamRouter,
    SelectionContext,
    SelectionPipeline,
    StageOutcome,
    ToolCallPolicy,
)
from seamscope.decisions._policy import build_dispatch_context
from seamscope.decisions.records import Seam
from seamscope.telemetry import OTelObserver, TelemetryConfig
from seamscope.telemetry import conventions as c
from seamscope.telemetry._instruments import LabelCap

from . import _support as s

MODELS = ("model-a", "model-b", "model-c", "model-d")


def observer(tracer_provider: Any, meter_provider: Any, **config: Any) -> OTelObserver:
    return OTelObserver(
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        config=TelemetryConfig.create(**config),
    )


def gate_models(points: dict[str, dict[frozenset[Any], Any]]) -> dict[str, int]:
    """Offload decisions per model label, summed over fire and reason code."""
    totals: dict[str, int] = {}
    for key, value in points[c.METRIC_OFFLOAD_DECISIONS.name].items():
        model = dict(key)[c.ATTR_GEN_AI_REQUEST_MODEL]
        totals[model] = totals.get(model, 0) + value
    return totals


def run_gate(obs: OTelObserver, models: tuple[str, ...] = MODELS) -> None:
    gate = OffloadGate(pricing=s.PRICING, observer=obs)
    for model in models:
        gate.evaluate(20_000.0, model)


def test_model_names_beyond_the_cap_fold_into_other(
    tracer_provider: Any,
    meter_provider: Any,
    metric_reader: InMemoryMetricReader,
    span_exporter: InMemorySpanExporter,
) -> None:
    run_gate(observer(tracer_provider, meter_provider, metric_label_cap=2))
    assert {"model-a": 1, "model-b": 1, c.OTHER: 2} == gate_models(s.metric_points(metric_reader))
    # spans keep the real value: only metric attributes are capped
    assert list(MODELS) == [
        span.attributes[c.ATTR_GEN_AI_REQUEST_MODEL]
        for span in s.named(span_exporter.get_finished_spans(), c.SPAN_OFFLOAD_GATE)
    ]


def test_a_value_kept_once_stays_kept(
    tracer_provider: Any, meter_provider: Any, metric_reader: InMemoryMetricReader
) -> None:
    obs = observer(tracer_provider, meter_provider, metric_label_cap=2)
    run_gate(obs, ("model-a", "model-b", "model-c", "model-a", "model-c", "model-b"))
    assert {"model-a": 2, "model-b": 2, c.OTHER: 2} == gate_models(s.metric_points(metric_reader))


def test_known_labels_are_kept_first_and_count_against_the_cap(
    tracer_provider: Any, meter_provider: Any, metric_reader: InMemoryMetricReader
) -> None:
    # cap 1: only the first known value (in sorted order) fits; everything else folds
    obs = observer(
        tracer_provider, meter_provider, metric_label_cap=1, known_labels={"model-d", "model-c"}
    )
    run_gate(obs)
    assert {c.OTHER: 3, "model-c": 1} == gate_models(s.metric_points(metric_reader))


def test_known_labels_leave_the_rest_of_the_cap_to_first_comers(
    tracer_provider: Any, meter_provider: Any, metric_reader: InMemoryMetricReader
) -> None:
    # cap 3: the two known values take two places, the first other value the third
    obs = observer(
        tracer_provider, meter_provider, metric_label_cap=3, known_labels={"model-c", "model-d"}
    )
    run_gate(obs)
    assert {"model-a": 1, c.OTHER: 1, "model-c": 1, "model-d": 1} == gate_models(
        s.metric_points(metric_reader)
    )


def test_policy_names_are_capped_per_attribute(
    tracer_provider: Any, meter_provider: Any, metric_reader: InMemoryMetricReader
) -> None:
    obs = observer(tracer_provider, meter_provider, metric_label_cap=2)
    # raising matches: error evaluations are counted per policy
    policies = [
        ToolCallPolicy(
            name=f"policy-{i}", match=s.raising(ValueError("x")), model=ModelConfig(s.HAIKU)
        )
        for i in range(4)
    ]
    router = SeamRouter(policies, default_model=s.DEFAULT_MODEL, observer=obs)
    router.pre_model(build_dispatch_context(Seam.PRE_MODEL, ()))
    # the model attribute has its own budget: two models still fit after two policies
    run_gate(obs, ("model-a", "model-b"))
    points = s.metric_points(metric_reader)
    assert {"policy-0": 1, "policy-1": 1, c.OTHER: 2} == {
        dict(key)[c.ATTR_POLICY_NAME]: value
        for key, value in points[c.METRIC_POLICY_EVALUATIONS.name].items()
    }
    assert {"model-a": 1, "model-b": 1} == gate_models(points)


class NamedStage:
    protects_forced = True

    def __init__(self, name: str) -> None:
        self.name = name

    def apply(self, tools: tuple[Any, ...], ctx: Any) -> StageOutcome:
        return StageOutcome.abstain("nothing to do")


def test_stage_names_are_capped(
    tracer_provider: Any, meter_provider: Any, metric_reader: InMemoryMetricReader
) -> None:
    obs = observer(tracer_provider, meter_provider, metric_label_cap=2)
    pipeline = SelectionPipeline([NamedStage(f"stage-{i}") for i in range(3)], observer=obs)
    pipeline.run(["a"], SelectionContext())
    assert {"stage-0": 1, "stage-1": 1, c.OTHER: 1} == {
        dict(key)[c.ATTR_STAGE_NAME]: value
        for key, value in s.metric_points(metric_reader)[c.METRIC_STAGE_OUTCOMES.name].items()
    }


def test_cap_from_the_environment(
    tracer_provider: Any,
    meter_provider: Any,
    metric_reader: InMemoryMetricReader,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SEAMSCOPE_METRIC_LABEL_CAP", "3")
    run_gate(observer(tracer_provider, meter_provider))
    assert {"model-a": 1, "model-b": 1, "model-c": 1, c.OTHER: 1} == gate_models(
        s.metric_points(metric_reader)
    )


def test_decision_layer_keeps_its_configured_policy_and_stage_names(
    tracer_provider: Any,
    meter_provider: Any,
    metric_reader: InMemoryMetricReader,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SEAMSCOPE_METRIC_LABEL_CAP", "2")
    # docs_lookup raises, so it is counted per policy (a plain no-match is not)
    s.run(
        s.Scenario(policies=s.policies(docs_match=s.raising(ValueError("x")))),
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
    )
    points = s.metric_points(metric_reader)
    # the configured names are admitted first, in sorted order, within the cap
    assert {"allowlist", "forced_choice", c.OTHER} == {
        dict(key)[c.ATTR_STAGE_NAME] for key in points[c.METRIC_STAGE_OUTCOMES.name]
    }
    assert {"docs_lookup", "hydrate_to_deploy", c.OTHER} == {
        dict(key)[c.ATTR_POLICY_NAME]
        for key in points[c.METRIC_POLICY_EVALUATIONS.name]
        if c.ATTR_POLICY_NAME in dict(key)
    }
    # the one unconfigured value (the model) has its own attribute's cap
    assert {s.HAIKU: 2} == gate_models(points)


def test_decision_layer_bounds_its_configured_names_by_the_cap(
    tracer_provider: Any,
    meter_provider: Any,
    metric_reader: InMemoryMetricReader,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Six stages and four policies configured, cap 2: per attribute, exactly the
    two sorted-first configured names of that attribute, the rest ``other``;
    the model label, which has no configured names, keeps its own two places."""
    monkeypatch.setenv("SEAMSCOPE_METRIC_LABEL_CAP", "2")
    s.run(
        s.Scenario(policies=s.policies(docs_match=s.raising(ValueError("x")))),
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
    )
    points = s.metric_points(metric_reader)
    stages = {dict(key)[c.ATTR_STAGE_NAME] for key in points[c.METRIC_STAGE_OUTCOMES.name]}
    policies = {
        dict(key)[c.ATTR_POLICY_NAME]
        for key in points[c.METRIC_POLICY_EVALUATIONS.name]
        if c.ATTR_POLICY_NAME in dict(key)
    }
    models = {
        dict(key)[c.ATTR_GEN_AI_REQUEST_MODEL] for key in points[c.METRIC_OFFLOAD_DECISIONS.name]
    }
    assert (
        {*sorted(s.STAGE_NAMES)[:2], c.OTHER},
        {*sorted(s.POLICY_NAMES)[:2], c.OTHER},
        True,
    ) == (stages, policies, c.OTHER not in models)


def test_label_cap_unit() -> None:
    cap = LabelCap(2, frozenset({"known"}))
    got = [cap("k", v) for v in ("a", "b", "c", "a", "known", "c")]
    # "known" holds one of the two places from the start
    assert ["a", c.OTHER, c.OTHER, "a", "known", c.OTHER] == got
    assert ["x", "none"] == [cap("other-key", "x"), cap("k", None)]


def test_label_cap_keeps_the_sorted_first_known_values() -> None:
    cap = LabelCap(2, {"zeta", "beta", "alpha"})
    got = [cap("k", v) for v in ("zeta", "alpha", "beta", "new", "zeta")]
    assert [c.OTHER, "alpha", "beta", c.OTHER, c.OTHER] == got


def test_the_cap_holds_across_layers_on_one_meter_provider(
    tracer_provider: Any,
    meter_provider: Any,
    metric_reader: InMemoryMetricReader,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """200 layers with a policy each: 8 policy names and ``other``, not 200."""
    from seamscope.decisions import ToolCall
    from seamscope.loop import DecisionLayer

    monkeypatch.setenv("SEAMSCOPE_METRIC_LABEL_CAP", "8")
    for index in range(200):
        layer = DecisionLayer(
            default_model=s.DEFAULT_MODEL,
            policies=[
                ToolCallPolicy(
                    name=f"layer-{index:03d}", match=s.always(True), redirect_to="fetch_data"
                )
            ],
            tracer_provider=tracer_provider,
            meter_provider=meter_provider,
        )
        with layer.turn(f"conv-{index}", []) as turn, turn.iteration() as it:
            it.post_model([ToolCall("call-1", "run_block", {})])
    points = s.metric_points(metric_reader)
    names = {
        metric: {dict(key)[c.ATTR_POLICY_NAME] for key in points[spec.name]}
        for metric, spec in (
            ("evaluations", c.METRIC_POLICY_EVALUATIONS),
            ("wins", c.METRIC_POLICY_WINS),
            ("redirects", c.METRIC_REDIRECTS),
        )
    }
    kept = {f"layer-{index:03d}" for index in range(8)} | {c.OTHER}
    assert {"evaluations": kept, "wins": kept, "redirects": kept} == names


def test_label_caps_sharing_labels_share_one_cap() -> None:
    from seamscope.telemetry._instruments import Labels

    labels = Labels()
    first = LabelCap(2, by_key={"k": ["b"]}, labels=labels)
    second = LabelCap(2, by_key={"k": ["c"]}, labels=labels)
    third = LabelCap(2, labels=labels)
    assert ["b", "c", c.OTHER, "b", c.OTHER] == [
        first("k", "b"),
        second("k", "c"),
        third("k", "d"),
        third("k", "b"),
        first("k", "e"),
    ]
