"""A shadow configuration beside the live gate: its verdict on the gate span, a
disagreement counter, explain's tree; and calibrated priors recorded on every call."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any

from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests.telemetry._support import metric_points

from seamscope.adapters import DecisionLayer
from seamscope.cli import main
from seamscope.decisions import OffloadGate
from seamscope.decisions.records import ToolCall
from seamscope.telemetry import configure
from seamscope.telemetry import conventions as c

PRIORS = (
    'format = 1\nversion = "v3"\nmin_offloads = 1\n'
    '[[priors]]\ntool = "get_logs"\nmodel = "gpt-4o"\nhorizon = 0\n'
    "recall_probability = 1.0\noffloads = 40\n"
)


def _calls(layer: DecisionLayer) -> None:
    with layer.turn("conv-1", []) as turn, turn.iteration() as it:
        it.pre_model()
        it.offload(ToolCall("call_1", "get_logs", {}), 20_000.0)
        it.offload(ToolCall("call_2", "fetch_data", {}), 20_000.0)


def test_the_shadow_verdict_rides_on_the_live_decision(
    tmp_path: Path,
    tracer_provider: Any,
    meter_provider: Any,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
) -> None:
    priors = tmp_path / "p.toml"
    priors.write_text(PRIORS, encoding="utf-8")
    layer = DecisionLayer(
        default_model="gpt-4o",
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        offload_shadow=OffloadGate(priors=priors),
    )
    _calls(layer)
    gates = [s for s in span_exporter.get_finished_spans() if s.name == c.SPAN_OFFLOAD_GATE]
    shadow = [
        (
            g.attributes[c.ATTR_GEN_AI_TOOL_NAME],
            g.attributes[c.ATTR_OFFLOAD_FIRE],
            g.attributes[c.ATTR_OFFLOAD_SHADOW_FIRE],
            g.attributes[c.ATTR_OFFLOAD_SHADOW_REASON_CODE],
            g.attributes[c.ATTR_OFFLOAD_PRIOR_SOURCE],
        )
        for g in gates
    ]
    # live: both fire at the defaults; the shadow knows get_logs is always recalled at once
    assert [
        ("get_logs", True, False, c.OffloadReasonCode.NET_NOT_POSITIVE.value, "default"),
        ("fetch_data", True, True, c.OffloadReasonCode.NET_POSITIVE.value, "default"),
    ] == shadow
    assert (
        gates[1].attributes[c.ATTR_OFFLOAD_SHADOW_NET_SAVING_USD]
        == gates[1].attributes[c.ATTR_OFFLOAD_NET_SAVING_USD]
    )
    assert {
        frozenset(
            {(c.ATTR_GEN_AI_REQUEST_MODEL, "gpt-4o"), (c.ATTR_GEN_AI_TOOL_NAME, "get_logs")}
        ): 1
    } == metric_points(metric_reader)[c.METRIC_OFFLOAD_SHADOW_DISAGREEMENTS.name]


def test_calibrated_priors_are_recorded_on_every_gate_span(
    tmp_path: Path, tracer_provider: Any, span_exporter: InMemorySpanExporter
) -> None:
    priors = tmp_path / "p.toml"
    priors.write_text(PRIORS, encoding="utf-8")
    layer = DecisionLayer(
        default_model="gpt-4o", tracer_provider=tracer_provider, offload_priors=priors
    )
    _calls(layer)
    gates = [s for s in span_exporter.get_finished_spans() if s.name == c.SPAN_OFFLOAD_GATE]
    assert [
        (c.PriorSource.CALIBRATED.value, "v3", 0, False),
        (c.PriorSource.DEFAULT.value, "v3", 5, True),
    ] == [
        (
            g.attributes[c.ATTR_OFFLOAD_PRIOR_SOURCE],
            g.attributes[c.ATTR_OFFLOAD_PRIORS_VERSION],
            g.attributes[c.ATTR_OFFLOAD_HORIZON],
            g.attributes[c.ATTR_OFFLOAD_FIRE],
        )
        for g in gates
    ]


def test_explain_shows_the_shadow_and_the_priors(tmp_path: Path) -> None:
    priors = tmp_path / "p.toml"
    priors.write_text(PRIORS, encoding="utf-8")
    trace = tmp_path / "t.jsonl"
    handle = configure(
        service_name="shadow", trace_file=trace, set_global=False, register_atexit=False, environ={}
    )
    try:
        layer = DecisionLayer(
            default_model="gpt-4o",
            telemetry=handle,
            offload_priors=priors,
            offload_shadow=OffloadGate(),
        )
        _calls(layer)
        handle.flush()
    finally:
        handle.shutdown()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert 0 == main(["explain", str(trace)])
    text = out.getvalue()
    assert "priors v3: calibrated" in text
    assert "priors v3: default" in text
    assert "shadow fire net +$" in text and "(net_positive): disagrees" in text
    assert "(net_positive): agrees" in text
