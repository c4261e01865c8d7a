"""structlog events of the decisions: names, fields, trace and span ids; no global setup."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
import structlog
from opentelemetry import metrics, trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from seamscope.telemetry import configure
from seamscope.telemetry import conventions as c
from seamscope.telemetry._logging import add_trace_context

from . import _support as s

SRC = Path(__file__).resolve().parents[2] / "src" / "seamscope"


def log(event: str, level: str, span: Any, **fields: Any) -> dict[str, Any]:
    return {"event": event, "log_level": level, **fields, **s.hex_ids(span)}


def test_decision_log_events_of_the_scripted_iteration(
    tracer_provider: Any,
    span_exporter: InMemorySpanExporter,
    captured_logs: list[dict[str, Any]],
) -> None:
    s.run(tracer_provider=tracer_provider)
    spans = span_exporter.get_finished_spans()
    expected = [
        log(
            c.LOG_STAGE_DEGRADED,
            "warning",
            s.named(spans, c.SPAN_STAGE)[0],
            stage="forced_choice",
            reason="forced 'export_csv' (resolver) not offered; force released",
        ),
        log(
            c.LOG_PALETTE_GATE_DROP,
            "warning",
            s.named(spans, c.SPAN_DISPATCH)[1],
            policy="hydrate_to_deploy",
            emitted_tool="hydrate_context",
            target="deploy",
            tool_call_id="call_2",
        ),
        log(
            c.LOG_OFFLOAD_DECIDED,
            "info",
            s.named(spans, c.SPAN_OFFLOAD_GATE)[0],
            model=s.HAIKU,
            net_saving_usd=s.PREDICTED_NET_SAVING,
            reason_code=c.OffloadReasonCode.NET_POSITIVE.value,
            offload_id="off-1",
        ),
    ]
    assert expected == captured_logs


def test_raising_predicate_logs_a_policy_error(
    tracer_provider: Any,
    span_exporter: InMemorySpanExporter,
    captured_logs: list[dict[str, Any]],
) -> None:
    policies = s.policies(docs_match=s.raising(ValueError("no intent model")))
    s.run(s.Scenario(policies=policies), tracer_provider=tracer_provider)
    spans = span_exporter.get_finished_spans()
    fields = {"policy": "docs_lookup", "source": "match", "error_type": "ValueError"}
    expected = [
        log(
            c.LOG_POLICY_ERROR,
            "warning",
            s.one(spans, c.SPAN_SEAM_PRE_MODEL),
            seam=c.Seam.PRE_MODEL.value,
            **fields,
        ),
        log(
            c.LOG_POLICY_ERROR,
            "warning",
            s.named(spans, c.SPAN_DISPATCH)[0],
            seam=c.Seam.POST_MODEL.value,
            **fields,
        ),
    ]
    assert expected == [e for e in captured_logs if e["event"] == c.LOG_POLICY_ERROR]


def test_raising_stage_logs_a_degraded_stage(
    tracer_provider: Any,
    span_exporter: InMemorySpanExporter,
    captured_logs: list[dict[str, Any]],
) -> None:
    stages = s.stages(replace={"role_palette": s.ExplodingStage()})
    s.run(s.Scenario(stages=stages), tracer_provider=tracer_provider)
    stage_spans = s.named(span_exporter.get_finished_spans(), c.SPAN_STAGE)
    expected = [
        log(
            c.LOG_STAGE_DEGRADED,
            "warning",
            stage_spans[0],
            stage="forced_choice",
            reason="forced 'export_csv' (resolver) not offered; force released",
        ),
        log(
            c.LOG_STAGE_DEGRADED,
            "warning",
            stage_spans[3],
            stage="role_palette",
            reason="stage raised RuntimeError: contained as abstain",
            error_type="RuntimeError",
        ),
    ]
    assert expected == [e for e in captured_logs if e["event"] == c.LOG_STAGE_DEGRADED]


def test_raising_args_transform_logs_an_adopter_error(
    tracer_provider: Any,
    span_exporter: InMemorySpanExporter,
    captured_logs: list[dict[str, Any]],
) -> None:
    policies = s.policies(transform=s.raising(KeyError("region")))
    s.run(s.Scenario(policies=policies), tracer_provider=tracer_provider)
    dispatch = s.named(span_exporter.get_finished_spans(), c.SPAN_DISPATCH)[0]
    expected = [
        log(
            c.LOG_ADOPTER_ERROR,
            "warning",
            dispatch,
            source="args_transform",
            policy="run_block_to_fetch",
            error_type="KeyError",
        ),
    ]
    assert expected == [e for e in captured_logs if e["event"] == c.LOG_ADOPTER_ERROR]


def test_log_event_names_are_the_conventions(
    tracer_provider: Any, captured_logs: list[dict[str, Any]]
) -> None:
    s.run(
        s.Scenario(
            policies=s.policies(
                docs_match=s.raising(ValueError("x")), transform=s.raising(KeyError("y"))
            ),
            stages=s.stages(replace={"role_palette": s.ExplodingStage()}),
        ),
        tracer_provider=tracer_provider,
    )
    assert {
        c.LOG_STAGE_DEGRADED,
        c.LOG_POLICY_ERROR,
        c.LOG_ADOPTER_ERROR,
        c.LOG_PALETTE_GATE_DROP,
        c.LOG_OFFLOAD_DECIDED,
    } == {e["event"] for e in captured_logs}
    assert [] == [e for e in captured_logs if "trace_id" not in e or "span_id" not in e]


def test_add_trace_context_processor(tracer_provider: Any) -> None:
    tracer = tracer_provider.get_tracer("test")
    with tracer.start_as_current_span("app") as span:
        event = add_trace_context(None, "info", {"event": "app.thing"})
        kept = add_trace_context(None, "info", {"event": "x", "trace_id": "given"})
    assert {"event": "app.thing", **s.hex_ids(span)} == event
    assert {"event": "x", "trace_id": "given"} == kept
    assert {"event": "y"} == add_trace_context(None, "info", {"event": "y"})


# -- no global configuration ------------------------------------------------------


@pytest.fixture
def global_setters(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []

    def spy(name: str) -> Any:
        def record(*args: Any, **kwargs: Any) -> None:
            calls.append(name)

        return record

    monkeypatch.setattr(structlog, "configure", spy("structlog.configure"))
    monkeypatch.setattr(structlog, "configure_once", spy("structlog.configure_once"))
    monkeypatch.setattr(trace, "set_tracer_provider", spy("trace.set_tracer_provider"))
    monkeypatch.setattr(metrics, "set_meter_provider", spy("metrics.set_meter_provider"))
    return calls


def test_library_never_configures_structlog_or_global_providers(
    global_setters: list[str], tracer_provider: Any, meter_provider: Any
) -> None:
    s.run(tracer_provider=tracer_provider, meter_provider=meter_provider)
    s.run()  # the global API's providers
    handle = configure(set_global=False, register_atexit=False, environ={})
    s.run(s.Scenario(), observer=handle.observer)
    handle.shutdown()
    assert [] == global_setters


def test_configure_sets_globals_only_when_asked(global_setters: list[str]) -> None:
    handle = configure(set_global=True, register_atexit=False, environ={})
    handle.shutdown()
    assert ["trace.set_tracer_provider", "metrics.set_meter_provider"] == global_setters


def _global_calls(path: Path) -> list[str]:
    names = {"configure", "configure_once", "set_tracer_provider", "set_meter_provider"}
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            if (
                node.func.attr in names
                and isinstance(owner, ast.Name)
                and owner.id in {"structlog", "trace", "metrics"}
            ):
                found.append(f"{path.relative_to(SRC)}: {owner.id}.{node.func.attr}")
    return found


def test_only_configure_and_the_cli_touch_global_setup() -> None:
    library = [p for p in SRC.rglob("*.py") if "cli" not in p.relative_to(SRC).parts]
    assert [
        "telemetry/_configure.py: trace.set_tracer_provider",
        "telemetry/_configure.py: metrics.set_meter_provider",
    ] == [hit for path in sorted(library) for hit in _global_calls(path)]
